"""Silver `column_profiles`: what every column of a change batch's tables holds, inferred from its values.

The job groups the batch's bronze cells by (table, column, value) once — a column's distinct values
with their multiplicity — and classifies each *distinct* value (`value_facts`, in `mapInArrow` on
the executors), so the Python work is proportional to distinct values, not cells. Per-column measures
are weighted sums over those rows; the driver then decides the inferred type (a few hundred rows
per batch) and commits one Arrow table.

Definitions (the tests re-derive each of them in plain Python):

* `null_count`: missing cells (None). `empty_count`: present but blank or null-like text (the
  null-likes of the identity contract in docs/contracts.md, i.e. `normalize_token(value) is None`).
  The other values are *present*.
* `distinct_count`: distinct present raw values — exact (`distinct_exact`) for tables of at most
  `EXACT_DISTINCT_MAX_ROWS` rows; above that HyperLogLog++ (`approx_count_distinct`) with relative
  standard deviation `HLL_RSD`, recorded in `distinct_error`, and top values from a 1 % row sample.
* Value kinds, on the trimmed text: boolean (true/false/yes/no/t/f/y/n), integer (`[+-]digits`
  fitting a long), decimal (other plain or scientific numbers), date (`yyyy-m-d`, `yyyy/m/d`,
  `m/d/yyyy` (else `d/m/yyyy`), `d.m.yyyy`, `d-m-yyyy`, `d Mon yyyy`, `Mon d, yyyy`; calendar-checked),
  datetime (an ISO or US date with `H:MM[:SS[.f]]`, optional AM/PM and zone), else text. A value
  is *code-shaped* when it has no whitespace, at most 32 characters of `[A-Za-z0-9_.:/#-]`, and a
  digit or no lowercase letter.
* `inferred_type`: the first of boolean, numeric, date, datetime (dates fit it too) that at least
  `TYPE_SHARE_MIN` of the present values fit — numeric is integer when no present value is a
  non-integer number, else decimal (integers fit decimal too); otherwise
  `identifier` when that share of values is code-shaped and the column is unique enough
  (distinct / present values >= `IDENTIFIER_MIN_UNIQUENESS` or more than `CATEGORICAL_MAX_DISTINCT` distinct
  values), `categorical` when it has at most `CATEGORICAL_MAX_DISTINCT` distinct values that
  repeat (distinct / present values below `IDENTIFIER_MIN_UNIQUENESS`), else
  `text`; `empty` with no present value. `type_share` is the share of present values fitting the
  inferred type (1.0 for categorical and text, 0.0 for empty).
* min/max: for integer, decimal (as numbers), date (ISO `yyyy-mm-dd`) and datetime (`yyyy-mm-dd
  HH:MM:SS`, zone ignored) over the values fitting the type; lengths are of the trimmed present
  values; top values are the `TOP_K` most frequent present raw values (ties by value); the
  histogram has `HISTOGRAM_BINS` equal-width bins over [min, max] of numeric columns.
* `uniqueness` = distinct_count / row_count; `token_count` = distinct tokens in silver
  `column_tokens` (the column's set), `n_tokens` = their total multiplicity.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import Window
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from catalog.core.identity import normalize_token, table_bucket
from catalog.core.settings import Settings
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.bronze import CELLS, DATASETS
from spark_jobs.lake.commit_point import UnitSpec, applied_batch, batch_store, begin, commit
from spark_jobs.lake.job_main import batch_job_main
from spark_jobs.lake.store import CommitResult, LakeStore
from spark_jobs.profile.tokens import COLUMN_TOKENS, with_tokens

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

COLUMN_PROFILES = "column_profiles"
PROFILES = UnitSpec("profiles", (COLUMN_PROFILES,))

TYPE_SHARE_MIN = 0.9
CATEGORICAL_MAX_DISTINCT = 50
IDENTIFIER_MIN_UNIQUENESS = 0.5
TOP_K = 10
HISTOGRAM_BINS = 10
EXACT_DISTINCT_MAX_ROWS = 2_000_000
HLL_RSD = 0.02
SAMPLE_PERCENT = 1  # row sample for the top values of large tables
DRIVER_MAX_CELLS = 1_000_000  # cells of a batch measured without a Spark job (also the key search's bound)

BOOLEAN_WORDS = frozenset({"true", "false", "yes", "no", "t", "f", "y", "n"})
INTEGER_RE = re.compile(r"[+-]?[0-9]+")
DECIMAL_RE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
CODE_RE = re.compile(r"[A-Za-z0-9_.:/#-]{1,32}")
MONTHS = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "may": 5,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
    "january": 1,
    "february": 2,
    "march": 3,
    "april": 4,
    "june": 6,
    "july": 7,
    "august": 8,
    "september": 9,
    "sept": 9,
    "october": 10,
    "november": 11,
    "december": 12,
}
Y_FIRST = re.compile(r"([0-9]{4})([-/.])([0-9]{1,2})\2([0-9]{1,2})")
Y_LAST = re.compile(r"([0-9]{1,2})([-/.])([0-9]{1,2})\2([0-9]{4})")
DAY_MONTH_NAME = re.compile(r"([0-9]{1,2}) +([A-Za-z]{3,9})\.?,? +([0-9]{4})")
MONTH_NAME_DAY = re.compile(r"([A-Za-z]{3,9})\.? +([0-9]{1,2}),? +([0-9]{4})")
_TIME = r"([0-9]{1,2}):([0-9]{2})(?::([0-9]{2})(?:\.[0-9]+)?)?"
ISO_DATETIME = re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})[T ]" + _TIME + r" *(?:Z|UTC|[+-][0-9]{2}:?[0-9]{2})?")
US_DATETIME = re.compile(r"([0-9]{1,2})/([0-9]{1,2})/([0-9]{4}) +" + _TIME + r" *([AaPp][Mm])?")
_PY_STRIP = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f "

ColumnKey = tuple[str, int]  # (table_id, col)
Measures = dict[ColumnKey, dict[str, Any]]  # `column_stats` rows by column
TopValues = dict[ColumnKey, list[tuple[str, int]]]

PROFILE_SCHEMA = pa.schema(
    [
        ("table_id", pa.string()),
        ("bucket", pa.int32()),
        ("column_id", pa.string()),
        ("header", pa.string()),
        ("position", pa.int32()),
        ("row_count", pa.int64()),
        ("null_count", pa.int64()),
        ("empty_count", pa.int64()),
        ("distinct_count", pa.int64()),
        ("distinct_exact", pa.bool_()),
        ("distinct_error", pa.float64()),
        ("inferred_type", pa.string()),
        ("type_share", pa.float64()),
        ("portal_type", pa.string()),
        ("min_value", pa.string()),
        ("max_value", pa.string()),
        ("length_min", pa.int64()),
        ("length_mean", pa.float64()),
        ("length_max", pa.int64()),
        ("top_values", pa.list_(pa.struct([("value", pa.string()), ("count", pa.int64())]))),
        ("top_values_exact", pa.bool_()),
        ("histogram_edges", pa.list_(pa.float64())),
        ("histogram_counts", pa.list_(pa.int64())),
        ("numeric_mean", pa.float64()),
        ("numeric_std", pa.float64()),
        ("uniqueness", pa.float64()),
        ("token_count", pa.int64()),
        ("n_tokens", pa.int64()),
        ("batch_id", pa.int64()),
    ]
)


# ---------------------------------------------------------------------------------------------- values
def _days_in_month(y: int, m: int) -> int:
    if m == 2:
        return 29 if (y % 4 == 0 and y % 100 != 0) or y % 400 == 0 else 28
    return 30 if m in (4, 6, 9, 11) else 31


def _ymd(y: int, m: int | None, d: int) -> str | None:
    if m is None or y < 1 or not 1 <= m <= 12 or not 1 <= d <= _days_in_month(y, m):
        return None
    return f"{y:04d}-{m:02d}-{d:02d}"


def date_key(s: str) -> str | None:
    """The ISO date of a date-shaped text (see the module docstring), or None."""
    if m := Y_FIRST.fullmatch(s):
        return _ymd(int(m[1]), int(m[3]), int(m[4]))
    if m := Y_LAST.fullmatch(s):
        a, b, y = int(m[1]), int(m[3]), int(m[4])
        if m[2] == "/":  # month/day/year, else day/month/year
            return _ymd(y, a, b) or _ymd(y, b, a)
        return _ymd(y, b, a)
    if m := DAY_MONTH_NAME.fullmatch(s):
        return _ymd(int(m[3]), MONTHS.get(m[2].lower()), int(m[1]))
    if m := MONTH_NAME_DAY.fullmatch(s):
        return _ymd(int(m[3]), MONTHS.get(m[1].lower()), int(m[2]))
    return None


def datetime_key(s: str) -> str | None:
    """`yyyy-mm-dd HH:MM:SS` of a datetime-shaped text (zone ignored), or None."""
    ampm = ""
    if m := ISO_DATETIME.fullmatch(s):
        day = _ymd(int(m[1]), int(m[2]), int(m[3]))
    elif m := US_DATETIME.fullmatch(s):
        day = _ymd(int(m[3]), int(m[1]), int(m[2]))
        ampm = (m[7] or "").lower()
    else:
        return None
    h, mi, sec = int(m[4]), int(m[5]), int(m[6] or 0)
    if ampm:
        if not 1 <= h <= 12:
            return None
        h = h % 12 + (12 if ampm == "pm" else 0)
    if day is None or h > 23 or mi > 59 or sec > 59:
        return None
    return f"{day} {h:02d}:{mi:02d}:{sec:02d}"


@functools.lru_cache(maxsize=1 << 16)
def value_facts(value: str | None) -> tuple[Any, ...]:
    """(state, kind, length, int_value, num_value, date_key, datetime_key, is_code) of one raw value."""
    if value is None:
        return ("null", None, None, None, None, None, None, False)
    if normalize_token(value) is None:
        return ("empty", None, None, None, None, None, None, False)
    s = value.strip()
    int_value = num_value = day = moment = None
    if s.lower() in BOOLEAN_WORDS:
        kind = "boolean"
    elif INTEGER_RE.fullmatch(s) and -(1 << 63) <= int(s) < (1 << 63):
        kind, int_value, num_value = "integer", int(s), float(int(s))
    elif DECIMAL_RE.fullmatch(s) and math.isfinite(float(s)):
        kind, num_value = "decimal", float(s)
    elif day := date_key(s):
        kind = "date"
        moment = day + " 00:00:00"
    elif moment := datetime_key(s):
        kind = "datetime"
    else:
        kind = "text"
    is_code = bool(CODE_RE.fullmatch(s)) and (any(c.isdigit() for c in s) or not any(c.islower() for c in s))
    return ("present", kind, len(s), int_value, num_value, day, moment, is_code)


FACT_FIELDS = (
    ("state", pa.string()),
    ("kind", pa.string()),
    ("length", pa.int64()),
    ("int_value", pa.int64()),
    ("num_value", pa.float64()),
    ("date_key", pa.string()),
    ("dt_key", pa.string()),
    ("is_code", pa.bool_()),
)


def _facts_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: append the value facts to each batch (runs on the executors)."""
    for batch in batches:
        facts = [value_facts(v) for v in batch.column("value").to_pylist()]
        arrays = list(batch.columns)
        names = list(batch.schema.names)
        for i, (name, typ) in enumerate(FACT_FIELDS):
            arrays.append(pa.array([f[i] for f in facts], typ))
            names.append(name)
        yield pa.RecordBatch.from_arrays(arrays, names=names)


def classified(values: DataFrame) -> DataFrame:
    """Rows with a `value` column -> the same rows plus the value facts (`value_facts`)."""

    out_fields = from_arrow_schema(pa.schema(list(FACT_FIELDS)))

    schema = StructType(values.schema.fields + out_fields.fields)
    return values.mapInArrow(_facts_batches, schema)


def column_stats(values: DataFrame, *, k: int = TOP_K, bins: int = HISTOGRAM_BINS) -> DataFrame:
    """Classified (table_id, col, value, n, large) rows -> one row of weighted measures per column,
    with its top k values (`top`: rank, value, n) and numeric bin counts (`bin_0`…). `n` is the
    multiplicity of the row's value; `large` marks tables whose distinct count is estimated (there
    each row is one cell, n = 1).

    Three aggregations over the (table_id, col) partitioning, joined: the numeric range, the top
    values of the exactly counted columns (a window limited to k rows per column, which Spark
    applies before the shuffle), and the measures with the bins. No window spans a whole column: a
    large table's column is millions of rows, and buffering one for a window ran a 4 GB driver out
    of memory on a real 2,000-table lake. The caller caches `values`, which all three read."""

    n, kind, state = F.col("n"), F.col("kind"), F.col("state")
    present = state == "present"

    def wsum(cond: Column, value: Column | None = None) -> Column:
        return F.coalesce(F.sum(F.when(cond, n if value is None else n * value)), F.lit(0))

    numeric = kind.isin("integer", "decimal")
    dated = kind.isin("date", "datetime")
    ts_key = F.when(kind == "date", F.concat(F.col("date_key"), F.lit(" 00:00:00"))).otherwise(F.col("dt_key"))
    x, lo, hi = F.col("x"), F.col("lo"), F.col("hi")
    column = ["table_id", "col"]
    with_x = values.withColumn("x", F.when(numeric, F.coalesce(F.col("int_value").cast("double"), F.col("num_value"))))
    bounds = with_x.where(x.isNotNull()).groupBy(*column).agg(F.min(x).alias("lo"), F.max(x).alias("hi"))
    by_count = Window.partitionBy(*column).orderBy(n.desc(), F.col("value").asc())
    top = (
        values.where(present & ~F.col("large"))
        .withColumn("rank", F.row_number().over(by_count))
        .where(F.col("rank") <= k)
        .groupBy(*column)
        .agg(F.collect_list(F.struct("rank", "value", "n")).alias("top"))
    )
    ranked = with_x.join(bounds, column, "left").withColumn(
        "bin", F.when(hi == lo, 0).otherwise(F.least(F.floor((x - lo) / (hi - lo) * bins), F.lit(bins - 1))).cast("int")
    )
    no_top = F.array().cast("array<struct<rank:int,value:string,n:bigint>>")
    measures = ranked.groupBy(*column).agg(
        F.sum(n).alias("row_count"),
        wsum(state == "null").alias("null_count"),
        wsum(state == "empty").alias("empty_count"),
        wsum(present).alias("present_count"),
        F.count(F.when(present, 1)).alias("distinct_rows"),
        F.approx_count_distinct(F.when(present & F.col("large"), F.col("value")), HLL_RSD).alias("distinct_hll"),
        F.max(F.col("large")).alias("large"),
        *[wsum(kind == k).alias(f"n_{k}") for k in ("boolean", "integer", "decimal", "date", "datetime")],
        wsum(present & F.col("is_code")).alias("n_code"),
        F.min(F.when(present, F.col("length"))).alias("length_min"),
        F.max(F.when(present, F.col("length"))).alias("length_max"),
        wsum(present, F.col("length").cast("double")).alias("length_sum"),
        F.min(F.when(kind == "integer", F.col("int_value"))).alias("int_min"),
        F.max(F.when(kind == "integer", F.col("int_value"))).alias("int_max"),
        F.min(x).alias("num_min"),
        F.max(x).alias("num_max"),
        wsum(numeric, x).alias("num_sum"),
        wsum(numeric, x * x).alias("num_sumsq"),
        F.min(F.when(kind == "date", F.col("date_key"))).alias("date_min"),
        F.max(F.when(kind == "date", F.col("date_key"))).alias("date_max"),
        F.min(F.when(dated, ts_key)).alias("ts_min"),
        F.max(F.when(dated, ts_key)).alias("ts_max"),
        *[wsum(numeric & (F.col("bin") == b)).alias(f"bin_{b}") for b in range(bins)],
    )
    return measures.join(top, column, "left").withColumn("top", F.coalesce(F.col("top"), no_top))


def sampled_top_values(cells: DataFrame, k: int = TOP_K) -> DataFrame:
    """(table_id, col, rank, value, n): top values of a 1 % row sample, counts scaled up (large tables)."""

    sampled = cells.where((F.abs(F.xxhash64("table_id", "row")) % 100 < SAMPLE_PERCENT) & F.col("value").isNotNull())
    counted = sampled.groupBy("table_id", "col", "value").agg((F.count(F.lit(1)) * (100 // SAMPLE_PERCENT)).alias("n"))
    # Null-likes rank after every other value and are dropped after the ranking: a filter on
    # `token` before it would be moved below the count (it depends on `value` alone) and normalize
    # every sampled cell instead of every distinct value.
    sample = with_tokens(counted)
    order = (F.col("token").isNull(), F.col("n").desc(), F.col("value").asc())
    w = Window.partitionBy("table_id", "col").orderBy(*order)
    ranked = sample.withColumn("rank", F.row_number().over(w))
    return ranked.where((F.col("rank") <= k) & F.col("token").isNotNull()).drop("token")


# ---------------------------------------------------------------------------------------------- small batches
def measured_locally(cells: pa.Table, *, k: int = TOP_K, bins: int = HISTOGRAM_BINS) -> Measures:
    """`column_stats` computed in this process from the cells of tables with exact counts: the same
    measures under the same names, for batches too small to be worth a Spark job."""
    counted = cells.group_by(["table_id", "col", "value"], use_threads=False).aggregate([([], "count_all")])
    by_column: dict[ColumnKey, list[tuple[str | None, int]]] = {}
    for t, c, v, n in zip(
        *(counted[name].to_pylist() for name in ("table_id", "col", "value", "count_all")), strict=True
    ):
        by_column.setdefault((t, c), []).append((v, n))
    return {key: _column_measures(values, k=k, bins=bins) for key, values in by_column.items()}


def _column_measures(values: list[tuple[str | None, int]], *, k: int, bins: int) -> dict[str, Any]:
    """One column's measures from its (distinct raw value, multiplicity) pairs (see `column_stats`)."""
    out = _no_cells(0)
    counts = dict.fromkeys(("boolean", "integer", "decimal", "date", "datetime"), 0)
    numbers: list[tuple[float, int]] = []
    present: list[tuple[int, str]] = []
    for value, n in values:
        state, kind, length, int_value, num_value, day, moment, is_code = value_facts(value)
        out["row_count"] += n
        if state != "present":
            out[f"{state}_count"] += n
            continue
        assert value is not None and length is not None
        present.append((-n, value))
        out["present_count"] += n
        if kind in counts:
            counts[kind] += n
        out["n_code"] += n if is_code else 0
        out["length_min"] = _least(out["length_min"], length)
        out["length_max"] = _most(out["length_max"], length)
        out["length_sum"] += n * float(length)
        if kind == "integer":
            out["int_min"], out["int_max"] = _least(out["int_min"], int_value), _most(out["int_max"], int_value)
        if kind in ("integer", "decimal"):
            x = float(int_value) if int_value is not None else num_value
            numbers.append((x, n))
            out["num_min"], out["num_max"] = _least(out["num_min"], x), _most(out["num_max"], x)
            out["num_sum"] += n * x
            out["num_sumsq"] += n * (x * x)
        if kind == "date":
            out["date_min"], out["date_max"] = _least(out["date_min"], day), _most(out["date_max"], day)
        if kind in ("date", "datetime"):
            out["ts_min"], out["ts_max"] = _least(out["ts_min"], moment), _most(out["ts_max"], moment)
    out.update({f"n_{kind}": n for kind, n in counts.items()})
    out["distinct_rows"] = len(present)
    present.sort()
    out["top"] = [{"rank": r, "value": v, "n": -n} for r, (n, v) in enumerate(present[:k], start=1)]
    hist = [0] * bins
    lo, hi = out["num_min"], out["num_max"]
    for x, n in numbers:
        hist[0 if hi == lo else min(math.floor((x - lo) / (hi - lo) * bins), bins - 1)] += n
    out.update({f"bin_{b}": hist[b] for b in range(bins)})
    return out


def _least(a: Any, b: Any) -> Any:
    return b if a is None or b < a else a


def _most(a: Any, b: Any) -> Any:
    return b if a is None or b > a else a


# ---------------------------------------------------------------------------------------------- decisions
@dataclass(frozen=True)
class TypeDecision:
    inferred_type: str
    type_share: float


def infer_type(stats: dict[str, Any], distinct_count: int) -> TypeDecision:
    """The inferred type of a column from its kind counts (see the module docstring)."""
    present = stats["present_count"]
    if present == 0:
        return TypeDecision("empty", 0.0)
    if stats["n_boolean"] / present >= TYPE_SHARE_MIN:
        return TypeDecision("boolean", stats["n_boolean"] / present)
    n_numeric = stats["n_integer"] + stats["n_decimal"]
    if n_numeric / present >= TYPE_SHARE_MIN:
        if stats["n_decimal"] == 0:
            return TypeDecision("integer", stats["n_integer"] / present)
        return TypeDecision("decimal", n_numeric / present)
    if stats["n_date"] / present >= TYPE_SHARE_MIN:
        return TypeDecision("date", stats["n_date"] / present)
    if (stats["n_date"] + stats["n_datetime"]) / present >= TYPE_SHARE_MIN:
        return TypeDecision("datetime", (stats["n_date"] + stats["n_datetime"]) / present)
    code_share = stats["n_code"] / present
    uniqueness = distinct_count / present
    if code_share >= TYPE_SHARE_MIN and (
        uniqueness >= IDENTIFIER_MIN_UNIQUENESS or distinct_count > CATEGORICAL_MAX_DISTINCT
    ):
        return TypeDecision("identifier", code_share)
    if distinct_count <= CATEGORICAL_MAX_DISTINCT and uniqueness < IDENTIFIER_MIN_UNIQUENESS:
        return TypeDecision("categorical", 1.0)
    return TypeDecision("text", 1.0)


def _number_text(x: float, integral: bool) -> str:
    return str(int(x)) if integral else repr(float(x))


def min_max(stats: dict[str, Any], inferred_type: str) -> tuple[str | None, str | None]:
    if inferred_type == "integer" and stats["int_min"] is not None:
        return str(stats["int_min"]), str(stats["int_max"])
    if inferred_type == "decimal" and stats["num_min"] is not None:
        return repr(float(stats["num_min"])), repr(float(stats["num_max"]))
    if inferred_type == "date":
        return stats["date_min"], stats["date_max"]
    if inferred_type == "datetime":
        return stats["ts_min"], stats["ts_max"]
    return None, None


def histogram(
    stats: dict[str, Any], counts: dict[int, int], bins: int = HISTOGRAM_BINS
) -> tuple[list[float] | None, list[int] | None]:
    lo, hi = stats["num_min"], stats["num_max"]
    if lo is None:
        return None, None
    if hi == lo:
        return [float(lo), float(hi)], [int(counts.get(0, 0))]
    step = (hi - lo) / bins
    return [lo + i * step for i in range(bins)] + [float(hi)], [int(counts.get(i, 0)) for i in range(bins)]


def profile_row(
    meta: dict[str, Any],
    stats: dict[str, Any],
    top: list[tuple[str, int]],
    hist: dict[int, int],
    tokens: tuple[int, int],
    batch_id: int,
) -> dict[str, Any]:
    """One silver row from the collected measures of a column."""
    large = bool(stats["large"])
    distinct = int(stats["distinct_hll"] if large else stats["distinct_rows"])
    decision = infer_type(stats, distinct)
    lo, hi = min_max(stats, decision.inferred_type)
    numeric = decision.inferred_type in ("integer", "decimal")
    edges, hcounts = histogram(stats, hist) if numeric else (None, None)
    n_num = stats["n_integer"] + stats["n_decimal"]
    mean = std = None
    if numeric and n_num:
        mean = stats["num_sum"] / n_num
        std = math.sqrt(max(stats["num_sumsq"] / n_num - mean * mean, 0.0))
    present, rows = stats["present_count"], stats["row_count"]
    return {
        **meta,
        "row_count": rows,
        "null_count": stats["null_count"],
        "empty_count": stats["empty_count"],
        "distinct_count": distinct,
        "distinct_exact": not large,
        "distinct_error": HLL_RSD if large else None,
        "inferred_type": decision.inferred_type,
        "type_share": decision.type_share,
        "min_value": lo,
        "max_value": hi,
        "length_min": stats["length_min"],
        "length_mean": stats["length_sum"] / present if present else None,
        "length_max": stats["length_max"],
        "top_values": [{"value": v, "count": c} for v, c in top],
        "top_values_exact": not large,
        "histogram_edges": edges,
        "histogram_counts": hcounts,
        "numeric_mean": mean,
        "numeric_std": std,
        "uniqueness": distinct / rows if rows else 0.0,
        "token_count": tokens[0],
        "n_tokens": tokens[1],
        "batch_id": batch_id,
    }


# ---------------------------------------------------------------------------------------------- the job
def profiles(
    spark: SparkSession,
    store: LakeStore,
    settings: Settings,
    batch: ChangeBatch,
    *,
    exact_max_rows: int = EXACT_DISTINCT_MAX_ROWS,
    driver_max_cells: int = DRIVER_MAX_CELLS,
) -> pa.Table:
    """The profiles of the batch's added tables, as an Arrow table in PROFILE_SCHEMA. A batch of at
    most `driver_max_cells` cells, none in a large table, is measured in this process from an Arrow
    read (`measured_locally`: small incremental batches skip a Spark job's fixed cost); larger ones
    on the executors."""
    if not batch.added:
        return PROFILE_SCHEMA.empty_table()
    n_buckets = settings.index.cells_buckets
    datasets = store.read_arrow(DATASETS, where={"table_id": list(batch.added)}).to_pylist()
    large_ids = sorted(d["table_id"] for d in datasets if (d["n_rows"] or 0) > exact_max_rows)
    buckets = sorted({table_bucket(t, n_buckets) for t in batch.added})
    where: dict[str, list[Any]] = {"bucket": buckets, "table_id": list(batch.added)}
    n_cells = sum((d["n_rows"] or 0) * len(d["headers"]) for d in datasets)
    if not large_ids and n_cells <= driver_max_cells:
        stat_rows = measured_locally(store.read_arrow(CELLS, columns=["table_id", "col", "value"], where=where))
        sampled: TopValues = {}
    else:
        stat_rows, sampled = _measured_on_executors(store.read(CELLS, where=where), large_ids)
    tops = {
        key: [(t["value"], int(t["n"])) for t in sorted(r["top"], key=lambda t: t["rank"])]
        for key, r in stat_rows.items()
    }
    for key, top in sampled.items():
        tops.setdefault(key, []).extend(top)
    hists = {key: {b: int(r[f"bin_{b}"]) for b in range(HISTOGRAM_BINS)} for key, r in stat_rows.items()}
    token_counts = _token_counts(store, batch, buckets)
    rows = []
    for d in datasets:
        bucket = table_bucket(d["table_id"], n_buckets)
        portal_types = d["portal_types"] or [None] * len(d["headers"])
        for pos, (header, ptype) in enumerate(zip(d["headers"], portal_types, strict=False), start=1):
            key = (d["table_id"], pos)
            stat = stat_rows.get(key) or _no_cells(d["n_rows"] or 0)
            column_id = f"{d['table_id']}#{header}"
            meta = {
                "table_id": d["table_id"],
                "bucket": bucket,
                "column_id": column_id,
                "header": header,
                "position": pos,
                "portal_type": ptype,
            }
            rows.append(
                profile_row(
                    meta,
                    stat,
                    tops.get(key, []),
                    hists.get(key, {}),
                    token_counts.get(column_id, (0, 0)),
                    batch.batch_id,
                )
            )
    return pa.Table.from_pylist(rows, schema=PROFILE_SCHEMA)


def _measured_on_executors(cells: DataFrame, large_ids: list[str]) -> tuple[Measures, TopValues]:
    """(`column_stats` rows by (table_id, col), sampled top values of the large tables) by Spark."""

    cells = cells.select("table_id", "row", "col", "value")
    is_large = F.col("table_id").isin(*large_ids) if large_ids else F.lit(False)
    exact_counts = (
        cells.where(~is_large)
        .groupBy("table_id", "col", "value")
        .agg(F.count(F.lit(1)).alias("n"))
        .withColumn("large", F.lit(False))
    )
    values = exact_counts
    if large_ids:
        large_cells = cells.where(is_large).select(
            "table_id", "col", "value", F.lit(1).cast("long").alias("n"), F.lit(True).alias("large")
        )
        values = exact_counts.unionByName(large_cells)
    facts = classified(values).persist(StorageLevel.MEMORY_AND_DISK)  # column_stats reads it three times
    try:
        measured = column_stats(facts).collect()
    finally:
        facts.unpersist()
    stat_rows = {(r["table_id"], r["col"]): r.asDict(recursive=True) for r in measured}
    sampled: TopValues = {}
    if large_ids:
        for r in sampled_top_values(cells.where(is_large)).orderBy("table_id", "col", "rank").collect():
            sampled.setdefault((r["table_id"], r["col"]), []).append((r["value"], int(r["n"])))
    return stat_rows, sampled


def _no_cells(n_rows: int) -> dict[str, Any]:
    """Measures of a column without any cell (a table with no rows)."""
    zero = (
        "row_count",
        "null_count",
        "empty_count",
        "present_count",
        "distinct_rows",
        "distinct_hll",
        "n_boolean",
        "n_integer",
        "n_decimal",
        "n_date",
        "n_datetime",
        "n_code",
        "length_sum",
        "num_sum",
        "num_sumsq",
    )
    out: dict[str, Any] = dict.fromkeys(zero, 0)
    out.update(
        dict.fromkeys(
            (
                "length_min",
                "length_max",
                "int_min",
                "int_max",
                "num_min",
                "num_max",
                "date_min",
                "date_max",
                "ts_min",
                "ts_max",
            )
        )
    )
    out["large"] = False
    out["row_count"] = out["null_count"] = n_rows
    return out


def _token_counts(store: LakeStore, batch: ChangeBatch, buckets: list[int]) -> dict[str, tuple[int, int]]:
    """column_id -> (distinct tokens, total tokens) from silver column_tokens."""

    if not store.exists(COLUMN_TOKENS):
        return {}
    t = store.read_arrow(
        COLUMN_TOKENS, columns=["column_id", "n"], where={"bucket": buckets, "table_id": list(batch.added)}
    )
    if t.num_rows == 0:
        return {}
    g = t.group_by("column_id").aggregate([("n", "count"), ("n", "sum")])
    return {
        c: (int(k), int(s))
        for c, k, s in zip(
            g["column_id"].to_pylist(),
            g["n_count"].to_pylist(),
            pc.cast(g["n_sum"], pa.int64()).to_pylist(),
            strict=True,
        )
    }


def run(spark: SparkSession, settings: Settings, batch: ChangeBatch) -> CommitResult:
    """Replace the profiles of the batch's touched tables by those of its added tables."""
    store = batch_store(settings.lake, spark, batch.batch_id)
    if applied_batch(store, PROFILES) >= batch.batch_id:  # an idempotent rerun: skip the Spark work too
        return CommitResult(COLUMN_PROFILES, store.version(COLUMN_PROFILES), skipped=True)
    base = begin(store, PROFILES)
    buckets = sorted({table_bucket(t, settings.index.cells_buckets) for t in batch.touched})
    result = profiles(spark, store, settings, batch)
    log.info("columns profiled", extra={"n_tables": len(batch.added), "n_columns": result.num_rows})
    out = store.overwrite_where(
        COLUMN_PROFILES,
        result,
        column="table_id",
        values=list(batch.touched),
        partitions={"bucket": buckets},
        partition_by=["bucket"],
    )
    commit(store, PROFILES, base, batch_id=batch.batch_id, kind="update")
    return out


def top_values_json(row: dict[str, Any]) -> list[list[Any]]:
    return [[t["value"], t["count"]] for t in row["top_values"] or []]


def histogram_json(row: dict[str, Any]) -> dict[str, Any] | None:
    if row["histogram_edges"] is None:
        return None
    return {"edges": row["histogram_edges"], "counts": row["histogram_counts"]}


def main(argv: Sequence[str] | None = None) -> int:
    return batch_job_main("profile_columns", run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
