"""Publishers of the precomputed relations: the joinable and unionable lists a batch changed.

Each relate job records the subjects whose lists it recomputed for a batch (`joinable_changes`,
`unionable_changes`); publishing replaces exactly those lists in the catalog (delete, then bulk
insert the gold rows), inside `publish_catalog`'s one transaction.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from catalog.models import CatalogColumn, CatalogTable, JoinableColumn, UnionableTable
from spark_jobs.change_batch import ChangeBatch
from spark_jobs.lake_store import LakeStore
from spark_jobs.relate_joinable import JOINABLE, JOINABLE_CHANGES
from spark_jobs.relate_unionable import UNIONABLE, UNIONABLE_CHANGES

log = logging.getLogger(__name__)
_CHUNK = 500


def _changed(store: LakeStore, table: str, column: str, batch: ChangeBatch) -> list[str]:
    if not store.exists(table):
        return []
    rows = store.read_arrow(table, columns=["batch_id", column], where={"batch_id": [batch.batch_id]})
    return sorted(set(rows[column].to_pylist()))


def _existing(session: Session, column: Any, ids: Sequence[str]) -> set[str]:
    out: set[str] = set()
    for i in range(0, len(ids), _CHUNK):
        out.update(session.scalars(select(column).where(column.in_(ids[i : i + _CHUNK]))))
    return out


def publish_joinable(session: Session, store: LakeStore, batch: ChangeBatch) -> dict[str, int]:
    subjects = _changed(store, JOINABLE_CHANGES, "column_id", batch)
    for i in range(0, len(subjects), _CHUNK):
        session.execute(delete(JoinableColumn).where(JoinableColumn.column_id.in_(subjects[i : i + _CHUNK])))
    if not subjects:
        return {"n_joinable_lists": 0, "n_joinable": 0}
    rows = store.read_arrow(JOINABLE, where={"column_id": subjects}).to_pylist()
    known = _existing(session, CatalogColumn.column_id, sorted({r["column_id"] for r in rows}))
    rows = [r for r in rows if r["column_id"] in known]
    if rows:
        session.execute(insert(JoinableColumn), rows)
    session.flush()
    return {"n_joinable_lists": len(subjects), "n_joinable": len(rows)}


def publish_unionable(session: Session, store: LakeStore, batch: ChangeBatch) -> dict[str, int]:
    subjects = _changed(store, UNIONABLE_CHANGES, "table_id", batch)
    for i in range(0, len(subjects), _CHUNK):
        session.execute(delete(UnionableTable).where(UnionableTable.table_id.in_(subjects[i : i + _CHUNK])))
    if not subjects:
        return {"n_unionable_lists": 0, "n_unionable": 0}
    rows = store.read_arrow(UNIONABLE, where={"table_id": subjects}).to_pylist()
    known = _existing(session, CatalogTable.table_id, sorted({r["table_id"] for r in rows}))
    rows = [{**r, "alignment": json.loads(r["alignment"])} for r in rows if r["table_id"] in known]
    if rows:
        session.execute(insert(UnionableTable), rows)
    session.flush()
    return {"n_unionable_lists": len(subjects), "n_unionable": len(rows)}
