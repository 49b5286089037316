"""Publishers of the precomputed relations: the joinable and unionable lists a batch changed.

Each relate job records the subjects whose lists it recomputed for a batch (`joinable_changes`,
`unionable_changes`); publishing replaces exactly those lists in the catalog (delete, then bulk
insert the gold rows), inside `publish_catalog`'s one transaction.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from catalog.db.models import CatalogColumn, CatalogTable, JoinableColumn, UnionableTable
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.store import LakeStore
from spark_jobs.relate.joinable import JOINABLE, JOINABLE_CHANGES
from spark_jobs.relate.unionable import UNIONABLE, UNIONABLE_CHANGES

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


def _replace_lists(
    session: Session,
    store: LakeStore,
    batch: ChangeBatch,
    *,
    model: Any,
    subject: str,
    changes: str,
    gold: str,
    known: Any,
    row: Callable[[dict[str, Any]], dict[str, Any]],
    name: str,
) -> dict[str, int]:
    """Replace the answer lists of the batch's changed subjects (column_id or table_id) by the gold
    rows; rows whose subject is not in the catalog (a table deleted meanwhile) are left out."""
    subjects = _changed(store, changes, subject, batch)
    key = getattr(model, subject)
    for i in range(0, len(subjects), _CHUNK):
        session.execute(delete(model).where(key.in_(subjects[i : i + _CHUNK])))
    if not subjects:
        return {f"n_{name}_lists": 0, f"n_{name}": 0}
    rows = store.read_arrow(gold, where={subject: subjects}).to_pylist()
    present = _existing(session, known, sorted({r[subject] for r in rows}))
    rows = [row(r) for r in rows if r[subject] in present]
    if rows:
        session.execute(insert(model), rows)
    session.flush()
    return {f"n_{name}_lists": len(subjects), f"n_{name}": len(rows)}


def publish_joinable(session: Session, store: LakeStore, batch: ChangeBatch) -> dict[str, int]:
    return _replace_lists(
        session,
        store,
        batch,
        model=JoinableColumn,
        subject="column_id",
        changes=JOINABLE_CHANGES,
        gold=JOINABLE,
        known=CatalogColumn.column_id,
        row=lambda r: r,
        name="joinable",
    )


def publish_unionable(session: Session, store: LakeStore, batch: ChangeBatch) -> dict[str, int]:
    return _replace_lists(
        session,
        store,
        batch,
        model=UnionableTable,
        subject="table_id",
        changes=UNIONABLE_CHANGES,
        gold=UNIONABLE,
        known=CatalogTable.table_id,
        row=lambda r: {**r, "alignment": json.loads(r["alignment"])},
        name="unionable",
    )


def publish_all_relations(session: Session, store: LakeStore) -> dict[str, int]:
    """Replace every joinable and unionable list in the catalog by gold's (after `relate_all`), in
    the caller's transaction."""
    counts: dict[str, int] = {}
    for model, subject, gold, known, row, name in (
        (JoinableColumn, "column_id", JOINABLE, CatalogColumn.column_id, lambda r: r, "joinable"),
        (
            UnionableTable,
            "table_id",
            UNIONABLE,
            CatalogTable.table_id,
            lambda r: {**r, "alignment": json.loads(r["alignment"])},
            "unionable",
        ),
    ):
        session.execute(delete(model))
        rows = store.read_arrow(gold).to_pylist() if store.exists(gold) else []
        present = _existing(session, known, sorted({r[subject] for r in rows}))
        rows = [row(r) for r in rows if r[subject] in present]
        if rows:
            session.execute(insert(model), rows)
        counts[f"n_{name}"] = len(rows)
    session.flush()
    return counts
