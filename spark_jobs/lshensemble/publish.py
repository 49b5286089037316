"""Publish the LSH Ensemble index from the lake into the catalog database (the `lshensemble`
publisher), inside the publish transaction of `spark_jobs.publish.catalog`.

Incremental when the catalog holds the version this one was derived from: the batch's tables'
rows are deleted and its added tables' signatures inserted. A build, a re-sign, a catalog with no
index or at another version, and the publish after a rebuild rewrite every row; a repartition that
re-signed nothing only rewrites the facts (the bounds), since partitions follow from sizes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from catalog.db.bulk import insert_rows
from catalog.search.lshensemble.models import LsheColumn, LsheMeta
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.store import LakeStore
from spark_jobs.lshensemble.tables import LSHE_SIGNATURES, LsheState
from spark_jobs.lshensemble.update import read_state

log = logging.getLogger(__name__)

_CHUNK = 500  # table ids per DELETE ... IN (...)
_BATCH_ROWS = 20_000


def catalog_meta(session: Session) -> dict[str, str]:
    return dict(session.execute(select(LsheMeta.key, LsheMeta.value)).tuples().all())


def publish_lshensemble(session: Session, store: LakeStore, batch: ChangeBatch | None = None) -> dict[str, int]:
    """Bring the catalog's LSH Ensemble tables to the lake's state (a publisher)."""
    state = read_state(store)
    if state is None:
        return {"lshe_index_version": 0}
    meta = catalog_meta(session)
    have = int(meta["index_version"]) if "index_version" in meta else None
    if have == state.index_version:
        return {"lshe_index_version": have, "lshe_columns_written": 0}
    signed_alike = meta.get("spec") == _spec_json(state) and have is not None
    if batch is not None and not state.full and signed_alike and have == state.base_version:
        written = _publish_tables(session, store, batch)
    elif batch is None and not state.full and signed_alike and have == state.base_version:
        written = 0  # a repartition: new bounds, the same signatures
    else:
        session.execute(delete(LsheColumn))
        written = _insert(session, store.read_arrow(LSHE_SIGNATURES))
    _write_meta(session, state)
    log.info("lshensemble published", extra={"from_version": have, "to_version": state.index_version, "rows": written})
    return {"lshe_index_version": state.index_version, "lshe_columns_written": written}


def _publish_tables(session: Session, store: LakeStore, batch: ChangeBatch) -> int:
    touched = sorted(batch.touched)
    for i in range(0, len(touched), _CHUNK):
        session.execute(delete(LsheColumn).where(LsheColumn.table_id.in_(touched[i : i + _CHUNK])))
    added = sorted(batch.added)
    if not added:
        return 0
    return _insert(session, store.read_arrow(LSHE_SIGNATURES, where={"table_id": added}))


def _insert(session: Session, rows: pa.Table) -> int:
    return sum(insert_rows(session, LsheColumn, _rows(b)) for b in rows.to_batches(max_chunksize=_BATCH_ROWS))


def _rows(batch: pa.RecordBatch) -> Iterator[dict[str, Any]]:
    columns = [batch.column(name).to_pylist() for name in ("column_id", "table_id", "size", "signature")]
    for column_id, table_id, size, signature in zip(*columns, strict=True):
        yield {"column_id": column_id, "table_id": table_id, "size": size, "signature": signature}


def _spec_json(state: LsheState) -> str:
    return json.dumps(state.spec.as_dict(), sort_keys=True)


def _write_meta(session: Session, state: LsheState) -> None:
    facts = {
        "index_version": str(state.index_version),
        "spec": _spec_json(state),
        "uppers": json.dumps(list(state.uppers)),
        "n_columns": str(state.n_columns),
        "partitioning": state.partitioning,
        "tuning": state.tuning,
    }
    session.execute(delete(LsheMeta))
    session.add_all(LsheMeta(key=k, value=v) for k, v in facts.items())
    session.flush()
