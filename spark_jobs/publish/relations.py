"""Publishers of the precomputed relations: the joinable and unionable lists a batch changed.

Each relate job records the subjects whose lists it recomputed for a batch (`joinable_changes`,
`unionable_changes`); publishing replaces exactly those lists in the catalog (delete, then bulk
insert the gold rows), inside `publish_catalog`'s one transaction.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from catalog.db.bulk import insert_rows
from catalog.db.models import CatalogColumn, CatalogTable, JoinableColumn, UnionableTable
from catalog.db.models.base import text_key
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


@dataclass(frozen=True)
class Lists:
    """One kind of precomputed list: its catalog model, subject column, gold tables and how a gold row
    becomes a catalog row."""

    name: str
    model: Any
    subject: str  # column_id or table_id
    key: str  # the subject's digest key column
    known: Any  # the catalog column listing the subjects that exist
    changes: str
    gold: str
    convert: Callable[[dict[str, Any]], dict[str, Any]]

    def insert(self, session: Session, rows: list[dict[str, Any]]) -> int:
        """Bulk-insert the gold `rows` whose subject is in the catalog (a table deleted meanwhile is
        left out); the digest key is computed here, so PostgreSQL takes the rows through COPY."""
        present = _existing(session, self.known, sorted({r[self.subject] for r in rows}))
        return insert_rows(
            session,
            self.model,
            ({self.key: text_key(r[self.subject]), **self.convert(r)} for r in rows if r[self.subject] in present),
        )


JOINABLE_LISTS = Lists(
    "joinable", JoinableColumn, "column_id", "column_key", CatalogColumn.column_id, JOINABLE_CHANGES, JOINABLE, dict
)
UNIONABLE_LISTS = Lists(
    "unionable",
    UnionableTable,
    "table_id",
    "table_key",
    CatalogTable.table_id,
    UNIONABLE_CHANGES,
    UNIONABLE,
    lambda r: {**r, "alignment": json.loads(r["alignment"])},
)


def _replace_lists(session: Session, store: LakeStore, batch: ChangeBatch, lists: Lists) -> dict[str, int]:
    """Replace the answer lists of the batch's changed subjects (column_id or table_id) by the gold
    rows."""
    subjects = _changed(store, lists.changes, lists.subject, batch)
    key = getattr(lists.model, lists.subject)
    for i in range(0, len(subjects), _CHUNK):
        session.execute(delete(lists.model).where(key.in_(subjects[i : i + _CHUNK])))
    if not subjects:
        return {f"n_{lists.name}_lists": 0, f"n_{lists.name}": 0}
    n = lists.insert(session, store.read_arrow(lists.gold, where={lists.subject: subjects}).to_pylist())
    session.flush()
    return {f"n_{lists.name}_lists": len(subjects), f"n_{lists.name}": n}


def publish_joinable(session: Session, store: LakeStore, batch: ChangeBatch) -> dict[str, int]:
    return _replace_lists(session, store, batch, JOINABLE_LISTS)


def publish_unionable(session: Session, store: LakeStore, batch: ChangeBatch) -> dict[str, int]:
    return _replace_lists(session, store, batch, UNIONABLE_LISTS)


def publish_all_relations(session: Session, store: LakeStore) -> dict[str, int]:
    """Replace every joinable and unionable list in the catalog by gold's (after `relate_all`), in
    the caller's transaction."""
    counts: dict[str, int] = {}
    for lists in (JOINABLE_LISTS, UNIONABLE_LISTS):
        session.execute(delete(lists.model))
        rows = store.read_arrow(lists.gold).to_pylist() if store.exists(lists.gold) else []
        counts[f"n_{lists.name}"] = lists.insert(session, rows)
    session.flush()
    return counts
