"""A crawl's memory does not grow with the lake: parsed cells are staged on disk as the crawl goes
and streamed into bronze when the batch lands (a crawl of the portal's full seed once held every
cell of the batch as Python strings and was killed for memory)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from spark_jobs.crawl.crawl import TMP, run_crawl
from spark_jobs.crawl.land import CellStaging, ParsedTable, land_batch
from spark_jobs.lake.store import LakeStore
from tests.crawl.conftest import crawl_settings, csv_bytes
from tests.crawl.test_memory_bombs import peak_rss_mb


def _lake(root: Path, n_tables: int, rows: int = 20_000, cols: int = 10) -> None:
    rng = random.Random(n_tables)
    root.mkdir(parents=True)
    for t in range(n_tables):
        body = [[f"t{t}-{rng.randrange(10**9)}" for _ in range(cols)] for _ in range(rows)]
        (root / f"table_{t:03d}.csv").write_bytes(csv_bytes([[f"c{c}" for c in range(cols)], *body]))


def _crawl_peak_mb(tmp_path: Path, n_tables: int) -> float:
    lake = tmp_path / f"lake-{n_tables}"
    _lake(lake, n_tables)
    code = (
        "from pathlib import Path\n"
        "from spark_jobs.crawl.crawl import run_crawl\n"
        "from tests.crawl.conftest import crawl_settings\n"
        f"report = run_crawl(crawl_settings(Path({str(tmp_path / f'home-{n_tables}')!r})), folder={str(lake)!r})\n"
        f"assert report.new == {n_tables} and not report.failures, report\n"
        "print('crawled')\n"
    )
    peak, last = peak_rss_mb(code)
    assert last == "crawled"
    return peak


@pytest.mark.slow
def test_a_crawl_of_four_times_the_tables_holds_about_as_much_memory(tmp_path: Path) -> None:
    few = _crawl_peak_mb(tmp_path, 16)  # 3.2 M cells: several times what the landing streams at once
    many = _crawl_peak_mb(tmp_path, 64)  # 12.8 M cells: held in memory they took 20 MB more per table
    assert many < few + 250, (few, many)


def test_staged_cells_land_like_cells_held_in_memory(tmp_path: Path) -> None:
    tables = [
        ParsedTable(f"file:t{i}.csv", ["a", "b"], [[f"{i}-{r}" for r in range(50)], [None, "x\x00y"] * 25])
        for i in (3, 1, 2)
    ]
    staging = CellStaging(tmp_path / "staging", n_buckets=2, group_rows=64)
    described = [staging.add(t) for t in tables]
    assert [d.columns for d in described] == [(), (), ()] and [d.n_rows for d in described] == [50, 50, 50]

    in_memory, staged = LakeStore(str(tmp_path / "a")), LakeStore(str(tmp_path / "b"))
    land_batch(in_memory, tables[:2], [], n_buckets=2)
    land_batch(staged, described[:2], [], n_buckets=2, staging=staging)  # t2 was staged but is not landed
    assert sorted(staging.cells(["file:t2.csv"]).read_all()["table_id"].unique().to_pylist()) == ["file:t2.csv"]

    def rows(store: LakeStore, name: str, drop: tuple[str, ...]) -> list[dict[str, object]]:
        table: pa.Table = LakeStore(store.root).read_arrow(name)
        return sorted(table.drop_columns(list(drop)).to_pylist(), key=repr)

    assert rows(staged, "cells", ()) == rows(in_memory, "cells", ())
    assert {r["table_id"] for r in rows(staged, "cells", ())} == {"file:t3.csv", "file:t1.csv"}
    assert rows(staged, "datasets", ("landed_at",)) == rows(in_memory, "datasets", ("landed_at",))


def test_the_next_crawl_removes_what_a_killed_crawl_staged(tmp_path: Path) -> None:
    """Staged cells live in the crawl's own temp folder, named after its process; a crawl that was
    killed leaves it behind, and the next crawl removes it (never the folder of a live crawl)."""
    settings = crawl_settings(tmp_path / "home")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    abandoned = Path(settings.home) / TMP / f"{dead.pid}-0123abcd"
    running = Path(settings.home) / TMP / f"{os.getpid()}-4567ef01"
    for folder in (abandoned, running):
        (folder / "cells-x").mkdir(parents=True)
        (folder / "cells-x" / "bucket-0.parquet").write_bytes(b"staged")
    _lake(tmp_path / "lake", 1, rows=10)
    assert run_crawl(settings, folder=str(tmp_path / "lake")).new == 1
    assert not abandoned.exists() and running.exists()
    assert [p.name for p in (Path(settings.home) / TMP).iterdir()] == [running.name]  # its own folder is gone too
