"""Publish the JOSIE index from the lake into the catalog database (the `josie` publisher).

Incremental: the catalog's `josie_meta.index_version` says which index version it holds; the lake's
`josie_changes` log says which token ids (dictionary row and posting list) and set ids each later
version changed, so only those rows are deleted and re-inserted from the current lake tables (a key
gone from the lake is simply deleted). A build or rebuild (`full` change), a catalog with no JOSIE
index yet, or a gap in the log republishes everything. It runs inside the publish transaction of
`spark_jobs.publish.catalog` (a batch's, or the one after a rebuild), so readers never see half an
index.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from catalog.db.bulk import insert_rows
from catalog.db.models.base import pack_int32_list_array, text_key
from catalog.search.josie.models import JosieMeta, JosiePosting, JosieSet, JosieToken
from spark_jobs.josie.build import read_state
from spark_jobs.josie.tables import (
    CHANGE_FULL,
    CHANGE_SET,
    CHANGE_TOKEN,
    JOSIE_CHANGES,
    JOSIE_POSTINGS,
    JOSIE_SETS,
    JOSIE_STATE,
    JOSIE_TOKENS,
    JosieState,
)
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.store import LakeStore

log = logging.getLogger(__name__)

_CHUNK = 500  # keys per DELETE ... IN (...)
_BATCH_ROWS = 50_000  # index rows turned into Python objects at a time


def catalog_index_version(session: Session) -> int | None:
    value = session.scalar(select(JosieMeta.value).where(JosieMeta.key == "index_version"))
    return int(value) if value is not None else None


def publish_josie(session: Session, store: LakeStore, batch: ChangeBatch | None = None) -> dict[str, int]:
    """Bring the catalog's JOSIE tables to the lake's current index version (a publisher)."""
    if not store.exists(JOSIE_STATE):
        return {"josie_index_version": 0}
    state = read_state(store)
    target = state.index_version
    have = catalog_index_version(session)
    if have == target:
        return {"josie_index_version": target, "josie_tokens_written": 0, "josie_sets_written": 0}
    keys = None if have is None or have > target else _changed_keys(store, have, target)
    if keys is None:
        counts = _publish_full(session, store)
    else:
        counts = _publish_keys(session, store, token_ids=keys[0], set_ids=keys[1])
    _write_meta(session, state)
    log.info(
        "josie index published", extra={"from_version": have, "to_version": target, "full": keys is None, **counts}
    )
    return {"josie_index_version": target, **counts}


def _changed_keys(store: LakeStore, have: int, target: int) -> tuple[list[int], list[int]] | None:
    """Token and set ids changed by versions (have, target], or None when only a full publish will do."""
    log_rows = store.read_arrow(JOSIE_CHANGES)
    mask = pc.and_(pc.greater(log_rows["index_version"], have), pc.less_equal(log_rows["index_version"], target))
    rows = log_rows.filter(mask)
    versions = sorted(set(rows["index_version"].to_pylist()))
    if versions != list(range(have + 1, target + 1)):
        return None
    if CHANGE_FULL in set(rows["kind"].to_pylist()):
        return None
    bases = rows.filter(pc.equal(rows["index_version"], have + 1))["base_version"].to_pylist()
    if any(b != have for b in bases):
        return None
    tokens = pc.unique(rows.filter(pc.equal(rows["kind"], CHANGE_TOKEN))["key"]).to_pylist()
    sets = pc.unique(rows.filter(pc.equal(rows["kind"], CHANGE_SET))["key"]).to_pylist()
    return sorted(tokens), sorted(sets)


def _publish_full(session: Session, store: LakeStore) -> dict[str, int]:
    session.execute(delete(JosiePosting))
    session.execute(delete(JosieSet))
    session.execute(delete(JosieToken))
    return _insert_all(session, store, None, None)


def _publish_keys(session: Session, store: LakeStore, *, token_ids: list[int], set_ids: list[int]) -> dict[str, int]:
    for chunk in _chunks(token_ids):
        session.execute(delete(JosiePosting).where(JosiePosting.token_id.in_(chunk)))
        session.execute(delete(JosieToken).where(JosieToken.token_id.in_(chunk)))
    for chunk in _chunks(set_ids):
        session.execute(delete(JosieSet).where(JosieSet.set_id.in_(chunk)))
    return _insert_all(session, store, token_ids, set_ids)


def _insert_all(
    session: Session, store: LakeStore, token_ids: list[int] | None, set_ids: list[int] | None
) -> dict[str, int]:
    n_tokens = _insert_batches(session, JosieToken, _rows(store, JOSIE_TOKENS, "token_id", token_ids), _token_rows)
    n_postings = _insert_batches(
        session, JosiePosting, _rows(store, JOSIE_POSTINGS, "token_id", token_ids), _posting_rows
    )
    n_sets = _insert_batches(session, JosieSet, _rows(store, JOSIE_SETS, "set_id", set_ids), _set_rows)
    session.flush()
    return {"josie_tokens_written": n_tokens, "josie_postings_written": n_postings, "josie_sets_written": n_sets}


def _insert_batches(
    session: Session, model: Any, table: pa.Table, rows: Callable[[pa.RecordBatch], Iterator[dict[str, Any]]]
) -> int:
    """Insert `table` one record batch at a time: a real lake's index is millions of rows, and
    turned into Python objects at once it took gigabytes."""
    return sum(insert_rows(session, model, rows(batch)) for batch in table.to_batches(max_chunksize=_BATCH_ROWS))


def _token_rows(batch: pa.RecordBatch) -> Iterator[dict[str, Any]]:
    for t, i, f, g in zip(
        batch.column("token").to_pylist(),
        batch.column("token_id").to_pylist(),
        batch.column("frequency").to_pylist(),
        batch.column("group_id").to_pylist(),
        strict=True,
    ):
        yield {"token_key": text_key(t), "token": t, "token_id": i, "frequency": f, "group_id": g}


def _posting_rows(batch: pa.RecordBatch) -> Iterator[dict[str, Any]]:
    for i, s, p, z in zip(
        batch.column("token_id").to_pylist(),
        pack_int32_list_array(batch.column("set_ids")),
        pack_int32_list_array(batch.column("positions")),
        pack_int32_list_array(batch.column("sizes")),
        strict=True,
    ):
        yield {"token_id": i, "set_ids": s, "positions": p, "sizes": z}


def _set_rows(batch: pa.RecordBatch) -> Iterator[dict[str, Any]]:
    for i, c, t, z, a in zip(
        batch.column("set_id").to_pylist(),
        batch.column("column_id").to_pylist(),
        batch.column("table_id").to_pylist(),
        batch.column("size").to_pylist(),
        pack_int32_list_array(batch.column("tokens")),
        strict=True,
    ):
        yield {"set_id": i, "column_id": c, "table_id": t, "size": z, "tokens": a}


def _rows(store: LakeStore, name: str, key: str, keys: list[int] | None) -> pa.Table:
    table = store.read_arrow(name)
    if keys is None:
        return table
    return table.filter(pc.is_in(table[key], pa.array(keys, pa.int64())))


def _write_meta(session: Session, state: JosieState) -> None:
    for key, value in dataclasses.asdict(state).items():
        session.merge(JosieMeta(key=key, value=str(value)))


def _chunks(items: list[int]) -> list[list[int]]:
    return [items[i : i + _CHUNK] for i in range(0, len(items), _CHUNK)]
