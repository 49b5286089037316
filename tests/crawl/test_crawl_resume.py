"""A crawl killed anywhere and rerun leaves bronze exactly as one uninterrupted crawl does: same
`datasets` rows, same `cells`, same change batch (no duplicates, nothing lost)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from plugins.local_portal import PortalHandle
from spark_jobs.crawl.crawl import run_crawl
from spark_jobs.lake.faults import InjectedFault, injected
from tests.crawl.conftest import bronze, changes_of, crawl_settings, csv_bytes


class KilledError(Exception):
    pass


def _mutate(portal: PortalHandle) -> None:
    s = portal.store
    s.set_content("socrata/aaaa-0001", csv_bytes([["id", "v"], ["1", "changed"]]))
    s.remove("socrata/aaaa-0002")
    s.remove("ckan/pk-1")
    s.touch("ckan/pk-2")
    s.add_socrata("aaaa-0009", csv_bytes([["id", "v"], ["9", "new"]]))
    s.add_ckan("pk-9", [("n1", "CSV", csv_bytes([["x"], ["1"]])), ("n2", "JSON", b'[{"y": 2}]')])


def _setup(portal: PortalHandle) -> None:
    for i in range(1, 5):
        portal.store.add_socrata(f"aaaa-000{i}", csv_bytes([["id", "v"], *[[str(j), f"s{i}{j}"] for j in range(3)]]))
        portal.store.add_ckan(
            f"pk-{i}", [(f"r{i}", "CSV", csv_bytes([["k"], [f"c{i}"]])), (f"q{i}", "TSV", b"a\tb\n1\t2\n")]
        )


FAULT_POINTS = [
    "dataset:socrata:127.0.0.1:aaaa-0003",
    "dataset:ckan:127.0.0.1:pk-9/n1",
    "land",
    "commit:cells",
    "commit:datasets",
    "commit:changes",
    "manifest:bronze",
]


@pytest.fixture
def crawled(tmp_path: Path, portal: PortalHandle):  # type: ignore[no-untyped-def]
    """A lake after one crawl, the portal then changed, and the reference second crawl."""
    _setup(portal)
    base = crawl_settings(tmp_path / "base", portal)
    assert run_crawl(base).batch_id == 1
    _mutate(portal)
    ref = crawl_settings(tmp_path / "ref", portal)
    shutil.copytree(base.home, ref.home)
    report = run_crawl(ref)
    assert report.batch_id == 2 and report.deleted == 3
    return base, ref


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_killed_crawl_rerun_equals_uninterrupted(tmp_path: Path, portal: PortalHandle, crawled, point: str) -> None:
    base, ref = crawled
    run = crawl_settings(tmp_path / f"run-{point.replace(':', '_').replace('/', '_')}", portal)
    shutil.copytree(base.home, run.home)

    def fault(step: str) -> None:
        if step == point:
            raise KilledError(step)

    armed = injected(point) if point.startswith(("commit:", "manifest:")) else contextlib.nullcontext()
    with pytest.raises((KilledError, InjectedFault)), armed:
        run_crawl(run, fault=fault)
    rerun = run_crawl(run)
    assert rerun.batch_id == 2
    assert bronze(run) == bronze(ref)
    assert changes_of(run, 2) == changes_of(ref, 2)
    assert run_crawl(run).batch_id is None


def test_killed_process_rerun_equals_uninterrupted(tmp_path: Path, portal: PortalHandle, crawled) -> None:
    """The crawl runs in a child process killed (SIGKILL) between the cells and the datasets commits
    of its landing; the rerun in this process repairs it."""
    base, ref = crawled
    run = crawl_settings(tmp_path / "proc", portal)
    shutil.copytree(base.home, run.home)
    script = textwrap.dedent(f"""
        import dataclasses, os
        from pathlib import Path
        from catalog.core.settings import SourceConfig
        from tests.crawl.conftest import crawl_settings
        from spark_jobs.crawl.crawl import run_crawl
        settings = crawl_settings(Path({str(run.home)!r}))
        settings = dataclasses.replace(settings, sources=(
            SourceConfig(name="soc", kind="socrata", url={portal.url!r}),
            SourceConfig(name="ck", kind="ckan", url={portal.url!r})))
        run_crawl(settings)
    """)
    env = {**os.environ, "JUNCTURE_FAULT": "commit:datasets"}
    proc = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parents[2], timeout=300, env=env)
    assert proc.returncode == -signal.SIGKILL
    assert bronze(run) != bronze(ref)  # the child really died half-way
    assert run_crawl(run).batch_id == 2
    assert bronze(run) == bronze(ref)
