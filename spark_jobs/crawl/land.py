"""Landing parsed tables in bronze: `cells`, `datasets` and the `changes` batch that announces them,
then the bronze manifest, the landing's one commit point.

Until the manifest is committed no reader sees any of it, so a landing killed half-way is
invisible; the next writer of bronze rolls its table versions back. The caller holds the lake lock
(batch ids are allocated here, from the committed manifest).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from catalog.core.identity import column_headers, storable_text, table_bucket
from catalog.core.logs import log_context
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.bronze import (
    ADD,
    BRONZE,
    CELLS,
    CELLS_SCHEMA,
    CHANGES,
    CHANGES_SCHEMA,
    DATASETS,
    DATASETS_SCHEMA,
    DELETE,
)
from spark_jobs.lake.commit_point import begin, commit
from spark_jobs.lake.store import LakeStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ParsedTable:
    """A table ready to land: raw headers and one sequence of raw cell texts per column."""

    table_id: str
    headers: Sequence[str | None]
    columns: Sequence[Sequence[str | None]]
    source: str = ""
    name: str = ""
    title: str | None = None
    format: str | None = None
    portal_types: Sequence[str | None] = field(default_factory=tuple)
    content_sha256: str | None = None
    source_updated_at: str | None = None

    @property
    def n_rows(self) -> int:
        return len(self.columns[0]) if self.columns else 0


def cells_of(table: ParsedTable, n_buckets: int) -> pa.Table:
    """Long-form cells of one table, built column by column (no per-cell Python loop)."""
    n = table.n_rows
    bucket = table_bucket(table.table_id, n_buckets)
    parts = []
    for col, values in enumerate(table.columns, start=1):
        if len(values) != n:
            raise ValueError(f"{table.table_id}: column {col} has {len(values)} values, expected {n}")
        parts.append(
            pa.table(
                {
                    "table_id": pa.array([table.table_id] * n, pa.string()) if n else pa.array([], pa.string()),
                    "bucket": pa.array(np.full(n, bucket, dtype=np.int32)),
                    "row": pa.array(np.arange(n, dtype=np.int64)),
                    "col": pa.array(np.full(n, col, dtype=np.int32)),
                    "value": _storable_array(values),
                },
                schema=CELLS_SCHEMA,
            )
        )
    return pa.concat_tables(parts) if parts else CELLS_SCHEMA.empty_table()


def _storable_array(values: Sequence[str | None]) -> pa.Array:
    """Cell texts as an Arrow string array under `storable_text` (NUL removed, lone surrogates
    replaced): vectorised for NUL; the per-value path only for a column Arrow cannot encode."""
    try:
        array = pa.array(values, pa.string())
    except UnicodeEncodeError:  # a lone surrogate
        array = pa.array([None if v is None else storable_text(v) for v in values], pa.string())
    return pc.replace_substring(array, "\x00", "")


def _storable(value: str | None) -> str | None:
    return None if value is None else storable_text(value)


def dataset_rows(tables: Sequence[ParsedTable], batch_id: int, now: dt.datetime) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "table_id": t.table_id,
                "source": t.source,
                "name": _storable(t.name or t.table_id),
                "title": _storable(t.title),
                "format": t.format,
                "headers": column_headers([_storable(h) for h in t.headers]),
                "portal_types": [_storable(p) for p in t.portal_types] or list[str | None]([None] * len(t.headers)),
                "n_rows": t.n_rows,
                "n_columns": len(t.headers),
                "content_sha256": t.content_sha256,
                "source_updated_at": _storable(t.source_updated_at),
                "batch_id": batch_id,
                "landed_at": now,
            }
            for t in tables
        ],
        schema=DATASETS_SCHEMA,
    )


def land_batch(
    store: LakeStore,
    added: Sequence[ParsedTable],
    deleted: Sequence[str],
    *,
    n_buckets: int,
    stamps: Mapping[str, str | None] | None = None,
) -> ChangeBatch:
    """Land `added` (new or changed tables) and remove `deleted` as the next change batch, and record
    `stamps` (new portal stamps of unchanged tables); all of it in one bronze commit."""
    if not added and not deleted and not stamps:
        return ChangeBatch(0, (), ())
    base = begin(store, BRONZE)
    if stamps:
        _refresh_stamps(store, stamps)
    if not added and not deleted:
        commit(store, BRONZE, base, batch_id=base.batch_id, kind="stamps")
        return ChangeBatch(0, (), ())
    batch_id = base.batch_id + 1
    now = dt.datetime.now(dt.UTC)
    touched = sorted({t.table_id for t in added} | set(deleted))
    buckets = sorted({table_bucket(t, n_buckets) for t in touched})
    with log_context(batch_id=batch_id):
        cells = pa.concat_tables([cells_of(t, n_buckets) for t in added]) if added else CELLS_SCHEMA.empty_table()
        store.overwrite_where(
            CELLS, cells, column="table_id", values=touched, partitions={"bucket": buckets}, partition_by=["bucket"]
        )
        store.overwrite_where(DATASETS, dataset_rows(added, batch_id, now), column="table_id", values=touched)
        changes = pa.Table.from_pylist(
            [{"batch_id": batch_id, "table_id": t.table_id, "op": ADD, "created_at": now} for t in added]
            + [{"batch_id": batch_id, "table_id": tid, "op": DELETE, "created_at": now} for tid in deleted],
            schema=CHANGES_SCHEMA,
        )
        store.append(CHANGES, changes)
        commit(store, BRONZE, base, batch_id=batch_id, kind="land")
        log.info("batch landed", extra={"n_added": len(added), "n_deleted": len(deleted), "n_cells": cells.num_rows})
    return ChangeBatch(batch_id, tuple(sorted(t.table_id for t in added)), tuple(sorted(deleted)))


def _refresh_stamps(store: LakeStore, stamps: Mapping[str, str | None]) -> None:
    """Record new portal stamps of tables whose content did not change (no change batch)."""
    if not store.exists(DATASETS):
        return
    rows = store.read_arrow(DATASETS, where={"table_id": sorted(stamps)})
    if rows.num_rows == 0:
        return
    new = pa.array([stamps[t] for t in rows["table_id"].to_pylist()], pa.string())
    rows = rows.set_column(rows.schema.get_field_index("source_updated_at"), "source_updated_at", new)
    store.overwrite_where(DATASETS, rows, column="table_id", values=rows["table_id"].to_pylist())
