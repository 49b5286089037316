"""JOSIE index, full build: silver `column_tokens` -> dictionary, integer sets, posting lists.

JOSIE (Zhu et al., "JOSIE: Overlap Set Similarity Search for Finding Joinable Tables in Data Lakes",
SIGMOD 2019), App. 7.1, with the corrections of docs/algorithms/josie.md: 0-based positions (A1);
duplicate groups decided by exact list equality, never by the hash alone (A9: the groups come from
grouping on the whole set-id array); the last group ends at N like every other (B1: no join with
"the next group", so it cannot fall out); the list hash is mmh3 with a fixed seed over little-endian
int64 set ids, deterministic on every worker (A10).

Pipeline (all DataFrame ops; only per-partition row counts reach the driver):
(token, set_id) pairs -> posting lists (sorted set ids) -> global order (frequency, hash, list, token)
-> dense token ids -> groups (identical lists are adjacent in that order) -> integer sets sorted by
token id -> posting entries (set_id, position, size) sorted by set id.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mmh3
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.pandas.types import from_arrow_schema

from catalog.core.errors import LakeError
from catalog.core.settings import Settings
from spark_jobs.josie.tables import (
    CHANGE_FULL,
    CHANGE_SET,
    CHANGE_TOKEN,
    CHANGES_SCHEMA,
    DIRTY_GROUP_BASE,
    HASH_SEED,
    JOSIE,
    JOSIE_CHANGES,
    JOSIE_POSTINGS,
    JOSIE_SETS,
    JOSIE_STATE,
    JOSIE_TOKENS,
    SCHEMAS,
    JosieResult,
    JosieState,
)
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.commit_point import batch_store, begin, commit
from spark_jobs.lake.frames import local_frame
from spark_jobs.lake.job_main import batch_job_main
from spark_jobs.lake.manifest import Manifest
from spark_jobs.lake.store import LakeStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

COLUMN_TOKENS = "column_tokens"
_MONO_SHIFT = 33  # monotonically_increasing_id = (partition << 33) + row within partition


# ---------------------------------------------------------------------- module-level UDF body
def posting_hash(set_ids: pd.Series, modulus: pd.Series) -> pd.Series:
    """mmh3 (32-bit, fixed seed) of each sorted set-id list as little-endian int64 bytes.

    `modulus` > 0 folds the hash (a test hook that forces collisions: modulus 1 makes every hash 0).
    """

    m = int(modulus.iloc[0]) if len(modulus) else 0
    out = np.empty(len(set_ids), dtype=np.int32)
    for i, ids in enumerate(set_ids):
        h = mmh3.hash(np.asarray(ids, dtype="<i8").tobytes(), HASH_SEED)
        out[i] = h % m if m > 0 else h
    return pd.Series(out)


def posting_hash_py(set_ids: Sequence[int]) -> int:
    """The same hash in plain Python (tests and the search side can recompute it)."""

    return int(mmh3.hash(np.asarray(list(set_ids), dtype="<i8").tobytes(), HASH_SEED))


# ---------------------------------------------------------------------- shared DataFrame helpers
def spark_schema(name: str) -> Any:

    return from_arrow_schema(SCHEMAS[name])


def conform(df: DataFrame, name: str) -> DataFrame:
    """`df` with exactly the contract columns and types of table `name` (so every write agrees)."""

    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in spark_schema(name).fields])


def dense_index(df: DataFrame, order: Sequence[Any], name: str, *, start: int = 0) -> DataFrame:
    """`df` plus a dense 0-based (+`start`) rank column `name` in the total order `order`.

    A range-partitioned sort, then per-partition offsets: only one count per partition is
    collected, never the rows. The sorted frame is persisted so both passes see the same rows.
    """

    spark = df.sparkSession
    ordered = df.orderBy(*order).withColumn("_mono", F.monotonically_increasing_id()).persist()
    counts = sorted(
        (r[0], r[1]) for r in ordered.groupBy(F.shiftright("_mono", _MONO_SHIFT).alias("_pid")).count().collect()
    )
    offsets, total = [], start
    for pid, n in counts:
        offsets.append((int(pid), int(total)))
        total += n
    off = local_frame(spark, offsets, "_pid long, _off long")
    mask = (1 << _MONO_SHIFT) - 1
    return (
        ordered.withColumn("_pid", F.shiftright("_mono", _MONO_SHIFT))
        .join(F.broadcast(off), "_pid")
        .withColumn(name, F.col("_off") + F.col("_mono").bitwiseAND(F.lit(mask)))
        .drop("_pid", "_off", "_mono")
    )


@dataclass
class IndexFrames:
    """The three index tables as DataFrames (`sets` without table_id/column_id)."""

    tokens: DataFrame  # token, token_id, frequency, group_id
    sets: DataFrame  # set_id, size, tokens
    postings: DataFrame  # token_id, set_ids, positions, sizes


def integer_sets(int_pairs: DataFrame) -> DataFrame:
    """(set_id, token_id) -> (set_id, size, tokens sorted ascending)."""

    return (
        int_pairs.groupBy("set_id")
        .agg(F.array_sort(F.collect_list(F.col("token_id").cast("int"))).alias("tokens"))
        .withColumn("size", F.size("tokens"))
    )


def posting_entries(sets: DataFrame) -> DataFrame:
    """(set_id, size, tokens) -> one (token_id, set_id, position, size) per element, 0-based."""

    return sets.select("set_id", "size", F.posexplode("tokens").alias("position", "token_id"))


def posting_lists(entries: DataFrame) -> DataFrame:
    """(token_id, set_id, position, size) -> (token_id, set_ids, positions, sizes) sorted by set id."""

    e = F.struct(
        F.col("set_id").cast("int").alias("s"),
        F.col("position").cast("int").alias("p"),
        F.col("size").cast("int").alias("z"),
    )
    lists = entries.groupBy("token_id").agg(F.array_sort(F.collect_list(e)).alias("e"))
    return lists.select(
        F.col("token_id").cast("long").alias("token_id"),
        F.col("e.s").alias("set_ids"),
        F.col("e.p").alias("positions"),
        F.col("e.z").alias("sizes"),
    )


def build_index(pairs: DataFrame, *, hash_modulus: int = 0) -> IndexFrames:
    """Distinct (token, set_id) pairs -> the index (App. 7.1.1-7.1.4 with the corrections of docs/algorithms/josie.md).

    `hash_modulus` is a test hook: a value > 0 folds the list hash so that equal-length lists
    collide; groups must still only join identical lists."""

    phash = F.pandas_udf(posting_hash, "int")  # type: ignore[call-overload]
    lists = (
        pairs.groupBy("token")
        .agg(F.array_sort(F.collect_list(F.col("set_id").cast("int"))).alias("set_ids"))
        .withColumn("frequency", F.size("set_ids"))
        .withColumn("hash", phash(F.col("set_ids"), F.lit(int(hash_modulus))))
    )
    ordered = dense_index(lists, ["frequency", "hash", "set_ids", "token"], "token_id")
    # Identical lists are adjacent in that order, so a group (exact array equality) is a contiguous
    # id range [min, max]; its id is the rank of its first token.
    groups = ordered.groupBy("set_ids").agg(
        F.min("token_id").alias("start"), F.collect_list("token_id").alias("members")
    )
    ranked = dense_index(groups.select("start", "members"), ["start"], "group_id")
    token_group = ranked.select(F.explode("members").alias("token_id"), "group_id")
    tokens = ordered.select("token", "token_id", "frequency").join(token_group, "token_id")
    int_pairs = pairs.join(tokens.select("token", "token_id"), "token").select("set_id", "token_id")
    sets = integer_sets(int_pairs)
    postings = posting_lists(posting_entries(sets))
    return IndexFrames(tokens=tokens, sets=sets, postings=postings)


# ---------------------------------------------------------------------- lake I/O shared by the jobs
def index_exists(store: LakeStore) -> bool:
    return store.exists(JOSIE_STATE)


def read_state(store: LakeStore, version: int | None = None) -> JosieState:
    rows = store.read_arrow(JOSIE_STATE, version=version).to_pylist()
    if len(rows) != 1:
        raise LakeError(JOSIE_STATE, f"expected one state row, found {len(rows)}")
    return JosieState.from_row(rows[0])


def dirty_counts(store: LakeStore) -> tuple[int, int, int]:
    """(n_lists, n_dirty_lists, largest token id or -1) of the committed dictionary."""

    table = store.read_arrow(JOSIE_TOKENS, columns=["token_id", "group_id"])
    if not table.num_rows:
        return 0, 0, -1
    n_dirty = int(pc.sum(pc.greater_equal(table["group_id"], DIRTY_GROUP_BASE)).as_py() or 0)
    return table.num_rows, n_dirty, int(pc.max(table["token_id"]).as_py())


def conform_any(data: Any, name: str) -> Any:
    """`conform` for a Spark DataFrame or an Arrow table (the update has both engines)."""
    if isinstance(data, pa.Table):
        schema = SCHEMAS[name]
        return data.select(schema.names).cast(schema)
    return conform(data, name)


def commit_update(
    store: LakeStore,
    base: Manifest,
    batch_id: int,
    *,
    tokens: Any,
    sets: Any,
    postings: Any,
    changes: Any,
    state: JosieState,
    version: int,
    next_set_id: int,
) -> JosieResult:
    """Commit an incremental update (Spark DataFrames or Arrow tables): the three index tables, the
    change log and the state row, then the unit's manifest, which marks the batch done. Returns
    the new state and counts."""
    store.overwrite(JOSIE_TOKENS, conform_any(tokens, JOSIE_TOKENS))
    store.overwrite(JOSIE_SETS, conform_any(sets, JOSIE_SETS))
    store.overwrite(JOSIE_POSTINGS, conform_any(postings, JOSIE_POSTINGS))
    store.append(JOSIE_CHANGES, conform_any(changes, JOSIE_CHANGES))
    n_lists, n_dirty, max_token_id = dirty_counts(store)
    new_state = state.with_counts(
        n_lists,
        n_dirty,
        index_version=version,
        next_set_id=next_set_id,
        next_token_id=max(state.next_token_id, max_token_id + 1),
    )
    store.overwrite(JOSIE_STATE, new_state.table())
    n_lists_rewritten, n_affected_sets = _change_counts(store, version)
    commit(store, JOSIE, base, batch_id=batch_id, kind="update")
    return JosieResult("update", new_state, n_lists_rewritten=n_lists_rewritten, n_affected_sets=n_affected_sets)


def _change_counts(store: LakeStore, version: int) -> tuple[int, int]:
    """(posting lists, sets) that index version `version` rewrote, from the change log."""
    log_rows = store.read_arrow(JOSIE_CHANGES, columns=["index_version", "kind"])
    kinds = log_rows.filter(pc.equal(log_rows["index_version"], version))["kind"]
    return (
        int(pc.sum(pc.equal(kinds, CHANGE_TOKEN)).as_py() or 0),
        int(pc.sum(pc.equal(kinds, CHANGE_SET)).as_py() or 0),
    )


def write_full(
    store: LakeStore,
    frames: IndexFrames,
    columns: DataFrame,
    *,
    base: Manifest,
    batch_id: int,
    kind: str,
    state: JosieState,
) -> JosieState:
    """Overwrite the three index tables with a fresh build, then the change log and the state, then
    commit the unit's manifest (`kind` build or rebuild). `columns` maps set_id -> (table_id, column_id)."""
    sets = frames.sets.join(columns, "set_id")
    store.overwrite(JOSIE_TOKENS, conform(frames.tokens, JOSIE_TOKENS))
    store.overwrite(JOSIE_SETS, conform(sets, JOSIE_SETS))
    store.overwrite(JOSIE_POSTINGS, conform(frames.postings, JOSIE_POSTINGS))
    n_lists, n_dirty, _ = dirty_counts(store)
    version = state.index_version
    store.append(
        JOSIE_CHANGES,
        pa.Table.from_pylist(
            [{"index_version": version, "base_version": version - 1, "kind": CHANGE_FULL, "key": -1}],
            schema=CHANGES_SCHEMA,
        ),
    )
    state = state.with_counts(n_lists, n_dirty)
    store.overwrite(JOSIE_STATE, state.table())
    commit(store, JOSIE, base, batch_id=batch_id, kind=kind)
    return state


# ---------------------------------------------------------------------- the full-build job
def column_pairs(column_tokens: DataFrame, *, start: int = 0) -> tuple[DataFrame, DataFrame]:
    """column_tokens -> ((token, set_id) pairs, (set_id, table_id, column_id)); set ids are dense
    from `start` in column_id order."""
    cols = dense_index(column_tokens.select("table_id", "column_id").distinct(), ["column_id"], "set_id", start=start)
    pairs = column_tokens.select("table_id", "column_id", "token").join(cols, ["table_id", "column_id"])
    return pairs.select("token", "set_id").distinct(), cols


def build(spark: SparkSession, store: LakeStore, *, batch_id: int = 0, hash_modulus: int = 0) -> JosieResult:
    """A fresh index from all of `column_tokens` (set ids from 0), committed as including `batch_id`."""
    base = begin(store, JOSIE)
    if store.exists(COLUMN_TOKENS):
        ct = store.read(COLUMN_TOKENS, columns=["table_id", "column_id", "token"])
    else:
        ct = local_frame(
            spark,
            [],
            from_arrow_schema(
                pa.schema([("table_id", pa.string()), ("column_id", pa.string()), ("token", pa.string())])
            ),
        )
    pairs, cols = column_pairs(ct)
    pairs = pairs.persist()
    try:
        frames = build_index(pairs, hash_modulus=hash_modulus)
        n_sets = cols.count()
        frames.tokens = frames.tokens.persist()
        state = JosieState(
            index_version=1, next_set_id=n_sets, next_token_id=frames.tokens.count(), last_rebuild_batch=batch_id
        )
        state = write_full(store, frames, cols, base=base, batch_id=batch_id, kind="build", state=state)
    finally:
        spark.catalog.clearCache()
    log.info(
        "josie index built",
        extra={"n_lists": state.n_lists, "next_set_id": state.next_set_id, "index_version": state.index_version},
    )
    return JosieResult("build", state)


def run(spark: SparkSession, settings: Settings, batch: ChangeBatch) -> JosieResult:
    """Full build (used by the pipeline stage when no index exists yet)."""
    return build(spark, batch_store(settings.lake, spark, batch.batch_id), batch_id=batch.batch_id)


def main(argv: Sequence[str] | None = None) -> int:
    return batch_job_main("josie_index", run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
