"""Gold `joinable`: for every indexed column, its top-k joinable columns by exact distinct-value overlap.

Each answer carries the overlap, the containment in both directions, the Jaccard similarity, whether
either side is a single-column key (silver `keys`, absent = no keys) and so the join's direction, an
estimated join size from the value multiplicities, and `exact`.

How the lists are counted (duplicate posting lists, as in JOSIE, SIGMOD 2019, §3.5):

1. Columns get dense integer ids in `column_id` order. Posting lists are built from silver
   `column_tokens` (token -> sorted column ids) in Spark, and identical lists are grouped
   (`groupBy(columns)`): a group of r tokens with the same list counts r for each pair it holds,
   once. In open-data lakes most tokens occur in exactly one column; their lists make no group.
2. **Frequent tokens.** A list of length f holds f·(f-1) ordered pairs, so a token such as "1" or
   "yes" shared by thousands of columns would dominate the work. Lists longer than
   `settings.index.joinable_max_list` are skipped: never counted. A column holding at least one
   skipped token may then be missing overlap on some candidates (and whole candidates), so every
   answer of that column says `exact=false`; all other columns' answers are exact (a skipped token
   is in neither side of their pairs). Sizes, containment denominators and Jaccard use the true set
   sizes in all cases.
3. The groups are collected and broadcast; `overlap_count` counts each column's candidates in
   numpy over Arrow batches of column ids (one pass over the members of the column's groups) and
   keeps the top-k by overlap, ties broken by the candidate's column_id (so brute force agrees).
   Expanding every pair into a Spark row instead cost 1.34 billion rows on a 2,000-table lake.

Why silver `column_tokens` and not the JOSIE Delta tables: the join-size estimate needs each value's
multiplicity `n`, which the JOSIE sets do not keep, and JOSIE's duplicate groups go stale between
rebuilds (changed lists become singleton groups), whereas grouping the lists this job actually reads
is exact every time. Both start from the same tokens, so the overlaps are the same.

Incremental: a batch changes few lists completely and many only at their tail.

* **Recomputed** (complete new lists): the columns of added tables, every column whose current list
  names a column of a touched table (a deleted or changed candidate must be replaced by the next
  best one), and every column holding a token that crossed the list bound in this batch (its
  overlaps gain or lose that token). Crossings are found against `joinable_frequent`, the tokens
  over the bound after the last batch: a token can only cross upward by being added, and only
  downward if it was frequent.
* **Merged**: every other column sharing a counted token with an added column. Its overlaps with
  every unchanged column are unchanged and none of its candidates is gone, so its new list is the
  top-k of its old list and the added columns, whose overlaps come from the added columns' complete
  candidate lists (counted once, read the other way round). On real lakes numbers such as `1` or
  `2010` put most columns here; recomputing them cost more than a full run.
* Lists of deleted columns vanish; all others are kept as they are.

The recomputed and vanished column ids of each batch, and the merged ones whose list changed (an
added column entered it), are recorded in `joinable_changes`: the catalog publisher replaces
exactly those lists, and the unionable stage re-scores the tables whose value evidence they hold.
Changing `joinable_k` or `joinable_max_list` takes `juncture rebuild` (which recomputes every
list), as the kept lists were cut with the old values.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import Window
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.pandas.types import from_arrow_schema

from catalog.core.settings import Settings
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.store import CommitResult, LakeStore
from spark_jobs.profile.tokens import COLUMN_TOKENS
from spark_jobs.relate.overlap_count import TOP_SCHEMA, Groups, top_k_batches

if TYPE_CHECKING:
    from pyspark import Broadcast
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

JOINABLE = "joinable"
JOINABLE_CHANGES = "joinable_changes"
JOINABLE_FREQUENT = "joinable_frequent"
KEYS = "keys"  # silver keys (spark_jobs/profile/keys.py); optional
METHOD = "overlap-groups"

JOINABLE_SCHEMA = pa.schema(
    [
        ("column_id", pa.string()),
        ("table_id", pa.string()),
        ("rank", pa.int32()),
        ("candidate_column_id", pa.string()),
        ("candidate_table_id", pa.string()),
        ("candidate_header", pa.string()),
        ("overlap", pa.int64()),
        ("size", pa.int64()),
        ("candidate_size", pa.int64()),
        ("containment", pa.float64()),
        ("candidate_containment", pa.float64()),
        ("jaccard", pa.float64()),
        ("est_join_size", pa.float64()),
        ("is_key", pa.bool_()),
        ("candidate_is_key", pa.bool_()),
        ("direction", pa.string()),
        ("exact", pa.bool_()),
        ("method", pa.string()),
        ("index_version", pa.int64()),
    ]
)
CHANGES_SCHEMA = pa.schema([("batch_id", pa.int64()), ("column_id", pa.string()), ("table_id", pa.string())])
FREQUENT_SCHEMA = pa.schema([("token", pa.string()), ("f", pa.int64())])


def column_stats(tokens: DataFrame) -> DataFrame:
    """(column_id, table_id, size, n_values): distinct tokens and total non-null values per column."""

    return tokens.groupBy("column_id", "table_id").agg(
        F.count(F.lit(1)).cast("long").alias("size"), F.sum("n").cast("long").alias("n_values")
    )


def column_ids(tokens: DataFrame) -> list[str]:
    """Every column id of `tokens`, sorted: position i is the dense id the counting kernel uses (Python's
    code-point order is UTF-8 byte order, Spark's string order, so ties break the same way)."""
    return sorted(tokens.select("column_id").distinct().toArrow().column(0).to_pylist())


def counted_groups(
    ids: DataFrame, n_columns: int, tokens: DataFrame, left: DataFrame | None, max_list: int
) -> tuple[Groups, pa.Table]:
    """The posting-list groups of the tokens of the left columns (all when `left` is None), collected
    as `Groups`: lists of 2..`max_list` dense column ids with their token counts, and each column's
    number of tokens whose list is longer than `max_list` (skipped, never expanded); and those
    frequent tokens with their list lengths (FREQUENT_SCHEMA)."""
    pairs_of = tokens.select("column_id", "token").join(F.broadcast(ids), "column_id").select("token", "cid")
    if left is not None:
        scope = pairs_of.join(F.broadcast(left), "cid").select("token").distinct()
        pairs_of = pairs_of.join(scope, "token")
    postings = pairs_of.groupBy("token").agg(F.sort_array(F.collect_list("cid")).alias("columns")).cache()
    size = F.size("columns")
    try:
        kept = (
            postings.where((size > 1) & (size <= max_list))
            .groupBy("columns")
            .agg(F.count(F.lit(1)).cast("long").alias("weight"))
            .toArrow()
        )
        skipped = (
            postings.where(size > max_list)
            .select(F.explode("columns").alias("cid"))
            .groupBy("cid")
            .agg(F.count(F.lit(1)).cast("long").alias("n"))
            .toArrow()
        )
        frequent = postings.where(size > max_list).select("token", size.cast("long").alias("f")).toArrow()
    finally:
        postings.unpersist()
    groups = Groups.from_lists(
        n_columns,
        kept.column("columns").combine_chunks(),
        kept.column("weight").to_numpy(),
        skipped.column("cid").to_numpy(),
        skipped.column("n").to_numpy(),
    )
    return groups, frequent.cast(FREQUENT_SCHEMA)


def _count_top_k(
    batches: Iterator[pa.RecordBatch], groups: Broadcast[Groups], k: int | None
) -> Iterator[pa.RecordBatch]:
    return top_k_batches(groups.value, batches, k)


@dataclass(frozen=True)
class Overlaps:
    """What one counting pass gives: the top-k lists of the left columns, the complete candidate
    lists of the `complete` columns (None when none were asked), and the frequent tokens seen."""

    top: DataFrame
    complete: DataFrame | None
    frequent: pa.Table


def top_k_overlaps(
    tokens: DataFrame, left: DataFrame | None, *, k: int, max_list: int, complete: DataFrame | None = None
) -> Overlaps:
    """Rows (column_id, candidate_column_id, overlap, rank, n_skipped): the top-k list of every left
    column (all when `left` is None) by exact overlap over tokens in lists of at most `max_list`
    columns; and every candidate of the `complete` columns (a subset of `left`).

    Spark builds the groups; the counting runs in `overlap_count` over Arrow batches of column ids,
    with the groups broadcast (a few bytes per token occurrence in a shared list)."""
    spark = tokens.sparkSession
    names = column_ids(tokens)
    ids = spark.createDataFrame(
        pa.table({"column_id": pa.array(names, pa.string()), "cid": pa.array(range(len(names)), pa.int64())})
    )
    left_ids = None if left is None else left.select("column_id").join(F.broadcast(ids), "column_id").select("cid")
    groups, frequent = counted_groups(ids, len(names), tokens, left_ids, max_list)
    shared = spark.sparkContext.broadcast(groups)
    candidate = ids.select(F.col("cid").alias("candidate_cid"), F.col("column_id").alias("candidate_column_id"))

    def count(wanted: DataFrame, n: int, k: int | None) -> DataFrame:
        n_parts = max(1, min(4 * spark.sparkContext.defaultParallelism, n // 500))
        counted = wanted.repartition(n_parts).mapInArrow(
            partial(_count_top_k, groups=shared, k=k), from_arrow_schema(TOP_SCHEMA)
        )
        return (
            counted.join(F.broadcast(ids), "cid")
            .join(F.broadcast(candidate), "candidate_cid")
            .select("column_id", "candidate_column_id", "overlap", "rank", "n_skipped")
        )

    def wanted_ids(columns: DataFrame) -> tuple[DataFrame, int]:
        found = columns.select("column_id").join(F.broadcast(ids), "column_id").select("cid").toArrow()
        return spark.createDataFrame(found), found.num_rows

    if left is None:
        top = count(spark.range(len(names)).select(F.col("id").alias("cid")), len(names), k)
    else:
        top = count(*wanted_ids(left), k)
    every = None if complete is None else count(*wanted_ids(complete), None)
    return Overlaps(top, every, frequent)


def key_columns(spark: SparkSession, store: LakeStore) -> DataFrame:
    """(column_id) of single-column exact keys from silver `keys`; empty if that table is absent.
    `columns` entries may be headers or column ids; both are accepted."""

    if not store.exists(KEYS):
        return spark.createDataFrame([], "column_id string")
    keys = store.read(KEYS)
    single = keys.where((F.size("columns") == 1) & F.col("exact"))
    entry = F.col("columns")[0]
    cid = F.when(entry.startswith(F.concat(F.col("table_id"), F.lit("#"))), entry).otherwise(
        F.concat_ws("#", F.col("table_id"), entry)
    )
    return single.select(cid.alias("column_id")).distinct()


def gold_rows(top: DataFrame, tokens: DataFrame, keys: DataFrame, index_version: int) -> DataFrame:
    """The gold rows (JOINABLE_SCHEMA) of ranked lists (column_id, candidate_column_id, overlap,
    rank, n_skipped): sizes, containments, Jaccard, key flags and the join estimate added."""

    stats = column_stats(tokens)
    a = stats.select("column_id", "table_id", "size", F.col("n_values").alias("a_n"))
    b = stats.select(
        F.col("column_id").alias("candidate_column_id"),
        F.col("table_id").alias("candidate_table_id"),
        F.col("size").alias("candidate_size"),
        F.col("n_values").alias("b_n"),
    )
    ka = keys.select("column_id", F.lit(True).alias("is_key"))
    kb = keys.select(F.col("column_id").alias("candidate_column_id"), F.lit(True).alias("candidate_is_key"))
    rows = (
        top.join(a, "column_id")
        .join(b, "candidate_column_id")
        .join(ka, "column_id", "left")
        .join(kb, "candidate_column_id", "left")
    )
    is_key = F.coalesce(F.col("is_key"), F.lit(False))
    cand_key = F.coalesce(F.col("candidate_is_key"), F.lit(False))
    overlap = F.col("overlap").cast("double")
    direction = (
        F.when(is_key & cand_key, "one-to-one")
        .when(cand_key, "many-to-one")
        .when(is_key, "one-to-many")
        .otherwise("many-to-many")
    )
    # Each shared value joins (its rows in A) x (its rows in B); with per-column average multiplicities:
    est = overlap * (F.col("a_n") / F.col("size")) * (F.col("b_n") / F.col("candidate_size"))
    return rows.select(
        "column_id",
        "table_id",
        F.col("rank").cast("int").alias("rank"),
        "candidate_column_id",
        "candidate_table_id",
        F.expr("substring(candidate_column_id, length(candidate_table_id) + 2)").alias("candidate_header"),
        F.col("overlap").cast("long").alias("overlap"),
        F.col("size").cast("long").alias("size"),
        F.col("candidate_size").cast("long").alias("candidate_size"),
        (overlap / F.col("size")).alias("containment"),
        (overlap / F.col("candidate_size")).alias("candidate_containment"),
        (overlap / (F.col("size") + F.col("candidate_size") - F.col("overlap"))).alias("jaccard"),
        est.cast("double").alias("est_join_size"),
        is_key.alias("is_key"),
        cand_key.alias("candidate_is_key"),
        direction.alias("direction"),
        (F.col("n_skipped") == 0).alias("exact"),
        F.lit(METHOD).alias("method"),
        F.lit(index_version).cast("long").alias("index_version"),
    )


def write_all(
    store: LakeStore, tokens: DataFrame, keys: DataFrame, settings: Settings, index_version: int
) -> CommitResult:
    """Every column's list computed from scratch into gold `joinable`, and the frequent tokens of
    the lake into `joinable_frequent` (what the next batch compares against)."""
    found = top_k_overlaps(tokens, None, k=settings.index.joinable_k, max_list=settings.index.joinable_max_list)
    result = store.overwrite(JOINABLE, gold_rows(found.top, tokens, keys, index_version).select(*JOINABLE_SCHEMA.names))
    store.overwrite(JOINABLE_FREQUENT, found.frequent)
    return result


@dataclass(frozen=True)
class Scope:
    """Which lists a batch changes, and how (module docstring, "Incremental"): `recompute` columns
    get complete new lists, `merge` columns keep their list plus the added columns as candidates;
    `frequent` is the lake's new set of tokens over the list bound (token, f)."""

    recompute: DataFrame
    merge: DataFrame
    added: DataFrame
    frequent: DataFrame
    counted: DataFrame  # (token, f) of the tokens that could cross, cached: `frequent` derives from it

    def release(self) -> None:
        """Drop the cached frames once the batch's lists are written."""
        for frame in (self.recompute, self.merge, self.counted):
            frame.unpersist()


def batch_scope(tokens: DataFrame, old: DataFrame, frequent: DataFrame, batch: ChangeBatch, max_list: int) -> Scope:
    """The batch's `Scope` from the current tokens, the current gold lists and frequent tokens."""
    touched = list(batch.touched)
    added = tokens.where(F.col("table_id").isin(list(batch.added))).select("column_id", "table_id", "token")
    added_tokens = added.select("token").distinct()
    was_frequent = frequent.select("token")
    counted = (
        tokens.join(added_tokens.unionByName(was_frequent).distinct(), "token", "left_semi")
        .groupBy("token")
        .agg(F.count(F.lit(1)).cast("long").alias("f"))
        .cache()
    )
    now_frequent = counted.where(F.col("f") > max_list)
    crossed = (
        counted.where(F.col("f") <= max_list)
        .join(was_frequent, "token", "left_semi")
        .select("token")
        .unionByName(now_frequent.join(was_frequent, "token", "left_anti").select("token"))
    )
    added_columns = added.select("column_id", "table_id").distinct()
    recompute = (
        added_columns.unionByName(tokens.join(crossed, "token", "left_semi").select("column_id", "table_id"))
        .unionByName(old.where(F.col("candidate_table_id").isin(touched)).select("column_id", "table_id"))
        .distinct()
        .join(tokens.select("column_id").distinct(), "column_id", "left_semi")  # not deleted
        .cache()
    )
    shared = added_tokens.join(now_frequent, "token", "left_anti")
    merge = (
        tokens.join(shared, "token", "left_semi")
        .select("column_id", "table_id")
        .distinct()
        .join(recompute, "column_id", "left_anti")
        .cache()
    )
    return Scope(recompute, merge, added_columns, now_frequent, counted)


def merged_lists(old: DataFrame, complete: DataFrame, scope: Scope, tokens: DataFrame, k: int) -> DataFrame:
    """Top-k lists of the `merge` columns: their old list plus the added columns they share tokens
    with (`complete`: every candidate of each added column, read the other way round)."""
    reversed_pairs = complete.select(
        F.col("candidate_column_id").alias("column_id"), F.col("column_id").alias("candidate_column_id"), "overlap"
    )
    pairs = old.select("column_id", "candidate_column_id", "overlap").unionByName(reversed_pairs)
    ranked = pairs.join(scope.merge, "column_id", "left_semi").withColumn(
        "rank",
        F.row_number().over(
            Window.partitionBy("column_id").orderBy(F.col("overlap").desc(), F.col("candidate_column_id").asc())
        ),
    )
    skipped = (
        tokens.join(F.broadcast(scope.frequent.select("token")), "token", "left_semi")
        .join(scope.merge, "column_id", "left_semi")
        .groupBy("column_id")
        .agg(F.count(F.lit(1)).cast("long").alias("n_skipped"))
    )
    return (
        ranked.where(F.col("rank") <= k)
        .join(skipped, "column_id", "left")
        .select(
            "column_id",
            "candidate_column_id",
            "overlap",
            "rank",
            F.coalesce(F.col("n_skipped"), F.lit(0)).cast("long").alias("n_skipped"),
        )
    )


def changed_columns(new: DataFrame, old: DataFrame) -> DataFrame:
    """(column_id) of the lists in `new` or `old` (ranked rows of the same columns) that differ in
    some rank's candidate or overlap."""
    a = new.select("column_id", "rank", F.col("candidate_column_id").alias("c_new"), F.col("overlap").alias("o_new"))
    b = old.select("column_id", "rank", F.col("candidate_column_id").alias("c_old"), F.col("overlap").alias("o_old"))
    same = F.col("c_new").eqNullSafe(F.col("c_old")) & F.col("o_new").eqNullSafe(F.col("o_old"))
    return a.join(b, ["column_id", "rank"], "full_outer").where(~same).select("column_id").distinct()


def record_changes(store: LakeStore, batch: ChangeBatch, *frames: DataFrame) -> int:
    """Append the batch's re-listed columns (the union of `frames`' column_id, table_id) to
    `joinable_changes`, which the catalog publisher reads to replace exactly those lists."""
    columns = frames[0].select("column_id", "table_id")
    for frame in frames[1:]:
        columns = columns.unionByName(frame.select("column_id", "table_id"))
    rows = columns.distinct().select(F.lit(batch.batch_id).cast("long").alias("batch_id"), "column_id", "table_id")
    return store.append(JOINABLE_CHANGES, rows).n_rows_written


def update(
    spark: SparkSession, store: LakeStore, settings: Settings, batch: ChangeBatch, *, full: bool = False
) -> dict[str, Any]:
    """Update gold `joinable` for `batch` (or recompute every list with `full`). Part of the relate
    unit: `spark_jobs.relate.stage` begins and commits it."""

    if not store.exists(COLUMN_TOKENS):
        tokens = spark.createDataFrame([], "table_id string, column_id string, token string, n long")
    else:
        tokens = store.read(COLUMN_TOKENS, columns=["table_id", "column_id", "token", "n"])
    keys = key_columns(spark, store)
    old = store.read(JOINABLE) if store.exists(JOINABLE) else None
    if full or old is None or not store.exists(JOINABLE_FREQUENT):
        # every list replaced, including those of columns that have vanished since
        previous = [old] if old is not None else []
        n_affected = record_changes(store, batch, tokens, *previous)
        result = write_all(store, tokens, keys, settings, batch.batch_id)
        counts = {"n_joinable_affected": n_affected, "n_joinable_rows": result.n_rows_written}
        log.info("joinable lists computed", extra=counts)
        return counts

    k, max_list = settings.index.joinable_k, settings.index.joinable_max_list
    scope = batch_scope(tokens, old, store.read(JOINABLE_FREQUENT), batch, max_list)
    gone = old.where(F.col("table_id").isin(list(batch.touched))).select("column_id", "table_id")
    found = top_k_overlaps(tokens, scope.recompute, k=k, max_list=max_list, complete=scope.added)
    if found.complete is None:  # pragma: no cover - asked for above
        raise AssertionError("the added columns' complete lists were not counted")
    merged = merged_lists(old, found.complete, scope, tokens, k).cache()
    # a merged list the added columns did not enter stays as it is, unpublished
    changed = changed_columns(merged, old.join(scope.merge, "column_id", "left_semi"))
    relisted = scope.merge.join(changed, "column_id", "left_semi").cache()
    n_affected = record_changes(store, batch, scope.recompute, relisted, gone)
    fresh = gold_rows(
        found.top.unionByName(merged.join(relisted, "column_id", "left_semi")), tokens, keys, batch.batch_id
    )
    affected = scope.recompute.unionByName(relisted).unionByName(gone).select("column_id")
    kept = old.join(affected, "column_id", "left_anti").where(~F.col("table_id").isin(list(batch.touched)))
    lists = kept.select(*JOINABLE_SCHEMA.names).unionByName(fresh.select(*JOINABLE_SCHEMA.names))
    result = store.overwrite(JOINABLE, lists)
    store.overwrite(JOINABLE_FREQUENT, scope.frequent.select("token", "f"))
    scope.release()
    for frame in (merged, relisted):
        frame.unpersist()
    counts = {"n_joinable_affected": n_affected, "n_joinable_rows": result.n_rows_written}
    log.info("joinable lists updated", extra=counts)
    return counts
