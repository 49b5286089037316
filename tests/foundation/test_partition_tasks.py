"""Work split by partition: a task reads its partition's files a table at a time, and writes its
partition's new files for the driver to commit (real delta-rs tables and files)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from catalog.core.errors import LakeError
from spark_jobs.lake.partition_tasks import by_table, partition_tables, write_staged_file
from spark_jobs.lake.store import LakeStore

SCHEMA = pa.schema([("table_id", pa.string()), ("bucket", pa.int32()), ("row", pa.int64()), ("value", pa.string())])
SIZES = {"big": 700, "mid": 120, "t1": 30, "t2": 7, "t3": 1, "nulls": 5}  # skewed


def _rows(table_id: str, start: int, n: int) -> list[dict[str, object]]:
    bucket = sum(map(ord, table_id)) % 3
    value = (lambda i: None) if table_id == "nulls" else (lambda i: None if i % 4 == 0 else f"{table_id}-{i}")
    return [{"table_id": table_id, "bucket": bucket, "row": i, "value": value(i)} for i in range(start, start + n)]


@pytest.fixture
def store(tmp_path: Path) -> LakeStore:
    """Each table's rows appended in three pieces, interleaved with the others': a table's rows
    are spread over several files of its bucket."""
    store = LakeStore(str(tmp_path / "lake"), pinned=False)
    for piece in range(3):
        rows = []
        for table_id, n in SIZES.items():
            share = n // 3 + (n % 3 if piece == 2 else 0)
            rows += _rows(table_id, piece * (n // 3), share)
        store.append("cells", pa.Table.from_pylist(rows, schema=SCHEMA), partition_by=["bucket"])
    return store


def _expected(store: LakeStore, tables: list[str] | None) -> dict[str, list[tuple[int, str]]]:
    out: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for r in store.read_arrow("cells").to_pylist():
        if r["value"] is not None and (tables is None or r["table_id"] in tables):
            out[r["table_id"]].append((r["row"], r["value"]))
    return {t: sorted(v) for t, v in out.items()}


@pytest.mark.parametrize("max_rows", [1, 50, 10_000])
@pytest.mark.parametrize("tables", [None, ["big", "t2", "nulls", "absent"]])
def test_each_table_comes_whole_once_from_its_partitions_files(
    store: LakeStore, max_rows: int, tables: list[str] | None
) -> None:
    files = store.files_by_partition("cells", "bucket")
    assert sum(len(f) for f in files.values()) > len(files)  # several files to a bucket
    seen: dict[str, list[tuple[int, str]]] = {}
    for uris in files.values():
        for part in partition_tables(
            uris, ["table_id", "row", "value"], tables=tables, where=pc.field("value").is_valid(), max_rows=max_rows
        ):
            ids = set(part.column("table_id").to_pylist())
            assert len(ids) == 1 and part.num_rows > 0
            (table_id,) = ids
            assert table_id not in seen  # all its rows in one piece, whatever the chunk size
            seen[table_id] = sorted(zip(part.column("row").to_pylist(), part.column("value").to_pylist(), strict=True))
    assert seen == _expected(store, tables)
    assert "nulls" not in seen  # no row kept: no table handed on


def test_by_table_splits_in_order_of_first_appearance() -> None:
    rows = pa.table({"table_id": ["b", "a", "b", "c", "a"], "n": [1, 2, 3, 4, 5]})
    parts = [(p.column("table_id")[0].as_py(), p.column("n").to_pylist()) for p in by_table(rows)]
    assert parts == [("b", [1, 3]), ("a", [2, 5]), ("c", [4])]
    assert list(by_table(rows.slice(0, 0))) == []


def test_files_by_partition_prunes_and_names_only_partition_columns(store: LakeStore) -> None:
    everything = store.files_by_partition("cells", "bucket")
    bucket = str(sum(map(ord, "big")) % 3)
    only = store.files_by_partition("cells", "bucket", where={"bucket": [int(bucket)]})
    assert list(only) == [bucket] and only[bucket] == everything[bucket]
    with pytest.raises(LakeError, match="not a partition column"):
        store.files_by_partition("cells", "table_id")


def test_files_written_by_tasks_replace_the_table_in_one_commit(store: LakeStore) -> None:
    before = store.version("cells")
    staged = store.staged_write("cells")
    new = {0: _rows("x", 0, 5), 2: _rows("y", 0, 3) + _rows("z", 0, 2)}
    for bucket, rows in new.items():  # as tasks would: each its own partition's file
        table = pa.Table.from_pylist([{**r, "bucket": bucket} for r in rows], schema=SCHEMA)
        write_staged_file(staged.uri, {"bucket": bucket}, table.drop_columns(["bucket"]))
    assert store.read_arrow("cells").num_rows == sum(SIZES.values())  # nothing visible before the commit
    result = store.overwrite_staged(staged, SCHEMA, partition_by=["bucket"])
    assert result.version == before + 1 and result.n_rows_written == 10 and result.n_files_added == 2
    got = sorted((r["bucket"], r["table_id"], r["row"]) for r in store.read_arrow("cells").to_pylist())
    assert got == sorted((b, r["table_id"], r["row"]) for b, rows in new.items() for r in rows)
    assert not (Path(store.root) / "cells" / "_staging" / staged.write_id).exists()
    empty = store.staged_write("cells")  # no task wrote: the table is emptied
    store.overwrite_staged(empty, SCHEMA, partition_by=["bucket"])
    assert store.read_arrow("cells").num_rows == 0
