"""The toy family's pipeline half: each column's distinct tokens as one lake row, kept per batch."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import delete, insert
from sqlalchemy.orm import Session

from catalog.core.settings import Settings
from spark_jobs.family import IndexFamily
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.commit_point import UnitSpec, applied_batch, batch_store, begin, commit
from spark_jobs.lake.store import LakeStore
from spark_jobs.profile.tokens import COLUMN_TOKENS
from tests.registry.toy.models import ToyColumn

TOY_COLUMNS = "toy_columns"
TOY = UnitSpec("toy", (TOY_COLUMNS,))
SCHEMA = pa.schema([("column_id", pa.string()), ("table_id", pa.string()), ("tokens", pa.list_(pa.string()))])


def _columns(store: LakeStore, table_ids: list[str] | None) -> pa.Table:
    if not store.exists(COLUMN_TOKENS) or table_ids == []:
        return SCHEMA.empty_table()
    where = None if table_ids is None else {"table_id": table_ids}
    tokens = store.read_arrow(COLUMN_TOKENS, columns=["table_id", "column_id", "token"], where=where)
    grouped = tokens.group_by(["column_id", "table_id"]).aggregate([("token", "list")])
    return grouped.rename_columns(["column_id", "table_id", "tokens"]).select(SCHEMA.names).cast(SCHEMA)


def update(spark: Any, settings: Settings, batch: ChangeBatch) -> dict[str, Any]:
    store = batch_store(settings.lake, spark, batch.batch_id)
    if applied_batch(store, TOY) >= batch.batch_id:
        return {"mode": "skipped"}
    base = begin(store, TOY)
    store.overwrite_where(
        TOY_COLUMNS, _columns(store, list(batch.added)), column="table_id", values=list(batch.touched)
    )
    commit(store, TOY, base, batch_id=batch.batch_id, kind="update", state={"rebuilds": base.state.get("rebuilds", 0)})
    return {"mode": "update"}


def rebuild(spark: Any, settings: Settings) -> dict[str, Any]:
    store = LakeStore(settings.lake, spark)
    base = begin(store, TOY)
    store.overwrite(TOY_COLUMNS, _columns(store, None))
    rebuilds = int(base.state.get("rebuilds", 0)) + 1
    commit(store, TOY, base, batch_id=base.batch_id, kind="rebuild", state={"rebuilds": rebuilds})
    return {"mode": "rebuild", "rebuilds": rebuilds}


def rebuild_due(spark: Any, settings: Settings) -> bool:
    return bool(settings.index.family("toy").rebuild_always)


def publish(session: Session, store: LakeStore, batch: ChangeBatch | None) -> dict[str, int]:
    if not store.exists(TOY_COLUMNS):
        return {"toy_columns": 0}
    rows = store.read_arrow(TOY_COLUMNS)
    if batch is None:
        session.execute(delete(ToyColumn))
    else:
        session.execute(delete(ToyColumn).where(ToyColumn.table_id.in_(list(batch.touched))))
        rows = rows.filter(pc.is_in(rows["table_id"], pa.array(list(batch.added), pa.string())))
    values = [
        {
            "column_id": r["column_id"],
            "table_id": r["table_id"],
            "n_tokens": len(r["tokens"]),
            "tokens": json.dumps(sorted(r["tokens"])),
        }
        for r in rows.to_pylist()
    ]
    if values:
        session.execute(insert(ToyColumn), values)
    return {"toy_columns": len(values)}


FAMILY = IndexFamily(name="toy", unit=TOY, update=update, publish=publish, rebuild=rebuild, rebuild_due=rebuild_due)
