"""The lake storage module against real Spark, real delta-rs and real files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder

from catalog.core.errors import LakeError
from spark_jobs.lake.commit_point import UnitSpec, applied_batch, at_batch, begin, commit
from spark_jobs.lake.faults import InjectedFault, injected
from spark_jobs.lake.store import LakeStore, in_predicate, sql_literal

ROWS = [(f"t{i % 5}", i, i % 5 % 3, f"v{i}") for i in range(60)]
SCHEMA = "table_id string, row long, bucket int, value string"


def rows_of(table: pa.Table) -> list[tuple]:
    cols = ["table_id", "row", "bucket", "value"]
    return sorted(zip(*(table[c].to_pylist() for c in cols), strict=True))


def spark_rows(df) -> list[tuple]:  # type: ignore[no-untyped-def]
    return sorted(tuple(r) for r in df.select("table_id", "row", "bucket", "value").collect())


def arrow(rows: list[tuple]) -> pa.Table:
    cols = list(zip(*rows, strict=True)) if rows else [[], [], [], []]
    return pa.table(
        {
            "table_id": pa.array(cols[0], pa.string()),
            "row": pa.array(cols[1], pa.int64()),
            "bucket": pa.array(cols[2], pa.int32()),
            "value": pa.array(cols[3], pa.string()),
        }
    )


@pytest.fixture
def store(tmp_path: Path, spark) -> LakeStore:  # type: ignore[no-untyped-def]
    return LakeStore(str(tmp_path / "lake"), spark)


def test_quoting_helper_escapes_quotes() -> None:
    assert sql_literal("it's") == "'it''s'"
    assert sql_literal(3) == "3"
    assert in_predicate("table_id", ["a", "b'c"]) == "\"table_id\" IN ('a', 'b''c')"
    assert in_predicate("x", []) == "FALSE"


def test_append_reads_back_with_spark_deltalake_and_pyarrow(store: LakeStore, spark) -> None:  # type: ignore[no-untyped-def]
    result = store.append("cells", spark.createDataFrame(ROWS, SCHEMA), partition_by=["bucket"])
    assert result.version == 0 and result.n_rows_written == len(ROWS)
    assert store.engine == "delta-rs"
    assert spark_rows(store.read("cells")) == sorted(ROWS)
    assert rows_of(store.read_arrow("cells")) == sorted(ROWS)
    # delta-rs's own query engine sees the same rows, partition column included
    table = DeltaTable(store.uri("cells"))
    batches = QueryBuilder().register("cells", table).execute("SELECT table_id, row, bucket, value FROM cells")
    assert rows_of(pa.table(batches.read_all())) == sorted(ROWS)
    # plain pyarrow over the snapshot's files (the partition column lives in the folder names)
    plain = pq.read_table(table.file_uris())
    assert sorted(zip(plain["table_id"].to_pylist(), plain["row"].to_pylist(), strict=True)) == sorted(
        (r[0], r[1]) for r in ROWS
    )
    assert store.partition_columns("cells") == ["bucket"]


def test_reads_filter_and_prune_by_partition(store: LakeStore, spark) -> None:  # type: ignore[no-untyped-def]
    store.append("cells", spark.createDataFrame(ROWS, SCHEMA), partition_by=["bucket"])
    want = sorted(r for r in ROWS if r[2] == 1 and r[0] in ("t1", "t4"))
    assert spark_rows(store.read("cells", where={"bucket": [1], "table_id": ["t1", "t4"]})) == want
    assert rows_of(store.read_arrow("cells", where={"bucket": [1], "table_id": ["t1", "t4"]})) == want


def test_overwrite_replaces_everything_and_history_grows(store: LakeStore, spark) -> None:  # type: ignore[no-untyped-def]
    store.append("t", spark.createDataFrame(ROWS, SCHEMA))
    store.overwrite("t", arrow(ROWS[:3]))
    assert rows_of(store.read_arrow("t")) == sorted(ROWS[:3])
    assert store.version("t") == 1
    assert len(store.history("t")) == 2
    assert rows_of(store.read_arrow("t", version=0)) == sorted(ROWS)  # time travel still sees the old rows


def test_overwrite_where_replaces_only_the_named_tables_and_partitions(store: LakeStore, spark) -> None:  # type: ignore[no-untyped-def]
    store.append("cells", spark.createDataFrame(ROWS, SCHEMA), partition_by=["bucket"])
    files_before = set(DeltaTable(store.uri("cells")).file_uris())
    new = [("t1", 1000, 1, "new"), ("t1", 1001, 1, "new2")]
    result = store.overwrite_where(
        "cells", spark.createDataFrame(new, SCHEMA), column="table_id", values=["t1"], partitions={"bucket": [1]}
    )
    want = sorted([r for r in ROWS if r[0] != "t1"] + new)
    assert spark_rows(store.read("cells")) == want
    files_after = set(DeltaTable(store.uri("cells")).file_uris())
    untouched = {f for f in files_before if "/bucket=1/" not in f}
    assert untouched <= files_after  # other partitions were not rewritten
    assert result.n_files_removed == len(files_before - untouched)


def test_overwrite_where_with_arrow_input_and_empty_replacement(store: LakeStore) -> None:
    store.append("t", arrow(ROWS))
    store.overwrite_where("t", arrow([]), column="table_id", values=["t0", "t3"])
    assert rows_of(store.read_arrow("t")) == sorted(r for r in ROWS if r[0] not in ("t0", "t3"))


def test_value_ranges_prune_reads_and_rewrites_to_the_files_that_can_hold_the_rows(store: LakeStore, spark) -> None:  # type: ignore[no-untyped-def]
    """Arrow-written files carry the range of their table ids: a batch reads and rewrites only the
    files whose range can hold its tables. One write's files in different partitions share their
    names, which must not make a read skip a file of another partition."""
    by_table = {t: [r for r in ROWS if r[0] == t] for t in ("t0", "t1", "t2", "t3", "t4")}  # t<k> in bucket k % 3
    store.append("cells", arrow(by_table["t0"] + by_table["t1"] + by_table["t2"]), partition_by=["bucket"])
    store.append("cells", arrow(by_table["t3"] + by_table["t4"]), partition_by=["bucket"])
    for wanted in (["t1"], ["t0", "t4"], ["t9"]):
        want = sorted(r for r in ROWS if r[0] in wanted)
        assert rows_of(store.read_arrow("cells", where={"table_id": wanted})) == want
        assert spark_rows(store.read("cells", where={"table_id": wanted})) == want

    new = [("t3", 500, 0, "new")]  # landed as a stream, as a crawl lands it
    batches = pa.RecordBatchReader.from_batches(arrow(new).schema, arrow(new).to_batches())
    result = store.overwrite_where("cells", batches, column="table_id", values=["t3"], partitions={"bucket": [0]})
    assert result.n_files_removed == 1  # bucket 0 has t0's file too, whose range cannot hold t3
    assert rows_of(store.read_arrow("cells")) == sorted([r for r in ROWS if r[0] != "t3"] + new)


def test_statistics_of_a_column_after_a_nested_one_are_its_own(store: LakeStore) -> None:
    """Leaf columns of a struct come before the next field in the Parquet footer; each field's
    range must come from its own leaf, or a read by that field would skip the file."""
    pair = pa.array([{"a": 1, "b": 100}, {"a": 2, "b": 200}], pa.struct([("a", pa.int64()), ("b", pa.int64())]))
    store.append("t", pa.table({"pair": pair, "n": pa.array([5, 6], pa.int64())}))
    assert store.read_arrow("t", where={"n": [5]})["n"].to_pylist() == [5]
    assert store.read_arrow("t", where={"n": [7]}).num_rows == 0


@pytest.mark.parametrize("engine_input", ["spark", "arrow"])
def test_merge_upserts_by_composite_key(store: LakeStore, spark, engine_input: str) -> None:  # type: ignore[no-untyped-def]
    store.append("t", arrow(ROWS), partition_by=["bucket"])
    upsert = [("t2", 2, 2, "changed"), ("t9", 99, 0, "inserted")]
    data = spark.createDataFrame(upsert, SCHEMA) if engine_input == "spark" else arrow(upsert)
    store.merge("t", data, keys=["table_id", "row"])
    want = sorted([r for r in ROWS if (r[0], r[1]) != ("t2", 2)] + upsert)
    assert rows_of(store.read_arrow("t")) == want


def test_merge_by_single_key_into_new_table_creates_it(store: LakeStore) -> None:
    store.merge("t", arrow(ROWS[:2]), keys=["row"])
    store.merge("t", arrow([("x", ROWS[0][1], 0, "updated")]), keys=["row"])
    assert rows_of(store.read_arrow("t")) == sorted([("x", ROWS[0][1], 0, "updated"), ROWS[1]])


def test_delete_where(store: LakeStore, spark) -> None:  # type: ignore[no-untyped-def]
    store.append("cells", spark.createDataFrame(ROWS, SCHEMA), partition_by=["bucket"])
    store.delete_where("cells", column="table_id", values=["t0", "it's"], partitions={"bucket": [0]})
    assert spark_rows(store.read("cells")) == sorted(r for r in ROWS if r[0] != "t0")


UNIT = UnitSpec("demo", ("a", "b"))


def test_a_unit_update_is_visible_only_after_its_manifest(store: LakeStore) -> None:
    base = begin(store, UNIT)
    store.append("a", arrow(ROWS[:2]))
    store.append("b", arrow(ROWS[2:3]))
    assert not LakeStore(store.root).exists("a")  # written, not committed: readers see no table
    commit(store, UNIT, base, batch_id=1, kind="update")
    reader = LakeStore(store.root)
    assert rows_of(reader.read_arrow("a")) == sorted(ROWS[:2]) and reader.read_arrow("b").num_rows == 1
    assert applied_batch(reader, UNIT) == 1


def test_a_writer_killed_between_tables_is_rolled_back_by_the_next(store: LakeStore) -> None:
    base = begin(store, UNIT)
    store.append("a", arrow(ROWS[:2]))
    store.append("b", arrow(ROWS[2:3]))
    commit(store, UNIT, base, batch_id=1, kind="update")
    crashed = LakeStore(store.root)
    begin(crashed, UNIT)
    crashed.append("a", arrow(ROWS[3:5]))  # committed to Delta, but the manifest never follows
    with pytest.raises(InjectedFault), injected("commit:b"):
        crashed.overwrite("b", arrow(ROWS[5:6]))
    reader = LakeStore(store.root)
    assert rows_of(reader.read_arrow("a")) == sorted(ROWS[:2])  # the committed state, not the latest
    nxt = LakeStore(store.root)
    base = begin(nxt, UNIT)  # rolls table a back
    assert nxt.latest_version("a") > reader.version("a")
    nxt.append("a", arrow(ROWS[6:7]))
    commit(nxt, UNIT, base, batch_id=2, kind="update")
    assert rows_of(LakeStore(store.root).read_arrow("a")) == sorted([*ROWS[:2], ROWS[6]])


def test_a_first_build_killed_half_way_is_dropped(store: LakeStore) -> None:
    base = begin(store, UNIT)
    store.append("a", arrow(ROWS[:2]))
    assert not LakeStore(store.root).exists("a")
    nxt = LakeStore(store.root)
    base = begin(nxt, UNIT)
    assert not nxt.physically_exists("a")
    nxt.append("a", arrow(ROWS[2:3]))
    commit(nxt, UNIT, base, batch_id=1, kind="build")
    assert LakeStore(store.root).read_arrow("a").num_rows == 1


def test_at_batch_reads_the_state_a_batch_produced(store: LakeStore) -> None:
    for batch_id, rows in ((1, ROWS[:1]), (2, ROWS[1:3])):
        base = begin(store, UNIT)
        store.append("a", arrow(rows))
        commit(store, UNIT, base, batch_id=batch_id, kind="update")
    assert at_batch(LakeStore(store.root), 1).read_arrow("a").num_rows == 1
    assert at_batch(LakeStore(store.root), 2).read_arrow("a").num_rows == 3
    assert not at_batch(LakeStore(store.root), 0).exists("a")


def test_a_write_without_begin_is_refused(store: LakeStore) -> None:
    base = begin(store, UNIT)
    store.append("a", arrow(ROWS[:1]))
    commit(store, UNIT, base, batch_id=1, kind="update")
    LakeStore(store.root, pinned=False).append("a", arrow(ROWS[1:2]))  # an uncommitted version
    with pytest.raises(LakeError, match="must begin"):
        LakeStore(store.root).append("a", arrow(ROWS[2:3]))


def test_schema_mismatch_is_refused(store: LakeStore) -> None:
    store.append("t", arrow(ROWS))
    with pytest.raises(LakeError, match="schema mismatch"):
        store.append("t", pa.table({"table_id": ["x"]}))


def test_unknown_table_and_bad_names(store: LakeStore) -> None:
    with pytest.raises(LakeError, match="no Delta table"):
        store.read_arrow("missing")
    with pytest.raises(LakeError):
        store.uri("../escape")


KILLED_WRITER = textwrap.dedent("""
    import os, signal, sys
    import pyarrow as pa
    from catalog.core.settings import load_settings
    from spark_jobs.lake.store import LakeStore
    from spark_jobs.lake.session import get_spark
    import dataclasses
    settings = load_settings({}, cwd=__import__("pathlib").Path(sys.argv[1]))
    settings = dataclasses.replace(settings, spark=dataclasses.replace(settings.spark, master="local[1]"))
    spark = get_spark(settings)
    store = LakeStore(sys.argv[2], spark)
    print("dying before commit", flush=True)
    os.environ["JUNCTURE_FAULT"] = "commit:cells"
    schema = "table_id string, row long, bucket int, value string"
    df = spark.createDataFrame([("t1", 1000 + i, 1, "new") for i in range(50)], schema)
    store.overwrite_where("cells", df, column="table_id", values=["t1"], partitions={"bucket": [1]})
    print("committed (should not happen)")
""")


@pytest.mark.slow
def test_writer_killed_between_files_and_commit_leaves_previous_version(  # type: ignore[no-untyped-def]
    store: LakeStore, spark, tmp_path: Path
) -> None:
    store.append("cells", spark.createDataFrame(ROWS, SCHEMA), partition_by=["bucket"])
    before = spark_rows(store.read("cells"))
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(tmp_path), store.root], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert "dying before commit" in proc.stdout and "should not happen" not in proc.stdout
    # the dead writer's files are on disk, but no reader sees them
    on_disk = {str(p) for p in Path(store.uri("cells")).rglob("*.parquet")}
    assert len(on_disk) > len(DeltaTable(store.uri("cells")).file_uris())
    assert store.version("cells") == 0
    assert spark_rows(store.read("cells")) == before
    assert rows_of(store.read_arrow("cells")) == before
    # a rerun commits
    new = [("t1", 1000 + i, 1, "new") for i in range(50)]
    store.overwrite_where(
        "cells", spark.createDataFrame(new, SCHEMA), column="table_id", values=["t1"], partitions={"bucket": [1]}
    )
    assert spark_rows(store.read("cells")) == sorted([r for r in ROWS if r[0] != "t1"] + new)


def test_writer_failing_before_commit_in_process_changes_nothing(tmp_path: Path, spark) -> None:  # type: ignore[no-untyped-def]
    good = LakeStore(str(tmp_path / "lake"), spark)
    good.append("t", arrow(ROWS))
    bad = LakeStore(str(tmp_path / "lake"), spark)
    with pytest.raises(InjectedFault), injected("commit:t"):
        bad.merge("t", arrow([("t1", 1, 1, "x")]), keys=["table_id", "row"])
    assert good.version("t") == 0 and rows_of(good.read_arrow("t")) == sorted(ROWS)


def test_local_root_may_be_relative(tmp_path: Path) -> None:
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        store = LakeStore("rel-lake")
        store.append("t", arrow(ROWS[:2]))
        assert store.uri("t") == str(tmp_path / "rel-lake" / "t")
        assert rows_of(store.read_arrow("t")) == sorted(ROWS[:2])
    finally:
        os.chdir(cwd)


def test_root_with_spaces_and_unicode(tmp_path: Path, spark) -> None:  # type: ignore[no-untyped-def]
    """delta-rs percent-encodes local file paths; Spark and pyarrow must still find the files."""
    store = LakeStore(str(tmp_path / "my lake ü"), spark)
    store.append("cells", spark.createDataFrame(ROWS, SCHEMA), partition_by=["bucket"])
    store.overwrite_where(
        "cells", arrow([("t1", 7, 1, "x")]), column="table_id", values=["t1"], partitions={"bucket": [1]}
    )
    want = sorted([r for r in ROWS if r[0] != "t1"] + [("t1", 7, 1, "x")])
    assert spark_rows(store.read("cells")) == want
    assert rows_of(store.read_arrow("cells")) == want
