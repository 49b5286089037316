"""Landing parsed tables in bronze: `cells`, `datasets` and the `changes` batch that announces them,
then the bronze manifest, the landing's one commit point.

Until the manifest is committed no reader sees any of it, so a landing killed half-way is
invisible; the next writer of bronze rolls its table versions back. The caller holds the lake lock
(batch ids are allocated here, from the committed manifest).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

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
    staged_rows: int | None = None  # set when the cells wait on disk (`CellStaging`), not in `columns`

    @property
    def n_rows(self) -> int:
        if self.staged_rows is not None:
            return self.staged_rows
        return len(self.columns[0]) if self.columns else 0


class CellStaging:
    """The cells of a crawl's parsed tables, spilled to local Parquet files (one per table bucket)
    as they are parsed, so that a crawl holds only table descriptions in memory however large the
    lake. The landing streams them back bucket by bucket, each bucket in the order its tables
    were staged (a crawl stages them in table-id order), so bronze files get narrow ranges."""

    def __init__(self, folder: Path, n_buckets: int, *, group_rows: int = 65_536) -> None:
        self.folder = folder / f"cells-{uuid.uuid4().hex}"
        self.n_buckets = n_buckets
        self.group_rows = group_rows
        self._writers: dict[int, pq.ParquetWriter] = {}
        self._paths: dict[int, Path] = {}
        self._pending: dict[int, list[pa.Table]] = {}

    def add(self, table: ParsedTable) -> ParsedTable:
        """Stage the table's cells; returns its description (no cells, `staged_rows` set)."""
        bucket = table_bucket(table.table_id, self.n_buckets)
        pending = self._pending.setdefault(bucket, [])
        pending.append(cells_of(table, self.n_buckets))
        if sum(t.num_rows for t in pending) >= self.group_rows:
            self._flush(bucket)
        return dataclasses.replace(table, columns=(), staged_rows=table.n_rows)

    def _flush(self, bucket: int) -> None:
        pending = self._pending.pop(bucket, [])
        if not pending:
            return
        if bucket not in self._writers:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._paths[bucket] = self.folder / f"bucket-{bucket}.parquet"
            self._writers[bucket] = pq.ParquetWriter(self._paths[bucket], CELLS_SCHEMA)
        rows = pa.concat_tables(pending)
        self._writers[bucket].write_table(rows, row_group_size=max(rows.num_rows, 1))

    def cells(self, table_ids: Collection[str]) -> pa.RecordBatchReader:
        """The staged cells of `table_ids` (others were staged but are not landed), streamed. Ends
        the staging: the files are complete (a landing that is retried may read them again)."""
        for bucket in list(self._pending):
            self._flush(bucket)
        for writer in self._writers.values():
            writer.close()
        self._writers = {}
        files = [self._paths[b] for b in sorted(self._paths)]
        wanted = pa.array(sorted(table_ids), pa.string())
        batches = (
            batch.filter(pc.is_in(batch["table_id"], wanted))
            for path in files
            for batch in pq.ParquetFile(path, pre_buffer=False).iter_batches()  # pre-buffering reads whole files
        )
        return pa.RecordBatchReader.from_batches(CELLS_SCHEMA, batches)


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
    staging: CellStaging | None = None,
) -> ChangeBatch:
    """Land `added` (new or changed tables) and remove `deleted` as the next change batch, and record
    `stamps` (new portal stamps of unchanged tables); all of it in one bronze commit. With
    `staging`, the cells of `added` (then descriptions) are streamed from it.

    Cells are written in table-id order, so each bronze file holds a narrow range of table ids and
    a later batch reads and rewrites only the files whose ranges hold its tables."""
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
        ids = {t.table_id for t in added}
        cells = staging.cells(ids) if staging is not None else _cells_in_order(added, n_buckets)
        written = store.overwrite_where(
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
        log.info(
            "batch landed",
            extra={"n_added": len(added), "n_deleted": len(deleted), "n_cells_written": written.n_rows_written},
        )
    return ChangeBatch(batch_id, tuple(sorted(t.table_id for t in added)), tuple(sorted(deleted)))


def _cells_in_order(tables: Sequence[ParsedTable], n_buckets: int) -> pa.RecordBatchReader:
    """The cells of in-memory tables in table-id order, one table converted at a time."""
    ordered = sorted(tables, key=lambda t: t.table_id)
    return pa.RecordBatchReader.from_batches(
        CELLS_SCHEMA, (b for t in ordered for b in cells_of(t, n_buckets).to_batches())
    )


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
