"""Every writing `juncture` command takes the lake lock: concurrent writers lose nothing.

Two `juncture crawl --dir` processes on two folders into one lake both land, in distinct batches,
and every table of both folders reaches the catalog. Of two `juncture index` processes, the second
either waits for the first (a bounded wait, `JUNCTURE_LOCK_WAIT_S`) or, with no wait allowed, exits
2 at once with one line saying the lake is busy and who holds it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from catalog.core.identity import file_table_id
from catalog.core.settings import environment_with
from tests.reliability import lake_files as lf
from tests.reliability.answers import catalog_tables, ok, setup_env

# Child JVMs racing each other on a shared 2-core machine: the default timeout is too short.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

WORKTREE = Path(__file__).resolve().parents[2]
CLI = "import sys; from catalog.cli.main import main; sys.exit(main(sys.argv[1:]))"


@dataclass
class Child:
    """A `juncture` process; its output goes to files (a pipe nobody reads would block Spark's logging)."""

    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def finish(self, timeout: float = 900) -> tuple[int, str, str]:
        rc = self.proc.wait(timeout=timeout)
        return rc, self.out.read_text(errors="replace"), self.err.read_text(errors="replace")


@pytest.fixture
def spawn() -> Iterator[Callable[..., Child]]:
    """Start `juncture ARGV` as separate processes, in the environment a user's shell would give them;
    any still running when the test ends (a failed assertion) are killed."""
    children: list[Child] = []

    def start(home: Path, catalog_url: str, *argv: str, lock_wait_s: float | None = None) -> Child:
        waits = {} if lock_wait_s is None else {"lock_wait_s": lock_wait_s}
        env = environment_with(os.environ, home=home, catalog_url=catalog_url, **waits)
        env.update(PYTHONPATH=str(WORKTREE))
        n = len(children)
        out, err = home / f"child{n}.out", home / f"child{n}.err"
        with out.open("wb") as o, err.open("wb") as e:
            proc = subprocess.Popen([sys.executable, "-c", CLI, *argv], cwd=home, env=env, stdout=o, stderr=e)
        children.append(Child(proc, out, err))
        return children[-1]

    yield start
    for child in children:
        if child.poll() is None:
            child.proc.kill()
            child.proc.wait()


def folder_of(root: Path, prefix: str, n_files: int, rows: int) -> set[str]:
    """`n_files` CSV tables under `root/prefix/`; their table ids."""
    for i in range(n_files):
        lf.write_table(
            root / prefix / f"t{i:03d}.csv",
            ["id", "city", "value"],
            [[f"{prefix}{i}-{r}", lf.CITIES[(i + r) % len(lf.CITIES)], str(r * i)] for r in range(rows)],
        )
    return {file_table_id(rel) for rel in lf.listed_files(root)}


def batch_of(stdout: str) -> int:
    m = re.search(r"batch (\d+)", stdout)
    assert m, stdout
    return int(m.group(1))


def test_two_concurrent_crawls_lose_nothing(spark, tmp_path, monkeypatch, spawn):  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    catalog_url = f"sqlite:///{tmp_path / 'catalog.db'}"
    setup_env(monkeypatch, home, catalog_url)
    a = folder_of(tmp_path / "a", "alpha", 15, 40)
    b = folder_of(tmp_path / "b", "beta", 15, 40)
    procs = [
        spawn(home, catalog_url, "crawl", "--dir", str(tmp_path / d), "--no-progress", lock_wait_s=300)
        for d in ("a", "b")
    ]
    results = [p.finish() for p in procs]
    for rc, _out, err in results:
        assert rc == 0, err[-2000:]
    assert batch_of(results[0][1]) != batch_of(results[1][1])
    for d in ("a", "b"):  # a recrawl finds nothing new: both landings are the lake's state
        assert "nothing to index" in ok("crawl", "--dir", str(tmp_path / d), "--no-progress").out
    ok("index")
    tables = catalog_tables()
    assert set(tables) == a | b
    assert all(t["n_rows"] == 40 for t in tables.values())


def test_a_second_index_waits_or_exits_2_naming_the_holder(spark, tmp_path, monkeypatch, spawn):  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    catalog_url = f"sqlite:///{tmp_path / 'catalog.db'}"
    setup_env(monkeypatch, home, catalog_url)
    root = tmp_path / "lake_src"
    lf.build_lake(root)
    ok("crawl", "--dir", str(root), "--no-progress")

    # no wait allowed: while one index runs, another exits 2 at once with one line naming the holder
    first = spawn(home, catalog_url, "-v", "index", lock_wait_s=0)
    deadline = time.monotonic() + 600
    while "stage done" not in first.err.read_text(errors="replace"):  # it holds the lock once a stage ran
        assert first.poll() is None and time.monotonic() < deadline, first.err.read_text(errors="replace")[-2000:]
        time.sleep(0.5)
    rc, out, err = spawn(home, catalog_url, "index", lock_wait_s=0).finish(timeout=300)
    assert rc == 2, (rc, out, err[-2000:])
    assert first.poll() is None, "the second index waited for the first to end"
    said = [line for line in err.splitlines() if line.startswith("juncture:")]
    assert len(said) == 1 and "lake is busy" in said[0].lower(), err[-2000:]
    assert str(first.pid) in said[0], f"the message does not say who holds the lock: {said[0]!r}"
    assert err.splitlines() == said, (
        "exit status 2 is one line on stderr; the refused writer printed more "
        f"(did it start Spark before asking for the lock?):\n{err[-2000:]}"
    )

    # with a wait: the second one waits for the first, then finds nothing left to do
    second = spawn(home, catalog_url, "index", lock_wait_s=600)
    rc1, out1, err1 = first.finish()
    rc2, out2, err2 = second.finish()
    assert (rc1, rc2) == (0, 0), (err1[-2000:], err2[-2000:])
    assert "indexed batch 1" in out1 and "nothing to index" in out2, (out1, out2)
    oracle = lf.LakeOracle(root).observe()
    assert set(catalog_tables()) == set(oracle.tables)
