"""Gold `unionable`: for every table, its top-k unionable tables with the column alignment.

How a table pair is scored is `spark_jobs.relate.union_score`. This module decides which pairs are
scored, in Spark SQL, so that the work grows with the lake and not with its square:

* **Candidates bounded per table.** A table's candidates are the at most `unionable_candidates`
  tables with the most evidence that is cheap to index: shared normalized headers, each weighted by
  how rare it is (a header carried by 2 tables weighs 1, one carried by `unionable_header_max_tables`
  tables almost nothing, one carried by more is not used — web tables headed `0`, `1`, `2` share
  them by the hundred); the band keys of its columns' value embeddings, weighted the same way and
  divided by the number of bands (`spark_jobs.relate.union_features`: tables whose columns hold
  similar values without sharing a header or a value find each other); the distribution keys of
  their numeric columns (mean and deviation binned on a log scale), weighted like headers; plus
  value evidence from the joinable lists (for each of the table's columns, its best containment
  with a column of the candidate). Ties go to the smaller table id. The list is then cut, in that
  order, to `unionable_max_pairs` column pairs (the table's width times its candidates' summed
  widths; the first candidate always stays): a very wide table costs the budget, or its best
  candidate alone, not its width times fifty others.
* **Scoring in groups.** One Arrow group per listed table holds its columns and every candidate's
  columns with their value overlaps; the signals are matrix expressions over the whole group and
  the one-to-one matching runs once per candidate. No Python runs per column pair.

State (all in the relate unit): gold `unionable`, the candidates each table was scored against
(`unionable_candidates`), the normalized headers and band keys they were chosen from
(`unionable_headers`), and every column's features (`unionable_features`).

Incremental: a table's list depends only on its candidates, their columns' features and value
overlaps, and the weights of its headers and band keys (a band key is a header here). A batch
recomputes the lists of the tables where one of those can have changed — the touched tables and
the tables whose joinable lists changed (`t1`), the tables that had a `t1` table among their
candidates, the tables with joinable evidence involving a `t1` table now, and the tables carrying
a header of a touched table (before or after the batch) whose weight is not zero — and keeps the
others. `unionable_changes` records the recomputed table ids for
the publisher. A full recompute lists every table the same way, so both give the same lists.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Window
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.pandas.types import from_arrow_schema

from catalog.core.settings import IndexSettings, Settings
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.bronze import DATASETS
from spark_jobs.lake.frames import local_frame
from spark_jobs.lake.store import LakeStore
from spark_jobs.profile.tokens import column_headers_frame
from spark_jobs.relate.joinable import JOINABLE, JOINABLE_CHANGES
from spark_jobs.relate.union_features import (
    BAND_PREFIX,
    BANDS,
    UNIONABLE_FEATURES,
    feature_keys,
    features_outdated,
    update_features,
)
from spark_jobs.relate.union_score import (
    SIGNALS,
    Columns,
    ColumnSignal,
    column_spans,
    rank_spans,
    weighted,
)

if TYPE_CHECKING:
    from pyspark import Broadcast
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

UNIONABLE = "unionable"
UNIONABLE_CHANGES = "unionable_changes"
UNIONABLE_CANDIDATES = "unionable_candidates"
UNIONABLE_HEADERS = "unionable_headers"
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


# ---------------------------------------------------------------------- candidates
def table_headers(store: LakeStore, features: DataFrame) -> DataFrame:
    """(table_id, h): each table's distinct normalized headers (letters and digits, lower case) and
    the band keys of its columns' embeddings (`union_features.feature_keys`)."""
    norm = F.lower(F.regexp_replace("header", "[^0-9A-Za-z]+", ""))
    named = column_headers_frame(store.read(DATASETS, columns=["table_id", "headers"]))
    headers = named.select("table_id", norm.alias("h")).where(F.col("h") != "")
    return headers.unionByName(feature_keys(features)).distinct()


def table_widths(features: DataFrame) -> DataFrame:
    """(table_id, width): each table's indexed columns (rows of `unionable_features`)."""
    return features.groupBy("table_id").agg(F.count(F.lit(1)).alias("width"))


def header_weights(headers: DataFrame, max_tables: int) -> DataFrame:
    """(h, df, w): headers carried by 2 to `max_tables` tables, weighted by rarity, from 1 (two
    tables) down towards 0 (`max_tables` tables); a band key weighs 1/BANDS of a header of the same
    rarity (a column as near as another in every band weighs about one rare header), a
    distribution key as much as a header (a numeric column has two, one per grid). A weight
    depends on nothing but the header's own table count, so a batch changes only the weights of the
    headers it adds or removes."""
    top = float(max(max_tables, 2)) + 1.0
    df = headers.groupBy("h").agg(F.count(F.lit(1)).alias("df"))
    rarity = F.log(F.lit(top) / F.col("df")) / F.log(F.lit(top / 2.0))
    weight = F.when(F.col("h").startswith(BAND_PREFIX), rarity / BANDS).otherwise(rarity)
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
    headers: DataFrame,
    weights: DataFrame,
    joinable: DataFrame | None,
    scope: DataFrame | None,
    limit: int,
    *,
    widths: DataFrame,
    max_pairs: int,
) -> DataFrame:
    """(table_id, candidate_table_id, evidence): the top `limit` candidates by evidence of each
    table in `scope` (all when None), cut to the column-pair budget `max_pairs` with the tables'
    `widths` (table_id, width; `within_pair_budget`)."""
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
    ranked = total.withColumn("r", F.row_number().over(order)).where(F.col("r") <= limit)
    return within_pair_budget(ranked, widths, max_pairs)


def bounded_candidates(
    headers: DataFrame, features: DataFrame, joinable: DataFrame | None, scope: DataFrame | None, index: IndexSettings
) -> DataFrame:
    """`choose_candidates` under the settings' bounds: headers weighted up to
    `unionable_header_max_tables` tables, at most `unionable_candidates` candidates per table,
    within `unionable_max_pairs` column pairs."""
    weights = header_weights(headers, index.unionable_header_max_tables)
    return choose_candidates(
        headers,
        weights,
        joinable,
        scope,
        index.unionable_candidates,
        widths=table_widths(features),
        max_pairs=index.unionable_max_pairs,
    )


def within_pair_budget(ranked: DataFrame, widths: DataFrame, max_pairs: int) -> DataFrame:
    """The candidates of `ranked` (table_id, candidate_table_id, evidence, r: rank by evidence) that
    keep each table's scoring group within `max_pairs` column pairs: candidates are taken in rank
    order while the table's width times their summed widths stays within the budget, and the first
    is always taken.

    Why: scoring costs a table its width times its candidates' widths, and a few very wide tables
    (a 6,832-column expression matrix against candidates like it) would cost more than every other
    table together. Under the budget a narrow table keeps all its candidates; a wide one keeps its
    best-evidence candidates only, so total work stays bounded per table."""
    own = widths.select("table_id", F.col("width").cast("long").alias("own"))
    theirs = widths.select(F.col("table_id").alias("candidate_table_id"), F.col("width").cast("long").alias("theirs"))
    upto = Window.partitionBy("table_id").orderBy("r").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    sized = (
        ranked.join(F.broadcast(own), "table_id", "left")
        .join(F.broadcast(theirs), "candidate_table_id", "left")
        .withColumn("pairs", F.coalesce("own", F.lit(0)) * F.sum(F.coalesce("theirs", F.lit(0))).over(upto))
    )
    kept = sized.where((F.col("r") == 1) | (F.col("pairs") <= F.lit(max_pairs)))
    return kept.select("table_id", "candidate_table_id", "evidence")


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
    touched = local_frame(spark, [(t,) for t in batch.touched], "table_id string")
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
@dataclass(frozen=True)
class GroupFeatures:
    """The features of every column a scoring pass involves, as one `Columns`, with the rows of each
    column and each table (in column order). Shipped to the Python workers once per pass as a
    broadcast Arrow stream and built there once per process (`_features_of`), so the scoring
    groups carry only table ids and value overlaps, not every candidate's features again."""

    columns: Columns
    row: dict[str, int]
    tables: dict[str, np.ndarray]

    @classmethod
    def from_arrow(cls, table: pa.Table) -> GroupFeatures:
        table = table.sort_by([("table_id", "ascending"), ("position", "ascending")])
        columns = Columns.from_arrow(table)
        owners = table.column("table_id").to_numpy(zero_copy_only=False)
        starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]]) if len(owners) else np.zeros(0, int)
        bounds = np.r_[starts, len(owners)]
        tables = {owners[lo]: np.arange(lo, hi) for lo, hi in itertools.pairwise(bounds)}
        return cls(columns, {c: i for i, c in enumerate(columns.column_id.tolist())}, tables)


_LOADED: dict[str, GroupFeatures] = {}


def _features_of(token: str, shipped: Broadcast[bytes]) -> GroupFeatures:
    """This pass's features, decoded once per Python worker process (`token` names the pass)."""
    if token not in _LOADED:
        _LOADED.clear()
        _LOADED[token] = GroupFeatures.from_arrow(pa.ipc.open_stream(shipped.value).read_all())
    return _LOADED[token]


def score_group(
    table: pa.Table, features: GroupFeatures, k: int, signals: Sequence[ColumnSignal] = SIGNALS
) -> pa.Table:
    """applyInArrow body: one listed table's candidates (rows with `candidate_table_id`) and the
    value overlaps of its columns with theirs (rows with `column_id`, `candidate_column_id`,
    `overlap`); returns the table's top-k rows."""
    table_id = table.column("table_id")[0].as_py()
    mine = features.tables.get(table_id)
    others = sorted(set(table.column("candidate_table_id").drop_null().to_pylist()) - {table_id})
    others = [o for o in others if o in features.tables]
    if mine is None or not others:
        return _RANKED.empty_table()
    rows = [features.tables[o] for o in others]
    theirs = np.concatenate(rows)
    overlap = np.zeros((len(mine), len(theirs)))
    hits = table.filter(pc.is_valid(table.column("column_id")))
    if len(hits):
        a = _positions(mine, features, hits.column("column_id").to_pylist())
        b = _positions(theirs, features, hits.column("candidate_column_id").to_pylist())
        ok = (a >= 0) & (b >= 0)
        overlap[a[ok], b[ok]] = hits.column("overlap").to_numpy()[ok]
    spans = column_spans(others, [len(r) for r in rows])
    columns = features.columns
    ranked = rank_spans(table_id, columns.take(mine), columns.take(theirs), spans, overlap, k, signals)
    return pa.Table.from_pylist(ranked, schema=_RANKED)


def _positions(rows: np.ndarray, features: GroupFeatures, column_ids: list[str]) -> np.ndarray:
    """Where each column sits among the feature `rows` of this group's matrix, -1 for a column it
    does not hold."""
    feature_rows = np.array([features.row.get(c, -1) for c in column_ids], dtype=np.int64)
    if not len(feature_rows):
        return feature_rows
    lo, hi = int(min(rows.min(), feature_rows.min())), int(max(rows.max(), feature_rows.max()))
    at = np.full(hi - lo + 1, -1, dtype=np.int64)  # feature row - lo -> position among `rows`
    at[rows - lo] = np.arange(len(rows))
    return at[feature_rows - lo]


def unionable_rows(
    features: DataFrame,
    candidates: DataFrame,
    joinable: DataFrame | None,
    *,
    held: ExitStack,
    k: int,
    index_version: int,
    signals: Sequence[ColumnSignal] = SIGNALS,
) -> DataFrame:
    """Gold rows (UNIONABLE_SCHEMA) of the tables in `candidates` (table_id, candidate_table_id).
    Only the features of the tables involved (the listed ones and their candidates) are shipped;
    their broadcast lives until `held` closes: write the rows before."""
    spark = candidates.sparkSession
    involved = (
        candidates.select("table_id")
        .unionByName(candidates.select(F.col("candidate_table_id").alias("table_id")))
        .distinct()
    )
    shipped_table = features.join(F.broadcast(involved), "table_id", "left_semi").toArrow()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, shipped_table.schema) as writer:
        writer.write_table(shipped_table)
    shipped = spark.sparkContext.broadcast(sink.getvalue().to_pybytes())
    held.callback(shipped.destroy)  # read by this pass's groups only
    token = uuid.uuid4().hex
    pairs = candidates.select(
        "table_id",
        "candidate_table_id",
        F.lit(None).cast("string").alias("column_id"),
        F.lit(None).cast("string").alias("candidate_column_id"),
        F.lit(None).cast("double").alias("overlap"),
    )
    if joinable is not None:
        listed = candidates.select("table_id").distinct()
        best = (
            joinable_both_ways(joinable)
            .join(listed, "table_id", "left_semi")
            .groupBy("table_id", "column_id", "candidate_column_id")
            .agg(F.max("overlap").cast("double").alias("overlap"))
        )
        pairs = pairs.unionByName(best.select(F.lit(None).cast("string").alias("candidate_table_id"), *best.columns))

    def score(group: pa.Table) -> pa.Table:
        return score_group(group, _features_of(token, shipped), k, signals)

    ranked = pairs.groupBy("table_id").applyInArrow(score, schema=from_arrow_schema(_RANKED))
    return ranked.select(
        *_RANKED.names,
        F.lit(False).alias("exact"),
        F.lit(METHOD).alias("method"),
        F.lit(index_version).cast("long").alias("index_version"),
    )


def rank_all(
    spark: SparkSession, store: LakeStore, settings: Settings, *, weights: Mapping[str, float] | None = None
) -> pa.Table:
    """Every table's top-k unionable list, computed from `store` as it stands and written nowhere,
    with some signals' weights replaced (`union_score.weighted`): how the union benchmark measures
    each signal alone on a lake the pipeline has indexed. Columns as gold `unionable` without
    exact, method and index_version."""
    index = settings.index
    signals = weighted(weights)
    if not store.exists(DATASETS) or not store.exists(UNIONABLE_FEATURES):
        return _RANKED.empty_table()
    features = store.read(UNIONABLE_FEATURES)
    headers = table_headers(store, features)
    joinable = store.read(JOINABLE) if store.exists(JOINABLE) else None
    chosen = bounded_candidates(headers, features, joinable, None, index)
    with ExitStack() as held:
        rows = unionable_rows(
            features, chosen, joinable, held=held, k=index.unionable_k, index_version=0, signals=signals
        )
        return rows.select(*_RANKED.names).toArrow().cast(_RANKED)


# ---------------------------------------------------------------------- the stage
def _empty(spark: SparkSession, schema: pa.Schema | str) -> DataFrame:
    return local_frame(spark, [], schema if isinstance(schema, str) else from_arrow_schema(schema))


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
    if features_outdated(store):  # a lake indexed by an earlier release: every feature and list again
        log.info("union features computed again: their columns changed", extra={"table": UNIONABLE_FEATURES})
        full = True
    features = update_features(spark, store, settings, batch, full=full)
    headers = _empty(spark, HEADERS_SCHEMA) if not store.exists(DATASETS) else table_headers(store, features).cache()
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
        recorded = recorded.unionByName(local_frame(spark, [(t,) for t in batch.touched], "table_id string"))
    if record_changes:
        rows = recorded.distinct().select(F.lit(batch.batch_id).cast("long").alias("batch_id"), "table_id")
        store.append(UNIONABLE_CHANGES, rows)
        recorded = store.read(UNIONABLE_CHANGES, where={"batch_id": [batch.batch_id]}).select("table_id").distinct()
    recorded = recorded.cache()
    if scope is not None:
        scope = recorded
    n_scope = recorded.count()

    chosen = bounded_candidates(headers, features, joinable, scope, index).cache()
    candidates_out = chosen
    with ExitStack() as held:
        fresh = unionable_rows(features, chosen, joinable, held=held, k=index.unionable_k, index_version=batch.batch_id)
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
