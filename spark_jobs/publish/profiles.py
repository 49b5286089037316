"""Publishers of column profiles and keys (registered in `publish_catalog.PUBLISHERS` after the tables).

Each replaces what the batch's touched tables had in the catalog by the silver rows of its added
tables, inside the publish transaction. `publish_tables` runs first and has already deleted the
touched tables (cascading to their columns, profiles and keys); the explicit deletes here keep a
publisher correct on its own. Rows go in bulk (`catalog.db.bulk`: COPY on PostgreSQL), so they carry
their digest keys rather than leave them to a Python-side default.
"""

from __future__ import annotations

import logging

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from catalog.db.bulk import insert_rows
from catalog.db.models import CatalogColumn, CatalogTable, ColumnProfile, TableKey
from catalog.db.models.base import text_key
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.store import LakeStore
from spark_jobs.profile.keys import KEY_SEARCHES, KEYS
from spark_jobs.profile.profiles import COLUMN_PROFILES, histogram_json, top_values_json

log = logging.getLogger(__name__)

_CHUNK = 500


def _chunks(items: list[str]) -> list[list[str]]:
    return [items[i : i + _CHUNK] for i in range(0, len(items), _CHUNK)]


def _silver(store: LakeStore, name: str, batch: ChangeBatch) -> list[dict]:
    if not batch.added or not store.exists(name):
        return []
    return store.read_arrow(name, where={"table_id": list(batch.added)}).to_pylist()


def publish_profiles(session: Session, store: LakeStore, batch: ChangeBatch) -> dict[str, int]:
    """Column profiles of the batch's tables (catalog `column_profiles`)."""
    for chunk in _chunks(list(batch.touched)):
        ids = select(CatalogColumn.column_id).where(CatalogColumn.table_id.in_(chunk))
        session.execute(delete(ColumnProfile).where(ColumnProfile.column_id.in_(ids)))
    rows = [
        {
            "column_key": text_key(r["column_id"]),
            "column_id": r["column_id"],
            "row_count": r["row_count"],
            "null_count": r["null_count"],
            "empty_count": r["empty_count"],
            "distinct_count": r["distinct_count"],
            "distinct_exact": r["distinct_exact"],
            "distinct_error": r["distinct_error"],
            "inferred_type": r["inferred_type"],
            "type_share": r["type_share"],
            "portal_type": r["portal_type"],
            "min_value": r["min_value"],
            "max_value": r["max_value"],
            "length_min": r["length_min"],
            "length_mean": r["length_mean"],
            "length_max": r["length_max"],
            "top_values": top_values_json(r),
            "histogram": histogram_json(r),
            "uniqueness": r["uniqueness"],
            "token_count": r["token_count"],
            "batch_id": str(batch.batch_id),
        }
        for r in _silver(store, COLUMN_PROFILES, batch)
    ]
    n = insert_rows(session, ColumnProfile, rows)
    session.flush()
    return {"n_profiles": n}


def publish_keys(session: Session, store: LakeStore, batch: ChangeBatch) -> dict[str, int]:
    """Keys of the batch's tables (catalog `keys`) and whether each table's search was complete."""
    for chunk in _chunks(list(batch.touched)):
        session.execute(delete(TableKey).where(TableKey.table_id.in_(chunk)))
    rows = [
        {
            "table_key": text_key(r["table_id"]),
            "table_id": r["table_id"],
            "columns": list(r["columns"]),
            "exact": r["exact"],
            "uniqueness": r["uniqueness"],
            "score": r["score"],
            "batch_id": str(batch.batch_id),
        }
        for r in _silver(store, KEYS, batch)
    ]
    insert_rows(session, TableKey, rows)
    searches = [
        {"table_key": text_key(r["table_id"]), "keys_search_complete": r["search_complete"]}
        for r in _silver(store, KEY_SEARCHES, batch)
    ]
    if searches:
        session.execute(update(CatalogTable), searches)
    session.flush()
    return {"n_keys": len(rows), "n_keys_searches_cut_short": sum(not s["keys_search_complete"] for s in searches)}


__all__ = ["publish_keys", "publish_profiles"]
