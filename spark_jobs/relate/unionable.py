"""Gold `unionable`: for every table, its top-k unionable tables with the column alignment.

Table union search (Nargesian, Zhu, Pu, Miller, "Table Union Search on Open Data", PVLDB 11(7), 2018): a table
is unionable with mine when its columns can be put under mine one to one. Here:

* **Column-pair score**: a weighted mean of the signals available for the pair (`SIGNALS`): value
  containment (the overlap from gold `joinable` over the smaller set), header similarity, type
  compatibility (silver `column_profiles` when present, else numeric/text from the tokens), and for
  two numeric columns the similarity of their distributions (Bhattacharyya coefficient of normals
  with the columns' means and standard deviations). A signal that says nothing about a pair returns
  None and drops out of the mean; a later signal (embeddings) is one more `ColumnSignal`.
* **Table-pair score**: maximum-weight bipartite matching of the column-pair scores
  (`scipy.optimize.linear_sum_assignment`); pairs under `MIN_PAIR_SCORE` are left unaligned, and the
  sum of the aligned scores is divided by the wider table's column count. The alignment is published.
* **Candidates**: table pairs with a column pair in each other's joinable lists or sharing a
  normalized header (headers carried by more than `joinable_max_list` tables are ignored).

Incremental: the tables whose lists may change are the batch's touched tables, the tables of the
columns whose joinable lists the batch changed (`joinable_changes`), the tables whose current list
names a touched table, and every candidate partner of those; their lists are recomputed completely,
the rest are kept. `unionable_changes` records the recomputed table ids for the publisher.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import Window
from pyspark.sql import functions as F  # noqa: N812
from scipy.optimize import linear_sum_assignment

from catalog.core.settings import Settings
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.bronze import DATASETS
from spark_jobs.lake.store import LakeStore
from spark_jobs.profile.tokens import COLUMN_TOKENS
from spark_jobs.relate.joinable import JOINABLE, JOINABLE_CHANGES

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

UNIONABLE = "unionable"
UNIONABLE_CHANGES = "unionable_changes"
PROFILES = "column_profiles"  # silver (spark_jobs/profile/profiles.py); optional
METHOD = "tus-bipartite"
MIN_PAIR_SCORE = 0.3

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
_PAIR_OUT = "table_id string, candidate_table_id string, score double, n_aligned int, alignment string"


# ---------------------------------------------------------------------- column-pair signals
@dataclass(frozen=True)
class ColumnSignal:
    """One piece of evidence that two columns hold the same kind of values: a score in [0, 1], or
    None when it has nothing to say about the pair."""

    name: str
    weight: float
    score: Callable[[dict[str, Any], dict[str, Any], float], float | None]


_NUMERIC = {"integer", "decimal", "numeric"}
_TEMPORAL = {"date", "datetime"}
_TEXTUAL = {"identifier", "categorical", "text"}


def header_words(header: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", header)
    return [w for w in re.split(r"[^0-9a-z]+", spaced.casefold()) if w]


def header_similarity(a: str, b: str) -> float:
    """The larger of the word Jaccard and the character-trigram Jaccard of the normalized headers."""
    wa, wb = header_words(a), header_words(b)
    if not wa or not wb:
        return 0.0
    words = len(set(wa) & set(wb)) / len(set(wa) | set(wb))
    ja, jb = " ".join(wa), " ".join(wb)
    ga = {ja[i : i + 3] for i in range(max(1, len(ja) - 2))}
    gb = {jb[i : i + 3] for i in range(max(1, len(jb) - 2))}
    return max(words, len(ga & gb) / len(ga | gb))


def type_compatibility(a: str | None, b: str | None) -> float | None:
    if not a or not b or a == "empty" or b == "empty":
        return None
    if a == b:
        return 1.0
    for family in (_NUMERIC, _TEMPORAL, _TEXTUAL):
        if a in family and b in family:
            return 0.8
    if a in _TEXTUAL or b in _TEXTUAL:
        return 0.2  # text can hold anything, but it is weak evidence
    return 0.0


def distribution_similarity(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """Bhattacharyya coefficient of N(mean, std) fitted to two numeric columns (None if not both numeric)."""
    if not (a.get("numeric") and b.get("numeric")):
        return None
    ma, mb, sa, sb = a["mean"], b["mean"], a["std"] or 0.0, b["std"] or 0.0
    if ma is None or mb is None:
        return None
    if sa == 0.0 and sb == 0.0:
        return 1.0 if ma == mb else 0.0
    var = sa * sa + sb * sb
    return math.sqrt(2 * sa * sb / var) * math.exp(-((ma - mb) ** 2) / (4 * var))


def _value_signal(a: dict[str, Any], b: dict[str, Any], overlap: float) -> float | None:
    smaller = min(a["size"], b["size"])
    return overlap / smaller if smaller else None


SIGNALS: list[ColumnSignal] = [
    ColumnSignal("value", 0.5, _value_signal),
    ColumnSignal("header", 0.15, lambda a, b, _o: header_similarity(a["header"], b["header"])),
    ColumnSignal("type", 0.1, lambda a, b, _o: type_compatibility(a["type"], b["type"])),
    ColumnSignal("distribution", 0.25, lambda a, b, _o: distribution_similarity(a, b)),
]


def column_pair_score(
    a: dict[str, Any], b: dict[str, Any], overlap: float, signals: Sequence[ColumnSignal] = SIGNALS
) -> tuple[float, dict[str, float]]:
    """(weighted mean of the signals that apply, {signal: score})."""
    parts: dict[str, float] = {}
    total = weight = 0.0
    for s in signals:
        value = s.score(a, b, overlap)
        if value is None:
            continue
        parts[s.name] = round(float(value), 6)
        total += s.weight * float(value)
        weight += s.weight
    return (total / weight if weight else 0.0), parts


def align_tables(
    cols_a: list[dict[str, Any]], cols_b: list[dict[str, Any]], overlaps: dict[tuple[str, str], float]
) -> tuple[float, list[dict[str, Any]]]:
    """Maximum-weight one-to-one column alignment: (table score, aligned pairs in A's column order)."""

    if not cols_a or not cols_b:
        return 0.0, []
    scores = np.zeros((len(cols_a), len(cols_b)))
    parts: dict[tuple[int, int], dict[str, float]] = {}
    for i, a in enumerate(cols_a):
        for j, b in enumerate(cols_b):
            scores[i, j], parts[i, j] = column_pair_score(a, b, overlaps.get((a["column_id"], b["column_id"]), 0.0))
    rows, cols = linear_sum_assignment(scores, maximize=True)
    aligned = [
        {
            "column_id": cols_a[i]["column_id"],
            "column": cols_a[i]["header"],
            "candidate_column_id": cols_b[j]["column_id"],
            "candidate_column": cols_b[j]["header"],
            "score": round(float(scores[i, j]), 6),
            "signals": parts[i, j],
        }
        for i, j in sorted(zip(rows.tolist(), cols.tolist(), strict=True))
        if scores[i, j] >= MIN_PAIR_SCORE
    ]
    total = sum(p["score"] for p in aligned) / max(len(cols_a), len(cols_b))
    return total, aligned


def _flip(aligned: list[dict[str, Any]], cols_b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    order = {c["column_id"]: i for i, c in enumerate(cols_b)}
    flipped = [
        {
            "column_id": p["candidate_column_id"],
            "column": p["candidate_column"],
            "candidate_column_id": p["column_id"],
            "candidate_column": p["column"],
            "score": p["score"],
            "signals": p["signals"],
        }
        for p in aligned
    ]
    return sorted(flipped, key=lambda p: order[p["column_id"]])


def score_table_pairs(pdf: pd.DataFrame) -> pd.DataFrame:
    """applyInPandas body: one group = every column pair of one table pair (a < b); returns both
    directions (no rows when nothing aligns)."""

    out_cols = ["table_id", "candidate_table_id", "score", "n_aligned", "alignment"]
    if pdf.empty:
        return pd.DataFrame(columns=out_cols)
    ta, tb = pdf["table_a"].iloc[0], pdf["table_b"].iloc[0]
    cols_a, cols_b = _side_columns(pdf, "a"), _side_columns(pdf, "b")
    overlaps = {(r.a_column_id, r.b_column_id): float(r.overlap) for r in pdf.itertuples() if r.overlap}
    score, aligned = align_tables(cols_a, cols_b, overlaps)
    if not aligned:
        return pd.DataFrame(columns=out_cols)
    return pd.DataFrame(
        {
            "table_id": [ta, tb],
            "candidate_table_id": [tb, ta],
            "score": [score, score],
            "n_aligned": [len(aligned)] * 2,
            "alignment": [json.dumps(aligned), json.dumps(_flip(aligned, cols_b))],
        }
    )


def _side_columns(pdf: pd.DataFrame, side: str) -> list[dict[str, Any]]:
    cols = pdf[[c for c in pdf.columns if c.startswith(side + "_")]].drop_duplicates(side + "_column_id")
    out = [{k[len(side) + 1 :]: (None if _isnan(v) else v) for k, v in rec.items()} for rec in cols.to_dict("records")]
    return sorted(out, key=lambda c: c["position"])


def _isnan(v: Any) -> bool:
    return isinstance(v, float) and v != v


# ---------------------------------------------------------------------- Spark plumbing
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
    datasets = store.read(DATASETS, columns=["table_id", "headers"])
    headers = datasets.select("table_id", F.posexplode("headers").alias("pos", "header")).select(
        F.concat_ws("#", "table_id", "header").alias("column_id"),
        "header",
        (F.col("pos") + 1).cast("int").alias("position"),
    )
    feats = stats.join(headers, "column_id")
    derived = F.when(F.col("numeric"), F.lit("numeric")).otherwise(F.lit("text"))
    if store.exists(PROFILES):
        prof = store.read(PROFILES).select("column_id", F.col("inferred_type").alias("ptype"))
        feats = feats.join(prof, "column_id", "left").withColumn("type", F.coalesce("ptype", derived)).drop("ptype")
    else:
        feats = feats.withColumn("type", derived)
    return feats


def candidate_pairs(features: DataFrame, joinable: DataFrame | None, max_list: int) -> DataFrame:
    """Unordered table pairs (table_a < table_b) worth scoring."""

    norm = F.lower(F.regexp_replace("header", "[^0-9A-Za-z]+", ""))
    by_header = (
        features.select("table_id", norm.alias("h"))
        .where(F.col("h") != "")
        .distinct()
        .groupBy("h")
        .agg(F.sort_array(F.collect_set("table_id")).alias("tables"))
        .where((F.size("tables") > 1) & (F.size("tables") <= max_list))
    )
    header_pairs = by_header.select("tables", F.explode("tables").alias("table_a")).select(
        "table_a", F.explode("tables").alias("table_b")
    )
    pairs = header_pairs
    if joinable is not None:
        pairs = pairs.unionByName(
            joinable.select(F.col("table_id").alias("table_a"), F.col("candidate_table_id").alias("table_b"))
        )
    a, b = F.least("table_a", "table_b"), F.greatest("table_a", "table_b")
    return pairs.where(F.col("table_a") != F.col("table_b")).select(a.alias("table_a"), b.alias("table_b")).distinct()


def unionable_rows(
    features: DataFrame,
    pairs: DataFrame,
    joinable: DataFrame | None,
    *,
    k: int,
    index_version: int,
    tables: DataFrame | None = None,
) -> DataFrame:
    """Gold rows (UNIONABLE_SCHEMA) for `tables` (all when None), from the candidate `pairs`."""

    if tables is not None:
        t = tables.select("table_id")
        pairs = (
            pairs.join(F.broadcast(t.withColumnRenamed("table_id", "table_a")), "table_a", "left_semi")
            .unionByName(pairs.join(F.broadcast(t.withColumnRenamed("table_id", "table_b")), "table_b", "left_semi"))
            .distinct()
        )
    side_cols = ["column_id", "header", "position", "size", "numeric", "mean", "std", "type"]
    fa = features.select(F.col("table_id").alias("table_a"), *[F.col(c).alias("a_" + c) for c in side_cols])
    fb = features.select(F.col("table_id").alias("table_b"), *[F.col(c).alias("b_" + c) for c in side_cols])
    cross = pairs.join(fa, "table_a").join(fb, "table_b")
    if joinable is not None:
        forward = joinable.select(
            F.col("column_id").alias("a_column_id"), F.col("candidate_column_id").alias("b_column_id"), "overlap"
        )
        backward = joinable.select(
            F.col("candidate_column_id").alias("a_column_id"), F.col("column_id").alias("b_column_id"), "overlap"
        )
        both = forward.unionByName(backward)
        ov = both.groupBy("a_column_id", "b_column_id").agg(F.max("overlap").cast("double").alias("overlap"))
        cross = cross.join(ov, ["a_column_id", "b_column_id"], "left")
    else:
        cross = cross.withColumn("overlap", F.lit(None).cast("double"))
    cross = cross.withColumn("overlap", F.coalesce("overlap", F.lit(0.0)))
    scored = cross.groupBy("table_a", "table_b").applyInPandas(score_table_pairs, schema=_PAIR_OUT)
    if tables is not None:
        scored = scored.join(F.broadcast(tables.select("table_id")), "table_id", "left_semi")
    ranked = scored.withColumn(
        "rank",
        F.row_number().over(
            Window.partitionBy("table_id").orderBy(F.col("score").desc(), F.col("candidate_table_id").asc())
        ),
    )
    return ranked.where(F.col("rank") <= k).select(
        "table_id",
        F.col("rank").cast("int").alias("rank"),
        "candidate_table_id",
        "score",
        F.col("n_aligned").cast("int").alias("n_aligned"),
        "alignment",
        F.lit(False).alias("exact"),
        F.lit(METHOD).alias("method"),
        F.lit(index_version).cast("long").alias("index_version"),
    )


def update(
    spark: SparkSession, store: LakeStore, settings: Settings, batch: ChangeBatch, *, full: bool = False
) -> dict[str, Any]:
    """Update gold `unionable` for `batch` (after the joinable lists of the same batch). Part of the
    relate unit: `spark_jobs.relate.stage` begins and commits it."""

    if not store.exists(COLUMN_TOKENS) or not store.exists(DATASETS):
        tokens = spark.createDataFrame([], "table_id string, column_id string, token string, n long")
    else:
        tokens = store.read(COLUMN_TOKENS, columns=["table_id", "column_id", "token", "n"])
    joinable = store.read(JOINABLE) if store.exists(JOINABLE) else None
    old = store.read(UNIONABLE) if store.exists(UNIONABLE) and not full else None
    features = (
        column_features(spark, store, tokens)
        if store.exists(DATASETS)
        else spark.createDataFrame(
            [],
            "column_id string, table_id string, header string, position int, "
            "size long, numeric boolean, mean double, std double, type string",
        )
    )
    features = features.cache()
    pairs = candidate_pairs(features, joinable, settings.index.joinable_max_list).cache()

    if old is None:
        scope = features.select("table_id").distinct()
        if full and store.exists(UNIONABLE):
            scope = scope.unionByName(store.read(UNIONABLE).select("table_id")).distinct()
    else:
        touched = list(batch.touched)
        t1 = spark.createDataFrame([(t,) for t in touched], "table_id string")
        if store.exists(JOINABLE_CHANGES):
            t1 = t1.unionByName(store.read(JOINABLE_CHANGES, where={"batch_id": [batch.batch_id]}).select("table_id"))
        t1 = t1.unionByName(old.where(F.col("candidate_table_id").isin(touched)).select("table_id")).distinct()
        partners = (
            pairs.join(t1.withColumnRenamed("table_id", "table_a"), "table_a", "left_semi")
            .select(F.col("table_b").alias("table_id"))
            .unionByName(
                pairs.join(t1.withColumnRenamed("table_id", "table_b"), "table_b", "left_semi").select(
                    F.col("table_a").alias("table_id")
                )
            )
        )
        scope = t1.unionByName(partners).distinct()
    store.append(UNIONABLE_CHANGES, scope.select(F.lit(batch.batch_id).cast("long").alias("batch_id"), "table_id"))
    scope = store.read(UNIONABLE_CHANGES, where={"batch_id": [batch.batch_id]}).select("table_id").distinct().cache()
    n_scope = scope.count()

    fresh = unionable_rows(
        features,
        pairs,
        joinable,
        k=settings.index.unionable_k,
        index_version=batch.batch_id,
        tables=None if old is None else scope,
    )
    if old is not None:
        kept = old.join(F.broadcast(scope), "table_id", "left_anti").where(~F.col("table_id").isin(list(batch.touched)))
        fresh = kept.select(*UNIONABLE_SCHEMA.names).unionByName(fresh)
    result = store.overwrite(UNIONABLE, fresh.select(*UNIONABLE_SCHEMA.names))
    for df in (features, pairs, scope):
        df.unpersist()
    counts = {"n_unionable_affected": n_scope, "n_unionable_rows": result.n_rows_written}
    log.info("unionable lists updated", extra=counts)
    return counts
