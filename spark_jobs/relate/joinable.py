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
   `settings.index.joinable_max_list` are skipped: never counted. A skipped token stays skipped
   until its list is back to half the bound (`is_frequent`): a token hovering at the bound would
   otherwise cross it in most batches, and every crossing changes the lists of the ~max_list
   columns holding it, the largest of the lake, which are then re-published. A column holding at
   least one skipped token may then be missing overlap on some candidates (and whole candidates),
   so every answer of that column says
   `exact=false`; all other columns' answers are exact (a skipped token is in neither side of
   their pairs). Sizes, containment denominators and Jaccard use the true set sizes in all cases.
3. The groups are collected and broadcast; `overlap_count` counts each column's candidates in
   numpy over Arrow batches of column ids (one pass over the members of the column's groups) and
   keeps the top-k by overlap, ties broken by the candidate's column_id (so brute force agrees).
   Expanding every pair into a Spark row instead cost 1.34 billion rows on a 2,000-table lake.

Why silver `column_tokens` and not the JOSIE Delta tables: the join-size estimate needs each value's
multiplicity `n`, which the JOSIE sets do not keep, and JOSIE's duplicate groups go stale between
rebuilds (changed lists become singleton groups), whereas grouping the lists this job actually reads
is exact every time. Both start from the same tokens, so the overlaps are the same.

Batches: every list is counted again, then compared with the published one. A batch of perturbed
copies on a real lake changes about half of all published lists (numbers such as `1` or `2010` make
an added column a candidate of most columns), and the counting kernel does a whole lake in a few
seconds, so counting everything was 4-6x faster than the incremental merge of stored lists it
replaced (which scanned every token and every stored list anyway). What stays incremental is what
the later steps pay for: only the lists that differ are *re-listed*.

A column is re-listed when a row of its top-k differs from the published one in any field but
`index_version` (a candidate, an overlap, a size, a key flag), when it gained or lost its list, or
when its list names a table the batch touched before or after (that table's statistics may have
changed). Re-listed columns are recorded in `joinable_changes`, their rows replaced in gold
`joinable`, and every other column's rows kept as they were (with the batch that last changed them
as `index_version`); the catalog publisher replaces exactly those lists, and the unionable stage
re-scores the tables whose value evidence they hold. The frequent tokens after each batch are
stored in `joinable_frequent`, which the next count reads for the half-bound rule above. A new
`joinable_k` or `joinable_max_list` takes effect at the next batch (the lists it changes are
re-listed) or at once with `juncture rebuild`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.pandas.types import from_arrow_schema

from catalog.core.settings import Settings
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.frames import local_frame
from spark_jobs.lake.store import CommitResult, LakeStore
from spark_jobs.profile.tokens import COLUMN_TOKENS
from spark_jobs.relate.overlap_count import TOP_SCHEMA, Groups, top_k_batches

if TYPE_CHECKING:
    from pyspark import Broadcast
    from pyspark.sql import Column, DataFrame, SparkSession

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
LISTS_SCHEMA = pa.schema(
    [
        ("column_id", pa.string()),
        ("table_id", pa.string()),
        ("rank", pa.int32()),
        ("candidate_column_id", pa.string()),
        ("candidate_table_id", pa.string()),
        ("overlap", pa.int64()),
    ]
)
CHANGES_SCHEMA = pa.schema([("batch_id", pa.int64()), ("column_id", pa.string()), ("table_id", pa.string())])
FREQUENT_SCHEMA = pa.schema([("token", pa.string()), ("f", pa.int64())])


def column_stats(tokens: DataFrame) -> DataFrame:
    """(column_id, table_id, size, n_values): distinct tokens and total non-null values per column."""

    return tokens.groupBy("column_id", "table_id").agg(
        F.count(F.lit(1)).cast("long").alias("size"), F.sum("n").cast("long").alias("n_values")
    )


def column_ids(tokens: DataFrame) -> pa.Table:
    """(column_id, table_id, cid) of every column of `tokens` in column_id order: `cid` is the dense
    id the counting kernel uses (Python's code-point order is UTF-8 byte order, Spark's string
    order, so ties break the same way)."""
    found = tokens.select("column_id", "table_id").distinct().toArrow()
    found = found.take(pc.sort_indices(found, [("column_id", "ascending")]))
    return found.append_column("cid", pa.array(range(found.num_rows), pa.int64()))


def is_frequent(f: Column, was_frequent: Column, max_list: int) -> Column:
    """Whether a token held by `f` columns is skipped: over the bound, or skipped after the last
    batch (`was_frequent`) and still over half of it."""
    return (f > max_list) | (was_frequent & (f > max_list // 2))


def counted_groups(
    ids: DataFrame, n_columns: int, tokens: DataFrame, max_list: int, was_frequent: DataFrame | None
) -> tuple[Groups, pa.Table]:
    """The posting-list groups of the lake's tokens, collected as `Groups`: lists of 2..`max_list`
    dense column ids with their token counts, and each column's number of frequent tokens
    (`is_frequent` given the `was_frequent` tokens; skipped, never expanded); and those frequent
    tokens with their list lengths (FREQUENT_SCHEMA)."""
    pairs_of = tokens.select("column_id", "token").join(F.broadcast(ids), "column_id").select("token", "cid")
    postings = pairs_of.groupBy("token").agg(F.sort_array(F.collect_list("cid")).alias("columns"))
    was = F.lit(False)
    if was_frequent is not None:
        postings = postings.join(F.broadcast(was_frequent.select("token", F.lit(True).alias("was"))), "token", "left")
        was = F.coalesce(F.col("was"), F.lit(False))
    size = F.size("columns")
    postings = postings.select("token", "columns", is_frequent(size, was, max_list).alias("skip")).cache()
    try:
        kept = (
            postings.where((size > 1) & ~F.col("skip"))
            .groupBy("columns")
            .agg(F.count(F.lit(1)).cast("long").alias("weight"))
            .toArrow()
        )
        skipped = (
            postings.where("skip")
            .select(F.explode("columns").alias("cid"))
            .groupBy("cid")
            .agg(F.count(F.lit(1)).cast("long").alias("n"))
            .toArrow()
        )
        frequent = postings.where("skip").select("token", size.cast("long").alias("f")).toArrow()
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


def _count_top_k(batches: Iterator[pa.RecordBatch], groups: Broadcast[Groups], k: int) -> Iterator[pa.RecordBatch]:
    return top_k_batches(groups.value, batches, k)


@dataclass(frozen=True)
class Overlaps:
    """What one counting pass gives: every column's ranked list (LISTS_SCHEMA), every column's
    number of skipped tokens (column_id, n_skipped; columns without a candidate included), and the
    frequent tokens after this count (FREQUENT_SCHEMA)."""

    top: DataFrame
    skipped: DataFrame
    frequent: pa.Table


def top_k_overlaps(
    held: ExitStack, tokens: DataFrame, *, k: int, max_list: int, was_frequent: DataFrame | None
) -> Overlaps:
    """The top-k list of every column by exact overlap over the tokens that are not frequent
    (`is_frequent`, given the tokens skipped after the last batch).

    Spark builds the groups; the counting runs in `overlap_count` over Arrow batches of column ids,
    with the groups broadcast (a few bytes per token occurrence in a shared list). The counts stay
    cached and the broadcast alive until `held` closes."""
    spark = tokens.sparkSession
    names = column_ids(tokens)
    ids = spark.createDataFrame(names)
    groups, frequent = counted_groups(ids, names.num_rows, tokens, max_list, was_frequent)
    shared = spark.sparkContext.broadcast(groups)
    held.callback(shared.destroy)  # never read again: its file and every copy go then, not at the next GC
    candidate = ids.select(
        F.col("cid").alias("candidate_cid"),
        F.col("column_id").alias("candidate_column_id"),
        F.col("table_id").alias("candidate_table_id"),
    )
    n_parts = max(1, min(4 * spark.sparkContext.defaultParallelism, names.num_rows // 500))
    counted = (
        spark.createDataFrame(names.select(["cid"]))
        .repartition(n_parts)
        .mapInArrow(partial(_count_top_k, groups=shared, k=k), from_arrow_schema(TOP_SCHEMA))
    )
    top = _cached(
        held,
        counted.join(F.broadcast(ids), "cid").join(F.broadcast(candidate), "candidate_cid").select(*LISTS_SCHEMA.names),
    )
    skipped = names.select(["column_id"]).append_column("n_skipped", pa.array(groups.n_skipped, pa.int64()))
    return Overlaps(top, spark.createDataFrame(skipped), frequent)


def key_columns(spark: SparkSession, store: LakeStore) -> DataFrame:
    """(column_id) of single-column exact keys from silver `keys`; empty if that table is absent.
    `columns` entries may be headers or column ids; both are accepted."""

    if not store.exists(KEYS):
        return local_frame(spark, [], "column_id string")
    keys = store.read(KEYS)
    single = keys.where((F.size("columns") == 1) & F.col("exact"))
    entry = F.col("columns")[0]
    cid = F.when(entry.startswith(F.concat(F.col("table_id"), F.lit("#"))), entry).otherwise(
        F.concat_ws("#", F.col("table_id"), entry)
    )
    return single.select(cid.alias("column_id")).distinct()


def gold_rows(lists: DataFrame, columns: DataFrame, keys: DataFrame, index_version: int) -> DataFrame:
    """The gold rows (JOINABLE_SCHEMA) of ranked lists (LISTS_SCHEMA rows): sizes, containments,
    Jaccard, key flags and the join estimate added from the columns' facts (column_id, size: distinct
    tokens, n_values: non-null values, n_skipped: tokens in lists over the bound)."""

    a = columns.select("column_id", "size", F.col("n_values").alias("a_n"), "n_skipped")
    b = columns.select(
        F.col("column_id").alias("candidate_column_id"),
        F.col("size").alias("candidate_size"),
        F.col("n_values").alias("b_n"),
    )
    ka = keys.select("column_id", F.lit(True).alias("is_key"))
    kb = keys.select(F.col("column_id").alias("candidate_column_id"), F.lit(True).alias("candidate_is_key"))
    rows = (
        lists.join(a, "column_id")
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


@dataclass(frozen=True)
class Counted:
    """Every column's gold rows as of this count (JOINABLE_SCHEMA, cached) and the frequent tokens
    the count skipped (FREQUENT_SCHEMA), which the next count reads."""

    gold: DataFrame
    frequent: pa.Table


def count_all(
    held: ExitStack, store: LakeStore, tokens: DataFrame, keys: DataFrame, settings: Settings, index_version: int
) -> Counted:
    """Every column's top `joinable_k` list counted from `tokens`, with its statistics; what it
    caches stays cached until `held` closes."""
    was_frequent = store.read(JOINABLE_FREQUENT) if store.exists(JOINABLE_FREQUENT) else None
    found = top_k_overlaps(
        held,
        tokens,
        k=settings.index.joinable_k,
        max_list=settings.index.joinable_max_list,
        was_frequent=was_frequent,
    )
    columns = column_stats(tokens).join(found.skipped, "column_id")
    return Counted(_cached(held, gold_rows(found.top, columns, keys, index_version)), found.frequent)


def write_all(
    store: LakeStore, tokens: DataFrame, keys: DataFrame, settings: Settings, index_version: int
) -> CommitResult:
    """Every column's list computed from scratch into gold `joinable`, and the frequent tokens of
    the lake into `joinable_frequent` (what the next batch's count reads)."""
    with ExitStack() as held:
        counted = count_all(held, store, tokens, keys, settings, index_version)
        result = store.overwrite(JOINABLE, counted.gold)
        store.overwrite(JOINABLE_FREQUENT, counted.frequent)
    return result


def _cached(held: ExitStack, frame: DataFrame) -> DataFrame:
    """`frame` cached until `held` closes (on error too: a long-lived session would keep it)."""
    frame = frame.cache()
    held.callback(frame.unpersist)
    return frame


def relisted_columns(new: DataFrame, old: DataFrame, touched: list[str]) -> DataFrame:
    """(column_id, table_id) of every column whose list differs between the gold rows `new` and
    `old` (module docstring, "Batches"): a row that differs in any field but `index_version`, a rank
    present on one side only, or a row naming a touched table on either side."""
    fields = [name for name in JOINABLE_SCHEMA.names if name not in ("column_id", "rank", "index_version")]

    def side(rows: DataFrame, name: str) -> DataFrame:
        return rows.select("column_id", "rank", F.struct(*fields).alias(name))

    def names_touched(name: str) -> Column:
        row = F.col(name)
        return F.coalesce(row["table_id"].isin(touched) | row["candidate_table_id"].isin(touched), F.lit(False))

    both = side(new, "new").join(side(old, "old"), ["column_id", "rank"], "full_outer")
    differs = ~F.col("new").eqNullSafe(F.col("old")) | names_touched("new") | names_touched("old")
    table_id = F.coalesce(F.col("new.table_id"), F.col("old.table_id")).alias("table_id")
    return both.where(differs).select("column_id", table_id).distinct()


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
    """Update gold `joinable` for `batch` (module docstring, "Batches"); with `full`, or on a lake
    without gold yet, every column is re-listed. Part of the relate unit: `spark_jobs.relate.stage`
    begins and commits it."""

    if not store.exists(COLUMN_TOKENS):
        tokens = local_frame(spark, [], "table_id string, column_id string, token string, n long")
    else:
        tokens = store.read(COLUMN_TOKENS, columns=["table_id", "column_id", "token", "n"])
    keys = key_columns(spark, store)
    previous = store.read(JOINABLE) if store.exists(JOINABLE) else None
    with ExitStack() as held:
        counted = count_all(held, store, tokens, keys, settings, batch.batch_id)
        if full or previous is None:
            # every list replaced, including those of columns that have vanished since
            n_affected = record_changes(store, batch, tokens, *([] if previous is None else [previous]))
            gold = counted.gold
        else:
            relisted = _cached(held, relisted_columns(counted.gold, previous, list(batch.touched)))
            n_affected = record_changes(store, batch, relisted)
            gold = previous.join(relisted, "column_id", "left_anti").unionByName(
                counted.gold.join(relisted, "column_id", "left_semi")
            )
        result = store.overwrite(JOINABLE, gold.select(*JOINABLE_SCHEMA.names))
        store.overwrite(JOINABLE_FREQUENT, counted.frequent)
    counts = {"n_joinable_affected": n_affected, "n_joinable_rows": result.n_rows_written}
    log.info("joinable lists %s", "computed" if full or previous is None else "updated", extra=counts)
    return counts
