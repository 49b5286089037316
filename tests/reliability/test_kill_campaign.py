"""A kill anywhere leaves the last committed state, whatever runs next.

The campaign first runs the pipeline once, never killed, recording every checkpoint label it passes
(`spark_jobs.lake.faults.recording`): a crawl, a first index, an incremental index and a rebuild. From
those traces it draws its kill points: every commit of the crawl, for every unit of every index
stage a point between two of its table commits and the point before its manifest commit, the
publish steps, and the rebuild's. Then, on a second home over the same folder, it kills the
operation at each point (in-process with `injected`, plus a few real SIGKILLs of a child process)
and runs a different next operation each time: the same command again, another batch, a batch
landed on top of the pending one, a rebuild, an index. Every fault must fire (exit status 1 and the
label in the message, or return code -9), so a renamed label cannot make a point vacuous.

At the end the killed catalog answers exactly what the files say and exactly what the never-killed
catalog answers over the same files.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spark_jobs.lake.faults import injected, recording
from tests.reliability import lake_files as lf
from tests.reliability.answers import Run, assert_matches, catalog_answers, juncture, ok, setup_env

# Two dozen crawl/index/rebuild runs and four child JVMs on a shared 2-core machine: the default timeout is too short.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

WORKTREE = Path(__file__).resolve().parents[2]
CLI = "import sys; from catalog.cli.main import main; sys.exit(main(sys.argv[1:]))"
INDEX_UNITS = ("tokens", "profiles", "keys", "josie", "lshensemble", "mate", "pexeso", "relate")
MIN_KILL_POINTS = 20


@dataclass(frozen=True)
class KillPoint:
    op: str  # crawl | index | rebuild
    spec: str  # `<label prefix>@<n>`, as JUNCTURE_FAULT takes it
    then: str  # the next operation: rerun | rebuild | index | land | batch
    sigkill: bool = False

    @property
    def label(self) -> str:
        return self.spec.rpartition("@")[0]


def spec_at(trace: list[str], i: int) -> str:
    """The spec that fires at the i-th label of an operation's trace."""
    label = trace[i]
    return f"{label}@{sum(1 for x in trace[: i + 1] if x.startswith(label))}"


def units(trace: list[str]) -> Iterator[tuple[str, list[int]]]:
    """(unit, positions of its labels up to and including `manifest:<unit>`) in trace order."""
    start = 0
    for i, label in enumerate(trace):
        if label.startswith("manifest:"):
            yield label.partition(":")[2], list(range(start, i + 1))
            start = i + 1


def unit_points(trace: list[str]) -> list[tuple[int, str]]:
    """For every unit: a point between two of its table commits (when it has two) and the point
    before its manifest commit."""
    out = []
    for unit, positions in units(trace):
        commits = [i for i in positions if trace[i].startswith("commit:")]
        if len(commits) >= 2:
            out.append((commits[-1], unit))
        out.append((positions[-1], unit))
    return out


def publish_points(trace: list[str]) -> list[int]:
    first_seen: dict[str, int] = {}
    for i, label in enumerate(trace):
        if label.startswith("publish:"):
            first_seen.setdefault(label, i)
    return sorted(first_seen.values())


def plan(first: list[str], crawl: list[str], index: list[str], rebuild: list[str]) -> list[KillPoint]:
    """The campaign's kill points and next operations, from the never-killed run's traces."""
    nexts: dict[str, Iterator[str]] = {
        "crawl": itertools.cycle(["rerun", "index", "rebuild", "batch"]),
        # mostly operations that leave the killed batch pending, so that the next kill point (a later
        # stage) meets the same batch: every completion (an index, a rebuild, which catches up first)
        # costs one more batch indexed to reach the next point
        "index": itertools.cycle(["land", "rerun", "land", "rebuild", "land", "index", "batch", "rerun"]),
        "rebuild": itertools.cycle(["batch", "rerun", "index"]),
    }
    points: list[KillPoint] = []
    build = [i for i, unit in unit_points(first) if unit == "josie"]
    if build:  # a first build killed half-way (the campaign starts with one batch landed, none indexed)
        points.append(KillPoint("index", spec_at(first, build[0]), "rerun"))
    for i in sorted({crawl.index(label) for label in crawl if label.startswith(("commit:", "manifest:"))}):
        points.append(KillPoint("crawl", spec_at(crawl, i), next(nexts["crawl"])))
    for i in sorted({i for i, _ in unit_points(index)} | set(publish_points(index))):
        points.append(KillPoint("index", spec_at(index, i), next(nexts["index"])))
    # a rebuild recomputes everything (JOSIE regrouped, every list re-related): three points, between
    # two JOSIE commits, before the relate manifest, and at its publish
    rebuild_units = unit_points(rebuild)
    chosen = [i for i, unit in rebuild_units if unit == "josie"][:1]
    chosen += [i for i, unit in rebuild_units if unit == "relate"][-1:]
    for i in sorted({*chosen, *publish_points(rebuild)[:1]}):
        points.append(KillPoint("rebuild", spec_at(rebuild, i), next(nexts["rebuild"])))
    # real SIGKILLs of a child process: a crawl, an index mid-stage and at publish, a rebuild
    for op, trace, pick in (
        ("crawl", crawl, "manifest:bronze"),
        ("index", index, "manifest:josie"),
        ("index", index, "publish:"),
        ("rebuild", rebuild, "manifest:josie"),
    ):
        hits = [i for i, label in enumerate(trace) if label.startswith(pick)]
        if hits:
            points.append(
                KillPoint(
                    op,
                    spec_at(trace, hits[0]),
                    {"crawl": "index", "index": "rebuild", "rebuild": "batch"}[op],
                    sigkill=True,
                )
            )
    return points


def check_coverage(points: list[KillPoint], traces: dict[str, list[str]]) -> None:
    labels = {p.label for p in points}
    summary = {name: sorted(set(t)) for name, t in traces.items()}
    assert len(points) >= MIN_KILL_POINTS, f"only {len(points)} kill points; labels seen: {summary}"
    assert any(p.op == "crawl" for p in points), summary
    for unit in ("bronze", *INDEX_UNITS):
        assert f"manifest:{unit}" in labels, f"no kill point before the {unit} manifest; labels seen: {summary}"
    assert any(label.startswith("publish:") for label in labels), summary
    assert any(p.op == "rebuild" for p in points), summary
    assert sum(p.sigkill for p in points) >= 3, summary
    assert len({p.then for p in points}) >= 4


class Lake:
    """The folder both homes crawl, its small per-batch mutations, and the pending-batch bookkeeping."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.n = 0
        self.pending = False  # a landed batch not indexed yet
        self.dirty = False  # files changed since the last completed crawl

    def mutate(self) -> None:
        """One more batch's worth of change: a new table, a changed one and (after the first) a deleted one."""
        i, self.n = self.n, self.n + 1
        lf.write_table(
            self.root / "new" / f"n{i}.csv",
            ["city", "code", "i"],
            [[lf.CITIES[(i + r) % 20], lf.COUNTRIES[(i * 3 + r) % 20], str(i * 100 + r)] for r in range(12)],
        )
        lf.append_rows(self.root, "misc/tiny.csv", [[str(100 + i), lf.CITIES[i % 20]]])
        gone = self.root / "new" / f"n{i - 1}.csv"
        if i == 0:
            gone = self.root / "misc" / "nulls.csv"
        gone.unlink()
        self.dirty = True

    def crawl(self) -> Run:
        run = ok("crawl", "--dir", str(self.root), "--no-progress")
        self.pending = self.pending or "— batch" in run.out
        self.dirty = False
        return run

    def index(self) -> Run:
        run = ok("index")
        self.pending = False
        return run


ARGV = {"index": ("index",), "rebuild": ("rebuild",)}


def argv_of(op: str, lake: Lake) -> tuple[str, ...]:
    return ("crawl", "--dir", str(lake.root), "--no-progress") if op == "crawl" else ARGV[op]


def prepare(point: KillPoint, lake: Lake) -> None:
    """Give the operation something to do: a change to crawl, a pending batch to index. A change
    that a killed crawl did not land is still there to crawl (fewer batches keep the campaign short)."""
    if point.op in ("crawl", "index") and not lake.dirty and not (point.op == "index" and lake.pending):
        lake.mutate()
    if point.op == "index" and not lake.pending:
        lake.crawl()
    if point.op == "rebuild" and lake.pending:  # a rebuild first catches up: the point is in the rebuild proper
        lake.index()


def kill_in_process(point: KillPoint, lake: Lake) -> None:
    with injected(point.spec):
        run = juncture(*argv_of(point.op, lake))
    fired = re.search(rf"injected fault at {re.escape(point.label)}(?![\w-])", run.err)
    assert run.rc == 1 and fired, f"{point}: the fault did not fire (exit {run.rc}): {run.err[-1500:]}"


def kill_child(point: KillPoint, lake: Lake, home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUNCTURE_")}
    env.update({k: v for k, v in os.environ.items() if k in ("JUNCTURE_HOME", "JUNCTURE_CATALOG_URL")})
    env.update(PYTHONPATH=str(WORKTREE), JUNCTURE_FAULT=point.spec, JUNCTURE_FAULT_MODE="kill")
    proc = subprocess.run(
        [sys.executable, "-c", CLI, *argv_of(point.op, lake)],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == -9, f"{point}: not killed (exit {proc.returncode}): {proc.stderr[-1500:]}"


def next_operation(point: KillPoint, lake: Lake) -> None:
    """The operation after the kill; every one must succeed on what the kill left."""
    then = point.then
    if then == "rerun":
        then = point.op
    if then == "crawl":
        lake.crawl()
    elif then == "index":
        lake.index()
    elif then == "rebuild":  # catches up on pending batches first
        ok("rebuild")
        lake.pending = False
    elif then == "land":  # another batch lands on top of the one the kill left pending
        lake.mutate()
        lake.crawl()
    elif then == "batch":
        lake.mutate()
        lake.crawl()
        lake.index()
    else:  # pragma: no cover - a typo in the plan
        raise AssertionError(then)


def diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return [
        f"{key}: killed {a.get(key)!r} != never killed {b.get(key)!r}"
        for key in sorted(set(a) | set(b))
        if a.get(key) != b.get(key)
    ]


def test_kill_anywhere_then_anything_then_exact_answers(spark, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    url_ref = f"sqlite:///{tmp_path / 'reference.db'}"
    url_kill = f"sqlite:///{tmp_path / 'killed.db'}"
    ref_home, kill_home = tmp_path / "reference", tmp_path / "killed"
    lake = Lake(tmp_path / "lake_src")
    lf.build_lake(lake.root)

    # 1. the never-killed run, recording the labels of each kind of operation
    setup_env(monkeypatch, ref_home, url_ref)
    with recording() as crawl_0:
        lake.crawl()
    with recording() as first:
        lake.index()
    lake.mutate()
    with recording() as crawl:
        lake.crawl()
    with recording() as index:
        lake.index()
    with recording() as rebuild:
        ok("rebuild")
    traces = {"first crawl": crawl_0, "crawl": crawl, "first index": first, "index": index, "rebuild": rebuild}
    points = plan(first, crawl, index, rebuild)
    check_coverage(points, traces)

    # 2. the killed run over the same folder: kill, then a different next operation, point after point
    setup_env(monkeypatch, kill_home, url_kill)
    lake.pending = False
    lake.crawl()
    for n, point in enumerate(points, start=1):
        t0 = time.monotonic()
        prepare(point, lake)
        if point.sigkill:
            kill_child(point, lake, kill_home)
        else:
            kill_in_process(point, lake)
        next_operation(point, lake)
        print(f"kill point {n}/{len(points)} {point}: {time.monotonic() - t0:.1f}s", flush=True)  # in failure reports
    lake.crawl()
    lake.index()
    oracle = lf.LakeOracle(lake.root).observe()
    killed = catalog_answers(oracle, tmp_path)
    assert_matches(killed, oracle, "after the kill campaign")

    # 3. the never-killed run brought to the same files answers the same
    setup_env(monkeypatch, ref_home, url_ref)
    lake.crawl()
    lake.index()
    reference = catalog_answers(oracle, tmp_path)
    assert_matches(reference, oracle, "never killed")
    differences = diff(killed, reference)
    assert not differences, "\n".join(differences[:40])
