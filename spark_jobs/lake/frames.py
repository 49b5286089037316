"""Small driver-side tables as Spark DataFrames.

A stage often joins the lake with a few rows it holds in Python: the touched table ids, the lists
to compute, a key's column positions. `spark.createDataFrame(list_of_tuples, schema)` makes those
rows an RDD: every plan that scans or broadcasts it launches a job of `default.parallelism` tasks
to read them back (about 0.3 s each on 2 cores, and a small batch builds dozens of such plans).
Handed over as an Arrow table instead, the rows become a local relation that Spark reads in the
driver, with no job.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def local_frame(spark: SparkSession, rows: Iterable[Sequence[Any]], schema: str | StructType) -> DataFrame:
    """`rows` (tuples in the order of `schema`: a DDL string such as "lid int, table_id string", or a
    StructType) as a DataFrame planned as a local relation."""
    from pyspark.sql.pandas.types import to_arrow_schema  # deferred: the lake layer loads Spark only when used
    from pyspark.sql.types import StructType  # deferred: the lake layer loads Spark only when used

    struct = StructType.fromDDL(schema) if isinstance(schema, str) else schema
    if not isinstance(struct, StructType):
        raise ValueError(f"not a table schema: {schema}")
    arrow = to_arrow_schema(struct)
    columns: list[list[Any]] = [[] for _ in arrow]
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"a row of {len(row)} values for a schema of {len(columns)} columns: {schema}")
        for values, value in zip(columns, row, strict=True):
            values.append(value)
    table = pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, arrow, strict=True)], schema=arrow)
    return spark.createDataFrame(table, schema=struct)


def task_frame(spark: SparkSession, rows: Sequence[Sequence[Any]], schema: str | StructType) -> DataFrame:
    """`rows` as `local_frame` does, a partition each: a job mapped over it runs one task per row
    (e.g. a task per bucket, `spark_jobs.lake.partition_tasks`)."""
    return local_frame(spark, rows, schema).repartition(max(len(rows), 1))
