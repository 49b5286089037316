"""The MATE index in the lake: build and incremental ADD/DELETE per change batch.

A task per bucket of bronze `cells` reads the bucket's files of a batch's added tables itself
(`spark_jobs.lake.partition_tasks`: a table's cells are all in its bucket) and indexes each table
in one Arrow pass (`index_table`, in `mapInArrow`):
1. its distinct raw values are normalized once each: values of letters, digits and `_:/,-` only
   by Arrow's lower case (their token), the others by `normalize_token` itself, so MATE's tokens are
   the lake's tokens (`tests/mate` checks answers against an oracle normalizing every cell);
2. each distinct token is hashed once (`catalog.core.xash.xash`, the function a query is hashed
   with), each row's super key is the OR of its cells' hashes (`super_keys`: every row, the last
   included, no per-row update), packed `ROW_BLOCK` rows to a blob;
3. the cells sorted by (token, row, column) give each token's posting list in the table.
A table's postings and key blocks come out of the same pass. A full build's tasks write them as the
two lake tables' files themselves and the driver commits those (`LakeStore.staged_write`); a
batch's come back to Spark as rows of one frame (`kind`), cached, and replace the touched tables'
rows. A cell-level Spark plan (explode, then a `bit_or` and a
`collect_list` aggregation) shuffled every cell three times and took 4.7 times JOSIE's build on the
demo lake; grouping Spark's read of the cells by table shuffled them once, still most of the build
on the full seed (65 M cells); the tasks by bucket shuffle none.

A batch rewrites both tables' rows of its touched tables (a changed table is a delete plus an
insert), in the buckets of those tables only. A changed XASH spec (`[index.mate]` bits, n_chars)
re-hashes the whole lake in the next update or rebuild: keys of two specs never mix.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.pandas.types import from_arrow_schema

from catalog.core.identity import NULL_LIKES, normalize_token, table_bucket
from catalog.core.settings import Settings
from catalog.core.xash import XashSpec, super_keys, xash
from catalog.search.mate.models import ROW_BLOCK
from catalog.search.mate.settings import mate_settings
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.bronze import CELLS, DATASETS
from spark_jobs.lake.commit_point import applied_batch, batch_store, begin, commit
from spark_jobs.lake.frames import task_frame
from spark_jobs.lake.partition_tasks import partition_tables, write_staged_file
from spark_jobs.lake.store import FILE_ROWS, LakeStore
from spark_jobs.mate.lists import pending_lists, update_lists
from spark_jobs.mate.tables import (
    MATE,
    MATE_LISTS,
    MATE_POSTINGS,
    MATE_ROW_KEYS,
    MATE_STATE,
    POSTINGS_SCHEMA,
    ROW_KEYS_SCHEMA,
    MateState,
)
from spark_jobs.timing import PartTimes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

_SIMPLE = r"^[A-Za-z0-9_:/,-]+$"  # values whose token is their lower case (RE2: $ is the end of the text)
_NULL_LIKES = pa.array(sorted(NULL_LIKES), pa.string())
CELL_COLUMNS = ("table_id", "row", "col", "value")
_PRESENT = pc.field("value").is_valid()
WRITTEN_SCHEMA = pa.schema([("bucket", pa.int32()), ("rows", pa.int64())])
TASK_CELLS = 4_000_000  # cells a task reads at once: a bucket's tables in chunks of about this many
POSTINGS, KEYS = 0, 1  # `kind` of a row of `index_table`'s output
INDEX_SCHEMA = pa.schema(
    [
        ("kind", pa.int8()),
        ("table_id", pa.string()),
        ("bucket", pa.int32()),
        ("token", pa.string()),
        ("rows", pa.list_(pa.int32())),
        ("cols", pa.list_(pa.int32())),
        ("block", pa.int32()),
        ("keys", pa.binary()),
    ]
)


def tokens_of(values: pa.Array) -> pa.Array:
    """`normalize_token` of each value (null for null-likes): Arrow's lower case for the simple ones,
    the Python function for the rest."""
    simple = pc.fill_null(pc.match_substring_regex(values, _SIMPLE), False)
    lowered = pc.utf8_lower(values)
    lowered = pc.if_else(pc.is_in(lowered, value_set=_NULL_LIKES), pa.scalar(None, pa.string()), lowered)
    others = np.flatnonzero(~simple.to_numpy(zero_copy_only=False))
    if len(others) == 0:
        return lowered
    tokens = lowered.to_pylist()
    for i, value in zip(others.tolist(), values.take(pa.array(others)).to_pylist(), strict=True):
        tokens[i] = normalize_token(value)
    return pa.array(tokens, pa.string())


def index_table(spec: XashSpec, cells: pa.Table) -> pa.Table:
    """One table's cells (table_id, bucket, row, col, value) -> its posting lists and super-key
    blocks as INDEX_SCHEMA rows."""
    table_id, bucket = cells.column("table_id")[0].as_py(), cells.column("bucket")[0].as_py()
    raw = pc.dictionary_encode(cells.column("value").combine_chunks())
    tokens = pc.dictionary_encode(tokens_of(raw.dictionary))
    token_of_cell = tokens.indices.take(raw.indices)
    keep = pc.is_valid(token_of_cell)
    tok = pc.filter(token_of_cell, keep).to_numpy().astype(np.int64)
    rows = pc.filter(cells.column("row"), keep).to_numpy().astype(np.int64)
    cols = pc.filter(cells.column("col"), keep).to_numpy().astype(np.int32)
    postings = _postings(tok, rows, cols, tokens.dictionary)
    keys = _key_blocks(super_keys(xash(tokens.dictionary, spec)[tok], rows, int(rows.max()) + 1 if len(rows) else 0))
    n_p, n_k = len(postings["token"]), len(keys["block"])
    return pa.table(
        {
            "kind": pa.array(np.r_[np.full(n_p, POSTINGS), np.full(n_k, KEYS)].astype(np.int8)),
            "table_id": pa.array([table_id] * (n_p + n_k), pa.string()),
            "bucket": pa.array(np.full(n_p + n_k, bucket, np.int32)),
            "token": pa.concat_arrays([postings["token"], pa.nulls(n_k, pa.string())]),
            "rows": pa.concat_arrays([postings["rows"], pa.nulls(n_k, pa.list_(pa.int32()))]),
            "cols": pa.concat_arrays([postings["cols"], pa.nulls(n_k, pa.list_(pa.int32()))]),
            "block": pa.concat_arrays([pa.nulls(n_p, pa.int32()), keys["block"]]),
            "keys": pa.concat_arrays([pa.nulls(n_p, pa.binary()), keys["keys"]]),
        },
        schema=INDEX_SCHEMA,
    )


def _postings(tok: np.ndarray, rows: np.ndarray, cols: np.ndarray, dictionary: pa.Array) -> dict[str, pa.Array]:
    """Per token, its cells' rows and columns sorted by (row, column)."""
    order = np.lexsort((cols, rows, tok))
    tok, rows, cols = tok[order], rows[order].astype(np.int32), cols[order]
    starts = np.flatnonzero(np.r_[True, tok[1:] != tok[:-1]]) if len(tok) else np.empty(0, np.int64)
    offsets = pa.array(np.r_[starts, len(tok)].astype(np.int32))
    return {
        "token": dictionary.take(pa.array(tok[starts])),
        "rows": pa.ListArray.from_arrays(offsets, pa.array(rows, pa.int32())),
        "cols": pa.ListArray.from_arrays(offsets, pa.array(cols, pa.int32())),
    }


def _key_blocks(keys: np.ndarray) -> dict[str, pa.Array]:
    """The (n_rows, words) super keys as blobs of ROW_BLOCK rows of little-endian words; blocks with
    no set bit are left out (a missing block reads as zeros)."""
    blocks, payloads = [], []
    for b in range(0, len(keys), ROW_BLOCK):
        block = keys[b : b + ROW_BLOCK]
        if block.any():
            blocks.append(b // ROW_BLOCK)
            payloads.append(block.astype("<u8").tobytes())
    return {"block": pa.array(blocks, pa.int32()), "keys": pa.array(payloads, pa.binary())}


def _indexed(spec: XashSpec, task: Mapping[str, Any]) -> Iterator[pa.Table]:
    """A task (bucket, files, tables: all when null) -> `index_table` of each table of the bucket's
    cell files, read here, a table at a time."""
    tables = partition_tables(task["files"], CELL_COLUMNS, tables=task["tables"], where=_PRESENT, max_rows=TASK_CELLS)
    for cells in tables:
        bucket = pa.array(np.full(cells.num_rows, task["bucket"], np.int32))
        yield index_table(spec, cells.append_column("bucket", bucket))


def index_buckets(spec: XashSpec, tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: the tasks' tables indexed, as INDEX_SCHEMA rows."""
    for batch in tasks:
        for task in batch.to_pylist():
            for indexed in _indexed(spec, task):
                yield from indexed.to_batches()


def write_buckets(
    spec: XashSpec, postings: str, keys: str, tasks: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: the tasks' tables indexed and written as files of the staged writes
    `postings` and `keys` (about FILE_ROWS rows to a file); yields (bucket, rows) per task."""
    for batch in tasks:
        for task in batch.to_pylist():
            held: list[pa.Table] = []
            n_held = n_rows = 0
            for indexed in _indexed(spec, task):
                held.append(indexed)
                n_held += indexed.num_rows
                if n_held >= FILE_ROWS:
                    _write_index_files(postings, keys, task["bucket"], held)
                    n_rows, held, n_held = n_rows + n_held, [], 0
            _write_index_files(postings, keys, task["bucket"], held)
            yield pa.record_batch({"bucket": [task["bucket"]], "rows": [n_rows + n_held]}, schema=WRITTEN_SCHEMA)


def _write_index_files(postings: str, keys: str, bucket: int, held: Sequence[pa.Table]) -> None:
    """One file of postings and one of key blocks from the `held` rows of INDEX_SCHEMA."""
    if not held:
        return
    rows = pa.concat_tables(held)
    for folder, kind, schema in ((postings, POSTINGS, POSTINGS_SCHEMA), (keys, KEYS, ROW_KEYS_SCHEMA)):
        part = rows.filter(pc.equal(rows.column("kind"), kind))
        if part.num_rows:
            write_staged_file(folder, {"bucket": bucket}, part.select([n for n in schema.names if n != "bucket"]))


def _bucket_tasks(spark: SparkSession, store: LakeStore, settings: Settings, table_ids: list[str] | None) -> DataFrame:
    """A task per bucket of `cells` holding the tables `table_ids` (every bucket when None): the
    bucket's files, which the task reads itself (`partition_tables`)."""
    where: dict[str, Sequence[Any]] | None = None
    if table_ids is not None:
        buckets = sorted({table_bucket(t, settings.index.cells_buckets) for t in table_ids})
        where = {"bucket": buckets, "table_id": table_ids}
    files = store.files_by_partition(CELLS, "bucket", where=where)
    tasks = [(int(b), uris, table_ids) for b, uris in sorted(files.items())]
    return task_frame(spark, tasks, "bucket int, files array<string>, tables array<string>")


def index_frames(
    spark: SparkSession, store: LakeStore, settings: Settings, spec: XashSpec, table_ids: list[str]
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """The tables `table_ids` -> (postings, row key blocks) in POSTINGS_SCHEMA and ROW_KEYS_SCHEMA,
    and the cached frame both derive from (unpersist it after writing them)."""
    tasks = _bucket_tasks(spark, store, settings, table_ids)
    indexed = tasks.mapInArrow(partial(index_buckets, spec), from_arrow_schema(INDEX_SCHEMA))
    indexed = indexed.persist(StorageLevel.MEMORY_AND_DISK)
    postings = indexed.where(F.col("kind") == POSTINGS).select(*POSTINGS_SCHEMA.names)
    keys = indexed.where(F.col("kind") == KEYS).select(*ROW_KEYS_SCHEMA.names)
    return postings, keys, indexed


def read_state(store: LakeStore) -> MateState | None:
    row = store.one_row(MATE_STATE)
    return MateState.from_row(row) if row else None


def _write_all(spark: SparkSession, store: LakeStore, settings: Settings, spec: XashSpec) -> None:
    """Index every table: the tasks write the two tables' files themselves, committed here."""
    postings, keys = store.staged_write(MATE_POSTINGS), store.staged_write(MATE_ROW_KEYS)
    tasks = _bucket_tasks(spark, store, settings, None)
    written = tasks.mapInArrow(partial(write_buckets, spec, postings.uri, keys.uri), from_arrow_schema(WRITTEN_SCHEMA))
    log.info("mate index written", extra={"rows": sum(r["rows"] for r in written.collect())})
    store.overwrite_staged(postings, POSTINGS_SCHEMA, partition_by=["bucket"])
    store.overwrite_staged(keys, ROW_KEYS_SCHEMA, partition_by=["bucket"])


def _write_batch(spark: SparkSession, store: LakeStore, settings: Settings, spec: XashSpec, batch: ChangeBatch) -> None:
    buckets = sorted({table_bucket(t, settings.index.cells_buckets) for t in batch.touched})
    touched = list(batch.touched)
    if batch.added:
        postings, row_keys, items = index_frames(spark, store, settings, spec, list(batch.added))
    else:
        postings, row_keys, items = POSTINGS_SCHEMA.empty_table(), ROW_KEYS_SCHEMA.empty_table(), None
    try:
        for name, frame in ((MATE_POSTINGS, postings), (MATE_ROW_KEYS, row_keys)):
            store.overwrite_where(
                name, frame, column="table_id", values=touched, partitions={"bucket": buckets}, partition_by=["bucket"]
            )
    finally:
        if items is not None:
            items.unpersist()


def _commit_state(store: LakeStore, base: MateState | None, spec: XashSpec, *, full: bool) -> MateState:
    version = base.index_version if base else 0
    n_tables = store.read_arrow(DATASETS, columns=["table_id"]).num_rows if store.exists(DATASETS) else 0
    state = MateState(index_version=version + 1, base_version=version, full=full, spec=spec, n_tables=n_tables)
    store.overwrite(MATE_STATE, state.table())
    return state


# ---------------------------------------------------------------------- the stage
def run(spark: SparkSession, settings: Settings, batch: ChangeBatch) -> dict[str, Any]:
    """Apply `batch` (a first build when there is no index, a re-hash after a spec change), and
    bring the precomputed lists to it (`spark_jobs.mate.lists`)."""
    store = batch_store(settings.lake, spark, batch.batch_id)
    if applied_batch(store, MATE) >= batch.batch_id and store.exists(MATE_LISTS):
        return {"mode": "skipped"}
    spec = mate_settings(settings).spec
    base_manifest = begin(store, MATE)
    base = read_state(store)
    if not store.exists(CELLS):
        return {"mode": "empty"}
    times = PartTimes()
    if applied_batch(store, MATE) >= batch.batch_id:
        mode = "lists"  # an index from before the lists were kept in the lake: compute them all
        lists = update_lists(spark, store, settings, None, _next_version(base), times=times)
    elif base is None or base.spec != spec:
        if base is not None:
            log.warning("mate XASH spec changed: re-hashing every table", extra={"was": base.spec.as_dict()})
        with times.part("index"):
            _write_all(spark, store, settings, spec)
        mode = "build"
        # all lists when none exist yet
        lists = update_lists(spark, store, settings, batch, _next_version(base), times=times)
    else:
        if batch.touched:
            with times.part("index"):
                _write_batch(spark, store, settings, spec, batch)
        mode = "update"
        lists = update_lists(spark, store, settings, batch, _next_version(base), times=times)
    state = _commit_state(store, base, spec, full=mode == "build")
    commit(store, MATE, base_manifest, batch_id=batch.batch_id, kind=mode)
    log.info("mate committed", extra={"mode": mode, **state.summary(), "seconds": times.seconds})
    return {"mode": mode, **state.summary(), **lists, "seconds": times.seconds}


def _next_version(base: MateState | None) -> int:
    return (base.index_version if base else 0) + 1


def rebuild(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    """Nothing degrades with updates; a rebuild re-hashes the lake after a spec change (the lists
    hold then: the tokens did not change), computes the lists an older lake lacks and goes on with
    those left for a later run."""
    return _lists_run(spark, settings, rehash=True)


def work_backlog(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    """Go on with the lists earlier runs left pending, as a commit of its own: a change batch
    computes only the lists its changes call for. Each backlog run spends a batch's budget (the
    weekly rebuild a run's), so a `juncture index` stays as bounded as when batches did this."""
    return _lists_run(spark, settings, rehash=False)


def _lists_run(spark: SparkSession, settings: Settings, *, rehash: bool) -> dict[str, Any]:
    store = LakeStore(settings.lake, spark)
    spec = mate_settings(settings).spec
    base_manifest = begin(store, MATE)
    base = read_state(store)
    lists_due = not store.exists(MATE_LISTS) or pending_lists(store)
    rehashing = base is not None and base.spec != spec and rehash
    if base is None or not (rehashing or lists_due):
        return {"mode": "absent" if base is None else "unchanged"}
    if rehashing:
        _write_all(spark, store, settings, spec)
    lists: dict[str, int] = {}
    if lists_due:
        going_on = ChangeBatch(base_manifest.batch_id, added=(), deleted=()) if store.exists(MATE_LISTS) else None
        lists = update_lists(spark, store, settings, going_on, _next_version(base), backlog_run=not rehash)
    state = _commit_state(store, base, base.spec if not rehashing else spec, full=rehashing)
    commit(store, MATE, base_manifest, batch_id=base_manifest.batch_id, kind="rebuild" if rehash else "lists")
    return {"mode": "rebuild" if rehash else "lists", **state.summary(), **lists}


def rebuild_due(spark: SparkSession | None, settings: Settings) -> bool:
    state = read_state(LakeStore(settings.lake, spark))
    return state is not None and state.spec != mate_settings(settings).spec
