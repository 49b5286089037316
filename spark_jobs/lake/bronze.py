"""Names and schemas of the lake's bronze tables — the contract between the crawl and every job.

* `datasets`: one row per table currently in the lake (its identity, headers and provenance).
* `cells`: the hub, `(table_id, bucket, row, col, value)` in long form, partitioned by `bucket`
  (`catalog.core.identity.table_bucket`), so adding or deleting a table rewrites one partition.
  `row` is the 0-based data row, `col` the 1-based column position (index into `headers`), `value`
  the raw cell text (None when missing); tokens are normalized downstream.
* `changes`: one row per (batch, table): op `ADD` (new or changed: replace whatever was indexed)
  or `DELETE`. Batches are numbered 1, 2, …

The three tables are one unit (`BRONZE`): a landing writes them and then commits the unit's
manifest, whose `batch_id` is the last batch landed. So a batch is visible entirely or not at all,
and the next batch id is allocated from the committed manifest under the lake lock.
"""

from __future__ import annotations

import pyarrow as pa

from spark_jobs.lake.commit_point import UnitSpec

DATASETS = "datasets"
CELLS = "cells"
CHANGES = "changes"

DATASETS_SCHEMA = pa.schema(
    [
        ("table_id", pa.string()),
        ("source", pa.string()),
        ("name", pa.string()),
        ("title", pa.string()),
        ("format", pa.string()),
        ("headers", pa.list_(pa.string())),
        ("portal_types", pa.list_(pa.string())),
        ("n_rows", pa.int64()),
        ("n_columns", pa.int32()),
        ("content_sha256", pa.string()),
        ("source_updated_at", pa.string()),
        ("batch_id", pa.int64()),
        ("landed_at", pa.timestamp("us", tz="UTC")),
    ]
)

CELLS_SCHEMA = pa.schema(
    [
        ("table_id", pa.string()),
        ("bucket", pa.int32()),
        ("row", pa.int64()),
        ("col", pa.int32()),
        ("value", pa.string()),
    ]
)

CHANGES_SCHEMA = pa.schema(
    [
        ("batch_id", pa.int64()),
        ("table_id", pa.string()),
        ("op", pa.string()),
        ("created_at", pa.timestamp("us", tz="UTC")),
    ]
)

ADD, DELETE = "ADD", "DELETE"

BRONZE = UnitSpec("bronze", (DATASETS, CELLS, CHANGES))
