"""Silver `column_tokens`: each column's distinct tokens with their multiplicity, per change batch.

Every index (JOSIE, LSH Ensemble, joinability) and the profiles start from this one table, so they
all agree on what a column's set is (docs/contracts.md, "Tokens and sets").

Beside it, in the same unit, silver `column_token_samples`: each column's first `SAMPLE_TOKENS`
tokens in byte order, for the searches that look at every column a little (Auto-Join's candidates:
a lake-wide read of `column_tokens` cost `search transform` gigabytes a query on the portal's seed).

Normalization runs as Spark SQL for pure-ASCII values — for those NFKC is the identity and
`casefold()` is `lower()` — and through a Python UDF (`catalog.core.identity.normalize_token`) for the
rest; a property test checks both paths against the Python function. Python's whitespace for
`str.strip()` and `\\s` includes the ASCII separators 0x1c–0x1f, so the SQL path uses that class
rather than Java's `\\s`. The SQL path removes NUL first, as `storable_text` does (an ASCII value
holds no surrogate).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import Window
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StringType

from catalog.core.identity import NULL_LIKES, SAMPLE_TOKENS, normalize_token, table_bucket
from catalog.core.settings import Settings
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.bronze import CELLS, DATASETS
from spark_jobs.lake.commit_point import UnitSpec, applied_batch, batch_store, begin, commit
from spark_jobs.lake.frames import local_frame
from spark_jobs.lake.job_main import batch_job_main
from spark_jobs.lake.manifest import ABSENT
from spark_jobs.lake.store import CommitResult, LakeStore

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

COLUMN_TOKENS = "column_tokens"
COLUMN_TOKEN_SAMPLES = "column_token_samples"
TOKENS = UnitSpec("tokens", (COLUMN_TOKENS, COLUMN_TOKEN_SAMPLES))
_PY_WHITESPACE = "[\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f ]+"
_SIMPLE = "^[A-Za-z0-9_:/,-]+\\z"  # values whose token is their lower case (Java's $ would allow a final newline)


def _normalize_udf(value: str | None) -> str | None:
    return normalize_token(value)


def normalized_token(value: Column) -> Column:
    """A Spark expression equal to `normalize_token(value)` for an ASCII `value` (None for
    null-likes); `with_tokens` applies it with the Python function for the other values."""

    storable = F.regexp_replace(value, "\\x00", "")  # `storable_text`: NUL removed (ASCII has no surrogates)
    collapsed = F.regexp_replace(storable, _PY_WHITESPACE, " ")
    text = F.lower(F.regexp_replace(collapsed, "^ | $", ""))
    m_sign = F.regexp_extract(text, r"^([+-]?)([0-9]+)\.0+$", 1)
    m_digits = F.regexp_extract(text, r"^([+-]?)([0-9]+)\.0+$", 2)
    digits = F.when(F.regexp_replace(m_digits, "^0+", "") == "", F.lit("0")).otherwise(
        F.regexp_replace(m_digits, "^0+", "")
    )
    integral = F.when((m_sign == "-") & (digits != "0"), F.concat(F.lit("-"), digits)).otherwise(digits)
    general = F.when(text.rlike(r"^[+-]?[0-9]+\.0+$"), integral).otherwise(text)
    # Most values (codes, integers, words) hold no space, dot, plus or control character: for them
    # the whole normalization is lower(), and CASE WHEN evaluates only the branch it takes.
    ascii_token = F.when(value.rlike(_SIMPLE), F.lower(value)).otherwise(general)
    return F.when(ascii_token.isin(*sorted(NULL_LIKES)), F.lit(None)).otherwise(ascii_token)


def is_ascii(value: Column) -> Column:
    return value.rlike("^[\\x00-\\x7f]*$")


def with_tokens(values: DataFrame) -> DataFrame:
    """`values` (with a `value` column) plus `token` = `normalize_token(value)`: Spark SQL for the
    ASCII values, the Python function for the rest. The two kinds are split into two branches of a
    union because Spark evaluates a Python UDF on every row of its input, even inside a CASE WHEN
    whose branch would not choose it."""

    ascii_or_null = F.col("value").isNull() | is_ascii(F.col("value"))
    plain = values.where(ascii_or_null).withColumn("token", normalized_token(F.col("value")))
    # Arrow batches, not pickled rows; saying so also keeps PySpark from guessing a pandas UDF from
    # the type hints (and warning on every run when it cannot).
    slow = F.udf(_normalize_udf, StringType(), useArrow=True)
    other = values.where(~ascii_or_null).withColumn("token", slow(F.col("value")))
    return plain.unionByName(other)


def column_headers_frame(datasets: DataFrame) -> DataFrame:
    """(table_id, col, column_id, header) from bronze `datasets`, `col` 1-based (headers are already
    contract-normalized)."""

    return datasets.select("table_id", F.posexplode("headers").alias("pos", "header")).select(
        "table_id",
        (F.col("pos") + 1).cast("int").alias("col"),
        F.concat_ws("#", "table_id", "header").alias("column_id"),
        "header",
    )


def column_tokens(cells: DataFrame, datasets: DataFrame) -> DataFrame:
    """Cells -> (table_id, bucket, column_id, token, n): distinct tokens and how often each occurs.

    Each column's distinct raw values are counted first and only those are normalized: the regular
    expressions of the normalization then run once per distinct value instead of once per cell
    (a column of a million rows often holds a few thousand values)."""

    raw = cells.groupBy("table_id", "bucket", "col", "value").agg(F.count(F.lit(1)).alias("m"))
    tokens = with_tokens(raw.where(F.col("value").isNotNull()))
    # A null-like counts nothing, and its group is dropped after the last aggregation. A filter on
    # `token` would depend on `value` alone, a grouping key of the first count, so Spark would move
    # it below that aggregation and normalize every cell instead of every distinct value (the
    # demo lake's 7.6 M cells: 40 s that way, 6 s this way).
    counted = F.when(F.col("token").isNotNull(), F.col("m"))
    return (
        tokens.join(column_headers_frame(datasets), ["table_id", "col"])
        .groupBy("table_id", "bucket", "column_id", "token")
        .agg(F.sum(counted).cast("long").alias("n"))
        .where(F.col("n").isNotNull())
    )


def run(spark: SparkSession, settings: Settings, batch: ChangeBatch) -> CommitResult:
    """Replace the tokens of the batch's touched tables by those of its added tables."""

    store = batch_store(settings.lake, spark, batch.batch_id)
    if applied_batch(store, TOKENS) >= batch.batch_id:  # an idempotent rerun
        return CommitResult(COLUMN_TOKENS, store.version(COLUMN_TOKENS), skipped=True)
    base = begin(store, TOKENS)
    buckets = sorted({table_bucket(t, settings.index.cells_buckets) for t in batch.touched})
    cells = store.read(CELLS, where={"bucket": buckets, "table_id": list(batch.added)}) if batch.added else None
    datasets = store.read(DATASETS, where={"table_id": list(batch.added)}) if batch.added else None
    if cells is None or datasets is None:
        result = local_frame(spark, [], from_arrow_schema(TOKENS_SCHEMA))
    else:
        result = column_tokens(cells, datasets)
    out = store.overwrite_where(
        COLUMN_TOKENS,
        result,
        column="table_id",
        values=list(batch.touched),
        partitions={"bucket": buckets},
        partition_by=["bucket"],
    )
    write_samples(store, batch, buckets, whole=base.tables.get(COLUMN_TOKEN_SAMPLES, ABSENT) == ABSENT)
    commit(store, TOKENS, base, batch_id=batch.batch_id, kind="update")
    return out


def token_samples(tokens: DataFrame) -> DataFrame:
    """(table_id, bucket, column_id, token) of each column's first `SAMPLE_TOKENS` tokens in byte
    order (Spark's binary string order, Arrow's too). A filter on a row number lets Spark keep the
    first rows of each column before it shuffles (its window group limit)."""
    first = Window.partitionBy("column_id").orderBy("token")
    return (
        tokens.select("table_id", "bucket", "column_id", "token")
        .withColumn("rank", F.row_number().over(first))
        .where(F.col("rank") <= SAMPLE_TOKENS)
        .drop("rank")
    )


def write_samples(store: LakeStore, batch: ChangeBatch, buckets: list[int], *, whole: bool) -> None:
    """Bring `column_token_samples` to the tokens just written: the batch's touched tables, or every
    table when the samples were never committed (a lake older than them gets them with its next
    batch; readers fall back to `column_tokens` meanwhile)."""
    columns = ["table_id", "bucket", "column_id", "token"]
    if whole:
        every = store.read(COLUMN_TOKENS, columns=columns)
        store.overwrite(COLUMN_TOKEN_SAMPLES, token_samples(every), partition_by=["bucket"])
        return
    where: dict[str, list[Any]] = {"bucket": buckets, "table_id": list(batch.added)}
    added = token_samples(store.read(COLUMN_TOKENS, columns=columns, where=where)) if batch.added else None
    store.overwrite_where(
        COLUMN_TOKEN_SAMPLES,
        SAMPLES_SCHEMA.empty_table() if added is None else added,
        column="table_id",
        values=list(batch.touched),
        partitions={"bucket": buckets},
        partition_by=["bucket"],
    )


def main(argv: Sequence[str] | None = None) -> int:
    return batch_job_main("column_tokens", run, argv)


def _tokens_schema():

    return pa.schema(
        [
            ("table_id", pa.string()),
            ("bucket", pa.int32()),
            ("column_id", pa.string()),
            ("token", pa.string()),
            ("n", pa.int64()),
        ]
    )


TOKENS_SCHEMA = _tokens_schema()
SAMPLES_SCHEMA = pa.schema([f for f in TOKENS_SCHEMA if f.name != "n"])

if __name__ == "__main__":
    raise SystemExit(main())
