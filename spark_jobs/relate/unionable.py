"""Gold `unionable`: for every table, its top-k unionable tables with the column alignment.

How a table pair is scored is `spark_jobs.relate.union_score`. This module decides which pairs are
scored, in Spark SQL, so that the work grows with the lake and not with its square:

* **Candidates bounded per table.** A table's candidates are the at most `unionable_candidates`
  tables with the most evidence that is cheap to index: shared normalized headers, each weighted by
  how rare it is (a header carried by 2 tables weighs 1, one carried by `unionable_header_max_tables`
  tables almost nothing, one carried by more is not used — web tables headed `0`, `1`, `2` share
  them by the hundred), plus value evidence from the joinable lists (for each of the table's
  columns, its best containment with a column of the candidate). Ties go to the smaller table id.
* **Scoring in groups.** One Arrow group per listed table holds its columns and every candidate's
  columns with their value overlaps; the signals are matrix expressions over the whole group and
  the one-to-one matching runs once per candidate. No Python runs per column pair.

State (all in the relate unit): gold `unionable`, the candidates each table was scored against
(`unionable_candidates`) and the normalized headers they were chosen from (`unionable_headers`).

Incremental: a table's list depends only on its candidates, their columns and value overlaps, and
the header weights of its headers. A batch recomputes the lists of the tables where one of those can
have changed — the touched tables and the tables whose joinable lists changed (`t1`), the tables
that had a `t1` table among their candidates, the tables with joinable evidence involving a `t1`
table now, and the tables carrying a header of a touched table (before or after the batch) whose
weight is not zero — and keeps the others. `unionable_changes` records the recomputed table ids for
the publisher. A full recompute lists every table the same way, so both give the same lists.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Window
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.pandas.types import from_arrow_schema

from catalog.core.settings import Settings
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.bronze import DATASETS
from spark_jobs.lake.store import LakeStore
from spark_jobs.profile.tokens import COLUMN_TOKENS, column_headers_frame
from spark_jobs.relate.joinable import JOINABLE, JOINABLE_CHANGES
from spark_jobs.relate.union_score import Candidate, Columns, rank_candidates

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

UNIONABLE = "unionable"
UNIONABLE_CHANGES = "unionable_changes"
UNIONABLE_CANDIDATES = "unionable_candidates"
UNIONABLE_HEADERS = "unionable_headers"
PROFILES = "column_profiles"  # silver (spark_jobs/profile/profiles.py); optional
METHOD = "tus-bipartite"

UNIONABLE_SCHEMA = pa.schema(
    [
        ("table_id", pa.string()),
        ("rank", pa.int32()),
        ("candidate_table_id", pa.string()),
        ("score", pa.float64()),
        ("n_aligned", pa.int32()),
        ("alignment", pa.string()),
        ("exact", pa.bool_()),
        ("method", pa.string()),
        ("index_version", pa.int64()),
    ]
)
CHANGES_SCHEMA = pa.schema([("batch_id", pa.int64()), ("table_id", pa.string())])
# what a scoring group returns; the stage adds exact, method and index_version
_RANKED = pa.schema([f for f in UNIONABLE_SCHEMA if f.name not in ("exact", "method", "index_version")])
CANDIDATES_SCHEMA = pa.schema(
    [("table_id", pa.string()), ("candidate_table_id", pa.string()), ("evidence", pa.float64())]
)
HEADERS_SCHEMA = pa.schema([("table_id", pa.string()), ("h", pa.string())])
_FEATURES = (
    "column_id string, table_id string, header string, position int, "
    "size long, numeric boolean, mean double, std double, type string"
)


# ---------------------------------------------------------------------- column features
def column_features(spark: SparkSession, store: LakeStore, tokens: DataFrame) -> DataFrame:
    """(column_id, table_id, header, position, size, numeric, mean, std, type) per indexed column."""

    num = F.expr("try_cast(token AS double)")
    finite = num.isNotNull() & ~F.isnan(num) & (F.abs(num) < F.lit(1e300))
    t = tokens.withColumn("x", F.when(finite, num))
    stats = t.groupBy("column_id", "table_id").agg(
        F.count(F.lit(1)).cast("long").alias("size"),
        (F.sum(F.when(F.col("x").isNotNull(), F.col("n")).otherwise(0)) / F.sum("n")).alias("numeric_share"),
        (F.sum(F.col("x") * F.col("n")) / F.sum(F.when(F.col("x").isNotNull(), F.col("n")))).alias("mean"),
        F.sum(F.col("x") * F.col("x") * F.col("n")).alias("sxx"),
        F.sum(F.when(F.col("x").isNotNull(), F.col("n"))).alias("nx"),
    )
    var = F.greatest(F.col("sxx") / F.col("nx") - F.col("mean") * F.col("mean"), F.lit(0.0))
    stats = stats.select(
        "column_id",
        "table_id",
        "size",
        (F.col("numeric_share") >= 0.9).alias("numeric"),
        "mean",
        F.sqrt(var).alias("std"),
    )
    headers = _column_headers(store).drop("table_id")
    feats = stats.join(headers, "column_id")
    derived = F.when(F.col("numeric"), F.lit("numeric")).otherwise(F.lit("text"))
    if store.exists(PROFILES):
        prof = store.read(PROFILES).select("column_id", F.col("inferred_type").alias("ptype"))
        feats = feats.join(prof, "column_id", "left").withColumn("type", F.coalesce("ptype", derived)).drop("ptype")
    else:
        feats = feats.withColumn("type", derived)
    return feats


def _column_headers(store: LakeStore) -> DataFrame:
    """(table_id, column_id, header, position) of every column of every table in bronze."""
    datasets = store.read(DATASETS, columns=["table_id", "headers"])
    return column_headers_frame(datasets).withColumnRenamed("col", "position")


def table_headers(store: LakeStore) -> DataFrame:
    """(table_id, h): each table's distinct normalized headers (letters and digits, lower case)."""
    norm = F.lower(F.regexp_replace("header", "[^0-9A-Za-z]+", ""))
    return _column_headers(store).select("table_id", norm.alias("h")).where(F.col("h") != "").distinct()


# ---------------------------------------------------------------------- candidates
def header_weights(headers: DataFrame, max_tables: int) -> DataFrame:
    """(h, df, w): headers carried by 2 to `max_tables` tables, weighted by rarity, from 1 (two
    tables) down towards 0 (`max_tables` tables). A weight depends on nothing but the header's own
    table count, so a batch changes only the weights of the headers it adds or removes."""
    top = float(max(max_tables, 2)) + 1.0
    df = headers.groupBy("h").agg(F.count(F.lit(1)).alias("df"))
    weight = F.log(F.lit(top) / F.col("df")) / F.log(F.lit(top / 2.0))
    return df.where((F.col("df") >= 2) & (F.col("df") <= max_tables)).select("h", "df", weight.alias("w"))


def joinable_both_ways(joinable: DataFrame) -> DataFrame:
    """Gold `joinable` rows seen from both columns: (table_id, column_id, candidate_table_id,
    candidate_column_id, overlap, best_containment); a pair that either column's list names appears
    from each side. `best_containment` is the larger containment of the two directions."""
    best = F.greatest("containment", "candidate_containment").alias("best_containment")
    forward = joinable.select("table_id", "column_id", "candidate_table_id", "candidate_column_id", "overlap", best)
    backward = joinable.select(
        F.col("candidate_table_id").alias("table_id"),
        F.col("candidate_column_id").alias("column_id"),
        F.col("table_id").alias("candidate_table_id"),
        F.col("column_id").alias("candidate_column_id"),
        "overlap",
        best,
    )
    return forward.unionByName(backward)


def value_evidence(joinable: DataFrame) -> DataFrame:
    """(table_id, candidate_table_id, evidence): for each column of the table, its best containment
    (either way) with a column of the candidate, summed. Symmetric in the pair."""
    per_column = (
        joinable_both_ways(joinable)
        .groupBy("table_id", "column_id", "candidate_table_id")
        .agg(F.max("best_containment").alias("c"))
    )
    return per_column.groupBy("table_id", "candidate_table_id").agg(F.sum("c").alias("evidence"))


def choose_candidates(
    headers: DataFrame, weights: DataFrame, joinable: DataFrame | None, scope: DataFrame | None, limit: int
) -> DataFrame:
    """(table_id, candidate_table_id, evidence): the top `limit` candidates by evidence of each
    table in `scope` (all when None)."""
    weighted = headers.join(weights.select("h", "w"), "h")
    left = weighted if scope is None else weighted.join(F.broadcast(scope), "table_id", "left_semi")
    by_header = (
        left.alias("a")
        .join(weighted.alias("b"), "h")
        .where(F.col("a.table_id") != F.col("b.table_id"))
        .select(
            F.col("a.table_id").alias("table_id"),
            F.col("b.table_id").alias("candidate_table_id"),
            F.col("a.w").alias("evidence"),
        )
    )
    evidence = by_header
    if joinable is not None:
        by_value = value_evidence(joinable)
        if scope is not None:
            by_value = by_value.join(F.broadcast(scope), "table_id", "left_semi")
        evidence = evidence.unionByName(by_value)
    total = (
        evidence.where(F.col("table_id") != F.col("candidate_table_id"))  # joinable lists name own columns too
        .groupBy("table_id", "candidate_table_id")
        .agg(F.sum("evidence").alias("evidence"))
    )
    order = Window.partitionBy("table_id").orderBy(F.col("evidence").desc(), F.col("candidate_table_id").asc())
    return total.withColumn("r", F.row_number().over(order)).where(F.col("r") <= limit).drop("r")


def affected_tables(
    spark: SparkSession,
    store: LakeStore,
    batch: ChangeBatch,
    *,
    headers: DataFrame,
    old_headers: DataFrame,
    old_candidates: DataFrame,
    joinable: DataFrame | None,
    max_tables: int,
) -> DataFrame:
    """(table_id) of the tables whose lists the batch can change (see the module docstring)."""
    touched = spark.createDataFrame([(t,) for t in batch.touched], "table_id string")
    t1 = touched
    if store.exists(JOINABLE_CHANGES):
        t1 = t1.unionByName(store.read(JOINABLE_CHANGES, where={"batch_id": [batch.batch_id]}).select("table_id"))
    t1 = F.broadcast(t1.distinct())
    had_t1 = old_candidates.join(
        t1.withColumnRenamed("table_id", "candidate_table_id"), "candidate_table_id", "left_semi"
    )
    parts = [t1, had_t1.select("table_id")]
    if joinable is not None:
        parts.append(
            joinable.join(
                t1.withColumnRenamed("table_id", "candidate_table_id"), "candidate_table_id", "left_semi"
            ).select("table_id")
        )
        parts.append(joinable.join(t1, "table_id", "left_semi").select(F.col("candidate_table_id").alias("table_id")))
    touched_h = (
        headers.join(F.broadcast(touched), "table_id", "left_semi")
        .unionByName(old_headers.join(F.broadcast(touched), "table_id", "left_semi"))
        .select("h")
        .distinct()
    )
    counted = [
        h.join(touched_h, "h", "left_semi").groupBy("h").agg(F.count(F.lit(1)).alias("df"))
        for h in (headers, old_headers)
    ]
    weighted_h = counted[0].unionByName(counted[1]).where(F.col("df") <= max_tables).select("h").distinct()
    parts.append(headers.join(weighted_h, "h", "left_semi").select("table_id"))
    scope = parts[0]
    for p in parts[1:]:
        scope = scope.unionByName(p)
    return scope.distinct()


# ---------------------------------------------------------------------- scoring
def _group_columns(table: pa.Table, rows: np.ndarray) -> Columns:
    """The columns at `rows` of a scoring group, in table order."""
    positions = table.column("position").to_numpy(zero_copy_only=False)[rows]
    return Columns.from_records(table.take(pa.array(rows[np.argsort(positions, kind="stable")])).to_pylist())


def score_group(table: pa.Table, k: int) -> pa.Table:
    """applyInArrow body: one listed table's own columns (`candidate_table_id` = its own id) and
    every candidate's columns, each candidate column with its overlaps with the table's columns;
    returns the table's top-k rows."""
    table_id = table.column("table_id")[0].as_py()
    owners = table.column("candidate_table_id").to_numpy(zero_copy_only=False)
    own = _group_columns(table, np.flatnonzero(owners == table_id))
    position = {c: i for i, c in enumerate(own.column_id)}
    overlaps = table.column("overlaps").to_pylist()
    column_ids = table.column("column_id").to_pylist()
    candidates = []
    for other in sorted(set(owners.tolist()) - {table_id}):
        rows = np.flatnonzero(owners == other)
        cols = _group_columns(table, rows)
        index = {c: j for j, c in enumerate(cols.column_id)}
        overlap = np.zeros((len(own), len(cols)))
        for r in rows.tolist():
            for hit in overlaps[r] or ():
                if hit["column_id"] in position:
                    overlap[position[hit["column_id"]], index[column_ids[r]]] = hit["overlap"]
        candidates.append(Candidate(other, cols, overlap))
    ranked = rank_candidates(table_id, own, candidates, k)
    return pa.Table.from_pylist(ranked, schema=_RANKED)


def unionable_rows(
    features: DataFrame, candidates: DataFrame, joinable: DataFrame | None, *, k: int, index_version: int
) -> DataFrame:
    """Gold rows (UNIONABLE_SCHEMA) of the tables in `candidates` (table_id, candidate_table_id)."""
    listed = candidates.select("table_id").distinct()
    members = candidates.select("table_id", "candidate_table_id").unionByName(
        listed.select("table_id", F.col("table_id").alias("candidate_table_id"))
    )
    cols = members.join(features.withColumnRenamed("table_id", "candidate_table_id"), "candidate_table_id")
    if joinable is not None:
        best = (
            joinable_both_ways(joinable)
            .groupBy("table_id", "column_id", "candidate_column_id")
            .agg(F.max("overlap").cast("double").alias("overlap"))
        )
        hits = best.groupBy("table_id", F.col("candidate_column_id").alias("column_id")).agg(
            F.collect_list(F.struct("column_id", "overlap")).alias("overlaps")
        )
        cols = cols.join(hits, ["table_id", "column_id"], "left")
    else:
        cols = cols.withColumn("overlaps", F.lit(None).cast("array<struct<column_id:string,overlap:double>>"))
    ranked = cols.groupBy("table_id").applyInArrow(lambda t: score_group(t, k), schema=from_arrow_schema(_RANKED))
    return ranked.select(
        *_RANKED.names,
        F.lit(False).alias("exact"),
        F.lit(METHOD).alias("method"),
        F.lit(index_version).cast("long").alias("index_version"),
    )


# ---------------------------------------------------------------------- the stage
def _empty(spark: SparkSession, schema: pa.Schema | str) -> DataFrame:
    return spark.createDataFrame([], schema if isinstance(schema, str) else from_arrow_schema(schema))


def update(
    spark: SparkSession,
    store: LakeStore,
    settings: Settings,
    batch: ChangeBatch,
    *,
    full: bool = False,
    record_changes: bool = True,
) -> dict[str, Any]:
    """Update gold `unionable` for `batch` (after the joinable lists of the same batch); `full`:
    list every table again. `record_changes`: note the listed tables in `unionable_changes` for the
    batch's publish (a full re-relate replaces every list in the catalog instead). Part of the
    relate unit: `spark_jobs.relate.stage` begins and commits it."""
    index = settings.index
    headers = _empty(spark, HEADERS_SCHEMA) if not store.exists(DATASETS) else table_headers(store).cache()
    joinable = store.read(JOINABLE) if store.exists(JOINABLE) else None
    incremental = not full and all(store.exists(n) for n in (UNIONABLE, UNIONABLE_CANDIDATES, UNIONABLE_HEADERS))
    old_candidates = store.read(UNIONABLE_CANDIDATES) if incremental else None
    if old_candidates is not None:
        scope = affected_tables(
            spark,
            store,
            batch,
            headers=headers,
            old_headers=store.read(UNIONABLE_HEADERS),
            old_candidates=old_candidates,
            joinable=joinable,
            max_tables=index.unionable_header_max_tables,
        )
        recorded = scope
    else:
        scope = None
        recorded = headers.select("table_id").distinct()
        if store.exists(UNIONABLE):
            recorded = recorded.unionByName(store.read(UNIONABLE).select("table_id")).distinct()
        recorded = recorded.unionByName(spark.createDataFrame([(t,) for t in batch.touched], "table_id string"))
    if record_changes:
        rows = recorded.distinct().select(F.lit(batch.batch_id).cast("long").alias("batch_id"), "table_id")
        store.append(UNIONABLE_CHANGES, rows)
        recorded = store.read(UNIONABLE_CHANGES, where={"batch_id": [batch.batch_id]}).select("table_id").distinct()
    recorded = recorded.cache()
    if scope is not None:
        scope = recorded
    n_scope = recorded.count()

    weights = header_weights(headers, index.unionable_header_max_tables)
    chosen = choose_candidates(headers, weights, joinable, scope, index.unionable_candidates).cache()
    involved = (
        chosen.select("table_id").unionByName(chosen.select(F.col("candidate_table_id").alias("table_id"))).distinct()
    )
    tokens = (
        store.read(COLUMN_TOKENS, columns=["table_id", "column_id", "token", "n"]).join(
            F.broadcast(involved), "table_id", "left_semi"
        )
        if store.exists(COLUMN_TOKENS)
        else _empty(spark, "table_id string, column_id string, token string, n long")
    )
    features = column_features(spark, store, tokens) if store.exists(DATASETS) else _empty(spark, _FEATURES)
    fresh = unionable_rows(features, chosen, joinable, k=index.unionable_k, index_version=batch.batch_id)
    candidates_out = chosen
    if old_candidates is not None and scope is not None:
        kept = store.read(UNIONABLE).join(scope, "table_id", "left_anti")
        fresh = kept.select(*UNIONABLE_SCHEMA.names).unionByName(fresh.select(*UNIONABLE_SCHEMA.names))
        candidates_out = old_candidates.join(scope, "table_id", "left_anti").unionByName(chosen)
    result = store.overwrite(UNIONABLE, fresh.select(*UNIONABLE_SCHEMA.names))
    store.overwrite(UNIONABLE_CANDIDATES, candidates_out.select(*CANDIDATES_SCHEMA.names))
    store.overwrite(UNIONABLE_HEADERS, headers.select(*HEADERS_SCHEMA.names))
    for df in (headers, chosen, recorded):
        df.unpersist()
    counts = {"n_unionable_affected": n_scope, "n_unionable_rows": result.n_rows_written}
    log.info("unionable lists updated", extra=counts)
    return counts
