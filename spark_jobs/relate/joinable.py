"""Gold `joinable`: for every indexed column, its top-k joinable columns by exact distinct-value overlap.

Each answer carries the overlap, the containment in both directions, the Jaccard similarity, whether
either side is a single-column key (silver `keys`, absent = no keys) and so the join's direction, an
estimated join size from the value multiplicities, and `exact`.

How the pairs are counted (duplicate posting lists, as in JOSIE, SIGMOD 2019, §3.5):

1. Posting lists are built from silver `column_tokens` (token -> sorted column ids). Identical lists
   are grouped (`groupBy(columns)`), so a group of r tokens with the same list is expanded into
   column pairs *once* and credits r to each pair. In open-data lakes most tokens occur in exactly one
   column; their one-element lists collapse into one group per column and produce no pairs at all.
2. **Frequent tokens.** A list of length f yields f·(f-1) ordered pairs, so a token such as "1" or
   "yes" shared by thousands of columns would dominate the job. Lists longer than
   `settings.index.joinable_max_list` are skipped: their pairs are never generated. A column holding
   at least one skipped token may then be missing overlap on some candidates (and whole candidates),
   so every answer of that column says `exact=false`; all other columns' answers are exact (a skipped
   token is in neither side of their pairs). Sizes, containment denominators and Jaccard use the true
   set sizes in all cases.
3. Top-k per column by overlap, ties broken by the candidate's column_id (so brute force can agree).

Why silver `column_tokens` and not the JOSIE Delta tables: the join-size estimate needs each value's
multiplicity `n`, which the JOSIE sets do not keep, and JOSIE's duplicate groups go stale between
rebuilds (changed lists become singleton groups), whereas grouping the lists this job actually reads
is exact every time. Both start from the same tokens, so the overlaps are the same.

Incremental: a batch recomputes the complete lists of the *affected* columns only — the columns of
added tables, every column sharing a token with them, every column whose current list names a column
of a touched table (a deleted or changed candidate must be replaced by the next best one), and the
columns whose lists are inexact (a deletion may bring a frequent token back under the bound). Lists
of deleted columns vanish. The affected column ids of each batch are recorded in `joinable_changes`,
which the catalog publisher reads to replace exactly those lists.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import Window
from pyspark.sql import functions as F  # noqa: N812

from catalog.core.settings import Settings
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.store import LakeStore
from spark_jobs.profile.tokens import COLUMN_TOKENS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

JOINABLE = "joinable"
JOINABLE_CHANGES = "joinable_changes"
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


def column_stats(tokens: DataFrame) -> DataFrame:
    """(column_id, table_id, size, n_values): distinct tokens and total non-null values per column."""

    return tokens.groupBy("column_id", "table_id").agg(
        F.count(F.lit(1)).cast("long").alias("size"), F.sum("n").cast("long").alias("n_values")
    )


def overlap_pairs(tokens: DataFrame, left: DataFrame | None, max_list: int) -> tuple[DataFrame, DataFrame]:
    """Ordered pairs (column_id, candidate_column_id, overlap) for left columns (all when `left` is None),
    from duplicate groups of posting lists no longer than `max_list`; and (column_id, n_skipped), the
    number of each left column's tokens whose list was skipped."""

    pairs_of = tokens.select("column_id", "token")
    if left is not None:
        scope = pairs_of.join(F.broadcast(left.select("column_id")), "column_id").select("token").distinct()
        pairs_of = pairs_of.join(scope, "token")
    freq = pairs_of.groupBy("token").agg(F.count(F.lit(1)).alias("f"))
    kept = freq.where(F.col("f") <= max_list).select("token")
    skipped_tokens = freq.where(F.col("f") > max_list).select("token")
    postings = (
        pairs_of.join(kept, "token").groupBy("token").agg(F.sort_array(F.collect_list("column_id")).alias("columns"))
    )
    groups = (
        postings.where(F.size("columns") > 1)  # a list of one column makes no pair
        .groupBy("columns")
        .agg(F.count(F.lit(1)).cast("long").alias("weight"))
    )
    firsts = groups.select("columns", "weight", F.explode("columns").alias("column_id"))
    if left is not None:
        firsts = firsts.join(F.broadcast(left.select("column_id")), "column_id")
    pairs = (
        firsts.select("column_id", "weight", F.explode("columns").alias("candidate_column_id"))
        .where(F.col("column_id") != F.col("candidate_column_id"))
        .groupBy("column_id", "candidate_column_id")
        .agg(F.sum("weight").cast("long").alias("overlap"))
    )
    skipped = (
        tokens.select("column_id", "token")
        .join(skipped_tokens, "token")
        .groupBy("column_id")
        .agg(F.count(F.lit(1)).alias("n_skipped"))
    )
    if left is not None:
        skipped = skipped.join(F.broadcast(left.select("column_id")), "column_id")
    return pairs, skipped


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


def top_k_joinable(
    tokens: DataFrame, keys: DataFrame, *, k: int, max_list: int, index_version: int, left: DataFrame | None = None
) -> DataFrame:
    """The gold rows (JOINABLE_SCHEMA) of the left columns (all columns when `left` is None)."""

    stats = column_stats(tokens)
    pairs, skipped = overlap_pairs(tokens, left, max_list)
    ranked = pairs.withColumn(
        "rank",
        F.row_number().over(
            Window.partitionBy("column_id").orderBy(F.col("overlap").desc(), F.col("candidate_column_id").asc())
        ),
    )
    top = ranked.where(F.col("rank") <= k)
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
        .join(skipped, "column_id", "left")
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
        (F.coalesce(F.col("n_skipped"), F.lit(0)) == 0).alias("exact"),
        F.lit(METHOD).alias("method"),
        F.lit(index_version).cast("long").alias("index_version"),
    )


def affected_columns(tokens: DataFrame, old: DataFrame | None, batch: ChangeBatch) -> DataFrame:
    """(column_id, table_id) whose lists this batch may change (see the module docstring); `old` is
    the current gold (None on the first run: everything is affected)."""

    cols = tokens.select("column_id", "table_id").distinct()
    if old is None:
        return cols
    touched = list(batch.touched)
    new_cols = cols.where(F.col("table_id").isin(list(batch.added)))
    new_tokens = tokens.join(new_cols.select("column_id"), "column_id").select("token").distinct()
    sharing = tokens.join(new_tokens, "token").select("column_id", "table_id")
    naming = old.where(F.col("candidate_table_id").isin(touched)).select("column_id", "table_id")
    inexact = old.where(~F.col("exact")).select("column_id", "table_id")
    gone = old.where(F.col("table_id").isin(touched)).select("column_id", "table_id")
    return new_cols.unionByName(sharing).unionByName(naming).unionByName(inexact).unionByName(gone).distinct()


def update(
    spark: SparkSession, store: LakeStore, settings: Settings, batch: ChangeBatch, *, full: bool = False
) -> dict[str, Any]:
    """Update gold `joinable` for `batch` (or recompute every list with `full`). Part of the relate
    unit: `spark_jobs.relate.stage` begins and commits it."""

    if not store.exists(COLUMN_TOKENS):
        tokens = spark.createDataFrame([], "table_id string, column_id string, token string, n long")
    else:
        tokens = store.read(COLUMN_TOKENS, columns=["table_id", "column_id", "token", "n"])
    old = store.read(JOINABLE) if store.exists(JOINABLE) and not full else None

    # 1. the affected columns, recorded first: the publisher replaces exactly these lists
    affected = affected_columns(tokens, old, batch).select(
        F.lit(batch.batch_id).cast("long").alias("batch_id"), "column_id", "table_id"
    )
    if full and store.exists(JOINABLE):  # a full run replaces every list, including vanished ones
        affected = affected.unionByName(
            store.read(JOINABLE).select(F.lit(batch.batch_id).cast("long").alias("batch_id"), "column_id", "table_id")
        ).distinct()
    store.append(JOINABLE_CHANGES, affected)
    left = store.read(JOINABLE_CHANGES, columns=["batch_id", "column_id"], where={"batch_id": [batch.batch_id]})
    left = left.select("column_id").distinct().cache()
    n_affected = left.count()

    # 2. their complete new lists, and every other list kept as it was
    keys = key_columns(spark, store)
    fresh = top_k_joinable(
        tokens,
        keys,
        k=settings.index.joinable_k,
        max_list=settings.index.joinable_max_list,
        index_version=batch.batch_id,
        left=None if old is None else left,
    )
    if old is not None:
        kept = old.join(F.broadcast(left), "column_id", "left_anti").where(~F.col("table_id").isin(list(batch.touched)))
        fresh = kept.select(*JOINABLE_SCHEMA.names).unionByName(fresh)
    result = store.overwrite(JOINABLE, fresh.select(*JOINABLE_SCHEMA.names))
    left.unpersist()
    counts = {"n_joinable_affected": n_affected, "n_joinable_rows": result.n_rows_written}
    log.info("joinable lists updated", extra=counts)
    return counts
