"""Publish the MATE index from the lake into the catalog database (the `mate` publisher), inside
the publish transaction of `spark_jobs.publish.catalog`.

Incremental when the catalog holds the version this one was derived from: the rows of the batch's
touched tables are deleted from the three tables and its added tables inserted under new
`table_ref`s. A build, a re-hash, and a catalog with no index or at another version get every row
rewritten. The precomputed n-ary lists (computed in the lake, `spark_jobs.mate.lists`) follow the
index: the lists whose version changed are copied. Posting
lists go in as packed int32 arrays, row super keys as the lake holds them
(`ROW_BLOCK`-row blobs).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import delete, func, select, tuple_
from sqlalchemy.orm import Session

from catalog.core.settings import Settings
from catalog.db.bulk import insert_rows
from catalog.db.engine import open_catalog
from catalog.db.models.base import pack_int32_list_array
from catalog.search.mate.models import MateList, MateMeta, MatePosting, MateRowKeys, MateTable
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.bronze import DATASETS
from spark_jobs.lake.store import LakeStore
from spark_jobs.mate import update
from spark_jobs.mate.lists import pending_lists
from spark_jobs.mate.tables import LAKE_ONLY, LISTS_SCHEMA, MATE_LISTS, MATE_POSTINGS, MATE_ROW_KEYS, MateState
from spark_jobs.mate.update import read_state

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

_CHUNK = 500  # ids per DELETE ... IN (...)
_BATCH_ROWS = 20_000


def publish_mate(session: Session, store: LakeStore, batch: ChangeBatch | None = None) -> dict[str, int]:
    """Bring the catalog's MATE tables to the lake's state (a publisher)."""
    state = read_state(store)
    if state is None:
        return {"mate_index_version": 0}
    meta = dict(session.execute(select(MateMeta.key, MateMeta.value)).tuples().all())
    have = int(meta["index_version"]) if "index_version" in meta else None
    if have == state.index_version:
        return {"mate_index_version": state.index_version, "mate_tables_written": 0}
    alike = meta.get("spec") == _spec_json(state) and have == state.base_version and not state.full
    if batch is not None and alike:
        _delete_tables(session, sorted(batch.touched))
        written = _insert_tables(session, store, sorted(batch.added))
    elif batch is None and alike:
        written = 0  # a rebuild that changed nothing
    else:
        for model in (MatePosting, MateRowKeys, MateTable):
            session.execute(delete(model))
        written = _insert_tables(session, store, None)
    _write_meta(session, state)
    lists = _sync_lists(session, store)
    log.info(
        "mate published",
        extra={"from_version": have, "to_version": state.index_version, "tables": written, **lists},
    )
    return {"mate_index_version": state.index_version, "mate_tables_written": written, **lists}


def backlog_due(spark: SparkSession | None, settings: Settings) -> bool:
    """Whether the backlog has work: lists left pending in the lake, or a backlog run's lists the
    catalog lacks."""
    store = LakeStore(settings.lake, spark)
    return (
        read_state(store) is not None
        and store.exists(MATE_LISTS)
        and (pending_lists(store) or _behind(settings, store))
    )


def work_backlog(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    """The lists left pending, unless the catalog lacks the last backlog run's (a run killed between
    its commit and its publish): then the publish that follows is all there is to do, so that a
    rerun ends where a run that was never killed ends."""
    if _behind(settings, LakeStore(settings.lake, spark)):
        return {"mode": "publish"}
    return update.work_backlog(spark, settings)


def _behind(settings: Settings, store: LakeStore) -> bool:
    state = read_state(store)
    with open_catalog(settings.catalog_url).connect() as conn:
        have = conn.execute(select(MateMeta.value).where(MateMeta.key == "index_version")).scalar()
    return state is not None and (have is None or int(have) != state.index_version)


def _sync_lists(session: Session, store: LakeStore) -> dict[str, int]:
    """Copy the lake's n-ary lists whose version differs from the catalog's (by their rank-0
    markers) and delete the catalog's lists the lake no longer holds. A list is small (at most
    LIST_K + 1 rows), and a batch changes few of them."""
    if not store.exists(MATE_LISTS):
        return {}
    lake = store.read_arrow(MATE_LISTS, columns=[n for n in LISTS_SCHEMA.names if n not in LAKE_ONLY])
    markers = lake.filter(pc.equal(lake.column("rank"), 0)).select(["table_id", "key", "version"]).to_pylist()
    wanted = {(m["table_id"], m["key"]): m["version"] for m in markers}
    marker_rows = select(MateList.table_id, MateList.key, MateList.version).where(MateList.rank == 0)
    have = {(t, k): v for t, k, v in session.execute(marker_rows).tuples()}
    stale = sorted(listed for listed, v in have.items() if wanted.get(listed) != v)
    for i in range(0, len(stale), _CHUNK):
        session.execute(delete(MateList).where(tuple_(MateList.table_id, MateList.key).in_(stale[i : i + _CHUNK])))
    copied = {listed for listed, v in wanted.items() if have.get(listed) != v}
    rows = (r for r in lake.to_pylist() if (r["table_id"], r["key"]) in copied)
    insert_rows(session, MateList, rows)
    return {"mate_lists_published": len(copied), "mate_lists_deleted": len(set(stale) - copied)}


def _spec_json(state: MateState) -> str:
    return json.dumps(state.spec.as_dict(), sort_keys=True)


def _delete_tables(session: Session, table_ids: Sequence[str]) -> None:
    for i in range(0, len(table_ids), _CHUNK):
        chunk = table_ids[i : i + _CHUNK]
        refs = select(MateTable.table_ref).where(MateTable.table_id.in_(chunk))
        session.execute(delete(MatePosting).where(MatePosting.table_ref.in_(refs)))
        session.execute(delete(MateRowKeys).where(MateRowKeys.table_ref.in_(refs)))
        session.execute(delete(MateTable).where(MateTable.table_id.in_(chunk)))


def _insert_tables(session: Session, store: LakeStore, table_ids: list[str] | None) -> int:
    """Insert these tables (all when None) under fresh table_refs; returns how many."""
    if table_ids == []:
        return 0
    where = None if table_ids is None else {"table_id": table_ids}
    datasets = store.read_arrow(DATASETS, columns=["table_id", "headers", "n_rows"], where=where).to_pylist()
    start = (session.execute(select(func.max(MateTable.table_ref))).scalar() or 0) + 1
    refs = {d["table_id"]: start + i for i, d in enumerate(sorted(datasets, key=lambda d: d["table_id"]))}
    insert_rows(
        session,
        MateTable,
        (
            {
                "table_ref": refs[d["table_id"]],
                "table_id": d["table_id"],
                "headers": json.dumps(d["headers"]),
                "n_rows": d["n_rows"],
            }
            for d in datasets
        ),
    )
    postings = store.read_arrow(MATE_POSTINGS, columns=["table_id", "token", "rows", "cols"], where=where)
    for b in postings.to_batches(max_chunksize=_BATCH_ROWS):
        insert_rows(session, MatePosting, _posting_rows(b, refs))
    keys = store.read_arrow(MATE_ROW_KEYS, columns=["table_id", "block", "keys"], where=where)
    for b in keys.to_batches(max_chunksize=_BATCH_ROWS):
        insert_rows(session, MateRowKeys, _key_rows(b, refs))
    return len(datasets)


def _posting_rows(batch: pa.RecordBatch, refs: dict[str, int]) -> Iterator[dict[str, Any]]:
    lengths = np.diff(batch.column("rows").offsets.to_numpy()).tolist()
    packed_rows = pack_int32_list_array(batch.column("rows"))
    packed_cols = pack_int32_list_array(batch.column("cols"))
    for table_id, token, n, r, c in zip(
        batch.column("table_id").to_pylist(),
        batch.column("token").to_pylist(),
        lengths,
        packed_rows,
        packed_cols,
        strict=True,
    ):
        yield {"token": token, "table_ref": refs[table_id], "n": n, "rows": r, "cols": c}


def _key_rows(batch: pa.RecordBatch, refs: dict[str, int]) -> Iterator[dict[str, Any]]:
    columns = [batch.column(name).to_pylist() for name in ("table_id", "block", "keys")]
    for table_id, block, keys in zip(*columns, strict=True):
        yield {"table_ref": refs[table_id], "block": block, "keys": keys}


def _write_meta(session: Session, state: MateState) -> None:
    facts = {"index_version": str(state.index_version), "spec": _spec_json(state), "n_tables": str(state.n_tables)}
    session.execute(delete(MateMeta))
    session.add_all(MateMeta(key=k, value=v) for k, v in facts.items())
    session.flush()
