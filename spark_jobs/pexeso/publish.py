"""Publish the PEXESO index from the lake into the catalog database (the `pexeso` publisher),
inside the publish transaction of `spark_jobs.publish.catalog`.

Incremental when the catalog holds the version this one was derived from with the same embedder:
the rows of the batch's touched tables are deleted and its added tables' columns inserted under new
`column_ref`s. A build, a re-embedding, and a catalog with no index or at another version get every
row rewritten. The facts (with the pivots, which a rebuild re-selects without touching a vector)
are rewritten every time. Vectors go in as the lake holds them (packed float32).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Collection, Iterator, Sequence
from itertools import chain, islice
from typing import Any

import pyarrow as pa
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from catalog.db.bulk import insert_rows
from catalog.search.pexeso.lists import lists_current, refresh_semantic_lists
from catalog.search.pexeso.models import PexesoColumn, PexesoMeta
from catalog.search.pexeso.repartition import assign_added, partitioning_current, repartition
from catalog.search.pexeso.source import IndexFrame
from catalog.search.pexeso.vector_blocks import catalog_blocks
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.store import LakeStore
from spark_jobs.pexeso.tables import PEXESO_VECTORS, PexesoState, shape_json, spec_json
from spark_jobs.pexeso.update import read_state

log = logging.getLogger(__name__)

_CHUNK = 500  # ids per DELETE ... IN (...)
_BATCH_ROWS = 2_000  # columns per insert batch (each holds its vectors)


def publish_pexeso(session: Session, store: LakeStore, batch: ChangeBatch | None = None) -> dict[str, int]:
    """Bring the catalog's PEXESO tables to the lake's state (a publisher)."""
    state = read_state(store)
    if state is None:
        return {"pexeso_index_version": 0}
    meta = dict(session.execute(select(PexesoMeta.key, PexesoMeta.value)).tuples().all())
    have = int(meta["index_version"]) if "index_version" in meta else None
    if have == state.index_version:
        return {"pexeso_index_version": state.index_version, "pexeso_columns_written": 0}
    alike = meta.get("spec") == spec_json(state.spec) and have == state.base_version and not state.full
    lists: dict[str, int] = {}
    if batch is not None and alike:
        _delete_tables(session, sorted(batch.touched))
        first = _next_ref(session)
        written = _insert_tables(session, store, sorted(batch.added))
        frame = _write_meta(session, state)
        parts = _partition(session, frame, first)
        lists = _refresh_lists(session, frame, batch.added, batch.touched)
    elif batch is None and alike:
        written = 0  # a rebuild: new pivots, the same vectors (and lists, unless they were not current)
        frame = _write_meta(session, state)
        parts = _partition(session, frame, None)
        if not lists_current(session.connection()):
            lists = _refresh_lists(session, frame, None, ())
    else:
        session.execute(delete(PexesoColumn))
        written = _insert_tables(session, store, None)
        frame = _write_meta(session, state)
        parts = _partition(session, frame, None)
        lists = _refresh_lists(session, frame, None, ())
    counts = {"pexeso_columns_written": written, **parts, **lists}
    log.info("pexeso published", extra={"from_version": have, "to_version": state.index_version, **counts})
    return {"pexeso_index_version": state.index_version, **counts}


def _partition(session: Session, frame: IndexFrame, first_added: int | None) -> dict[str, int]:
    """The partitions brought to the index just written: the added columns (column_ref from
    `first_added`) placed in the existing ones when those are current (same pivots, budget and
    histogram level), else every column clustered afresh (a build, a rebuild, a changed budget)."""
    conn = session.connection()
    if first_added is not None and partitioning_current(conn, frame, before=first_added):
        return assign_added(conn, frame, first_added)
    if first_added is None and partitioning_current(conn, frame):
        return {}
    return repartition(conn, frame)


def _next_ref(session: Session) -> int:
    return (session.execute(select(func.max(PexesoColumn.column_ref))).scalar() or 0) + 1


def _refresh_lists(
    session: Session, frame: IndexFrame, added: Collection[str] | None, touched: Collection[str]
) -> dict[str, int]:
    """The semantic join lists brought to the index just written (read back from the catalog, a
    budget's worth of vectors at a time: the lists are a search of what a lookup's search would see)."""
    conn = session.connection()
    budget = frame.shape.memory_budget_mb  # the lists hold no more lake vectors than a search
    return refresh_semantic_lists(conn, lambda: catalog_blocks(conn, budget), added, touched)


def _delete_tables(session: Session, table_ids: Sequence[str]) -> None:
    for i in range(0, len(table_ids), _CHUNK):
        session.execute(delete(PexesoColumn).where(PexesoColumn.table_id.in_(table_ids[i : i + _CHUNK])))


def _insert_tables(session: Session, store: LakeStore, table_ids: list[str] | None) -> int:
    """Insert these tables' columns (all when None) under fresh column_refs; returns how many."""
    if table_ids == [] or not store.exists(PEXESO_VECTORS):
        return 0
    columns = chain.from_iterable(column_rows(rows) for rows in _bucket_rows(store, table_ids))
    catalog_rows = (_catalog_row(c, ref) for ref, c in enumerate(columns, start=_next_ref(session)))
    written = 0
    while chunk := list(islice(catalog_rows, _BATCH_ROWS)):
        written += insert_rows(session, PexesoColumn, chunk)
    return written


def _bucket_rows(store: LakeStore, table_ids: list[str] | None) -> Iterator[pa.Table]:
    """The `pexeso_vectors` rows of these tables (all when None), a bucket at a time, each sorted by
    column_id. A column's rows all lie in its table's bucket, so memory holds one bucket's vectors:
    the whole index can pass 2 GB, more than one Arrow binary array holds (sorting it all failed
    so on the seed lake after a 15% batch)."""
    where: dict[str, list[Any]] = {} if table_ids is None else {"table_id": table_ids}
    columns = ["column_id", "table_id", "header", "n_values", "values", "vectors"]
    buckets = sorted(int(b) for b in store.files_by_partition(PEXESO_VECTORS, "bucket", where=where or None))
    for bucket in buckets:
        rows = store.read_arrow(PEXESO_VECTORS, columns=columns, where={**where, "bucket": [bucket]})
        yield rows.sort_by("column_id")


def column_rows(rows: pa.Table) -> Iterator[dict[str, Any]]:
    """One dict per column of `rows` (`pexeso_vectors` rows sorted by column_id, each column's rows
    all there): the lake holds a large column in several rows, whose values and packed vectors are
    joined here in one order."""
    parts: list[dict[str, Any]] = []
    for batch in rows.to_batches(max_chunksize=_BATCH_ROWS):
        for row in batch.to_pylist():
            if parts and row["column_id"] != parts[0]["column_id"]:
                yield _joined(parts)
                parts = []
            parts.append(row)
    if parts:
        yield _joined(parts)


def _joined(parts: list[dict[str, Any]]) -> dict[str, Any]:
    if len(parts) == 1:
        return parts[0]
    return {
        **parts[0],
        "n_values": sum(p["n_values"] for p in parts),
        "values": [v for p in parts for v in p["values"]],
        "vectors": b"".join(p["vectors"] for p in parts),
    }


def _catalog_row(column: dict[str, Any], column_ref: int) -> dict[str, Any]:
    return {
        "column_ref": column_ref,
        "column_id": column["column_id"],
        "table_id": column["table_id"],
        "header": column["header"] or "",
        "n_values": column["n_values"],
        "value_list": json.dumps(column["values"]),
        "vectors": column["vectors"],
    }


def _write_meta(session: Session, state: PexesoState) -> IndexFrame:
    facts = {
        "index_version": str(state.index_version),
        "spec": spec_json(state.spec),
        "shape": shape_json(state.shape),
        "pivots": base64.b64encode(state.pivots.astype("<f4").tobytes()).decode("ascii"),
        "n_columns": str(state.n_columns),
        "n_vectors": str(state.n_vectors),
    }
    session.execute(delete(PexesoMeta).where(PexesoMeta.key.in_(list(facts))))  # the lists' and partitions' stay
    session.add_all(PexesoMeta(key=k, value=v) for k, v in facts.items())
    session.flush()
    return IndexFrame.of(facts)
