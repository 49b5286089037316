"""Publish a change batch from the lake into the catalog database, in one transaction.

The lake is read as it was right after the batch (`commit_point.at_batch`): every unit at the
manifest that includes this batch and no later one. So a batch published late, after later batches
or a rebuild were applied in the lake, still publishes its own committed state.

Each concept contributes a *publisher*: a function `(session, store, batch) -> counts` that removes
what the batch's touched tables had in the catalog and inserts their new state. They all run inside
one database transaction together with the `publish_runs` row, so a reader sees the whole batch or
none of it, and a batch already committed is skipped (re-publishing is a no-op).

Atomicity, as readers see it: the catalog only ever changes by this one transaction, so a reader
sees the state before or after a batch; each lookup in `catalog.lookup` is a single SELECT (one
snapshot on SQLite WAL and on PostgreSQL READ COMMITTED alike). A publish killed anywhere leaves no
trace (the transaction is rolled back, or never committed if the process dies), and running it again
publishes the batch. Publishers serialize on a lock taken first thing in the transaction.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from catalog.core.logs import log_context
from catalog.core.settings import Settings
from catalog.db.engine import open_catalog, session_scope
from catalog.db.models import CatalogColumn, CatalogTable, PublishRun
from spark_jobs.autojoin.publish import transform_lists_publisher
from spark_jobs.family import Publisher, pipeline_families
from spark_jobs.lake import faults
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.bronze import DATASETS
from spark_jobs.lake.commit_point import at_batch
from spark_jobs.lake.store import LakeStore
from spark_jobs.publish.profiles import publish_keys, publish_profiles
from spark_jobs.publish.relations import publish_all_relations, publish_joinable, publish_unionable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

APP_ID = "publish_catalog"
PUBLISH_LOCK_KEY = 0x4A554E43  # "JUNC": the advisory lock every publisher takes on PostgreSQL


def publish_tables(session: Session, store: LakeStore, batch: ChangeBatch) -> dict[str, int]:
    """Tables and columns: the touched tables are deleted (cascading to columns, profiles, keys)
    and the added ones inserted from bronze `datasets`."""
    touched = list(batch.touched)
    for chunk in _chunks(touched):
        session.execute(delete(CatalogTable).where(CatalogTable.table_id.in_(chunk)))
    rows = store.read_arrow(DATASETS, where={"table_id": list(batch.added)}) if batch.added else None
    n_columns = 0
    now = dt.datetime.now(dt.UTC)
    for r in rows.to_pylist() if rows is not None else []:
        session.add(
            CatalogTable(
                table_id=r["table_id"],
                source_name=r["source"] or None,
                name=r["name"],
                title=r["title"],
                format=r["format"],
                n_rows=r["n_rows"],
                n_columns=r["n_columns"],
                content_sha256=r["content_sha256"],
                source_updated_at=r["source_updated_at"],
                batch_id=str(batch.batch_id),
                index_version=batch.batch_id,
                published_at=now,
            )
        )
        portal_types = r["portal_types"] or [None] * len(r["headers"])
        for pos, (header, ptype) in enumerate(zip(r["headers"], portal_types, strict=False), start=1):
            session.add(
                CatalogColumn(
                    column_id=f"{r['table_id']}#{header}",
                    table_id=r["table_id"],
                    position=pos,
                    header=header,
                    portal_type=ptype,
                )
            )
            n_columns += 1
    session.flush()
    return {"n_tables_removed": len(touched), "n_tables": 0 if rows is None else rows.num_rows, "n_columns": n_columns}


def batch_publishers(settings: Settings) -> list[Publisher]:
    """The publishers of a batch, in order: tables, profiles, keys, each index family, the lists
    (the transformation lists last: they read the tables and columns just published)."""
    return [
        publish_tables,
        publish_profiles,
        publish_keys,
        *(f.publish for f in pipeline_families()),
        publish_joinable,
        publish_unionable,
        transform_lists_publisher(settings),
    ]


def run(
    spark: SparkSession | None, settings: Settings, batch: ChangeBatch, publishers: Sequence[Publisher] | None = None
) -> dict[str, Any]:
    """Publish `batch`; returns the counts, or `{"skipped": True}` if it was already published."""
    store = at_batch(LakeStore(settings.lake, spark), batch.batch_id)
    engine = open_catalog(settings.catalog_url)
    run_id = f"{APP_ID}-{batch.batch_id}"
    with log_context(batch_id=batch.batch_id), session_scope(engine) as session:
        _lock_publish(session, run_id)
        done = session.scalar(select(PublishRun).where(PublishRun.run_id == run_id, PublishRun.status == "committed"))
        if done is not None:
            log.info("batch already published")
            return {"skipped": True, **(done.counts or {})}
        counts: dict[str, Any] = {}
        started = dt.datetime.now(dt.UTC)
        seconds: dict[str, float] = {}
        for publisher in publishers or batch_publishers(settings):
            t0 = time.perf_counter()
            counts.update(publisher(session, store, batch))
            seconds[_publisher_name(publisher)] = round(time.perf_counter() - t0, 3)
        counts["seconds"] = seconds  # what each publisher cost: the stage report's breakdown
        session.merge(
            PublishRun(
                run_id=run_id,
                batch_id=str(batch.batch_id),
                kind="batch",
                status="committed",
                started_at=started,
                finished_at=dt.datetime.now(dt.UTC),
                counts=counts,
                index_version=batch.batch_id,
            )
        )
        faults.checkpoint("publish:batch")
        log.info("batch published", extra=counts)
    return counts


def publish_rebuilt(settings: Settings, spark: SparkSession | None = None) -> dict[str, int]:
    """After a rebuild: every family's index and every joinable/unionable list as the lake holds
    them now, in one catalog transaction (serialized with batch publishes)."""
    return _publish_lake(settings, spark, "rebuild", relations=True, transform_lists=True)


def publish_backlog(settings: Settings, spark: SparkSession | None, *, transform_lists: bool) -> dict[str, int]:
    """After the backlog (`spark_jobs.orchestration.backlog`), with every batch published: the
    families' indexes as the lake holds them (each publisher skips an index the catalog holds
    already) and, with `transform_lists`, the pending transformation lists learned."""
    return _publish_lake(settings, spark, "backlog", relations=False, transform_lists=transform_lists)


def _publish_lake(
    settings: Settings, spark: SparkSession | None, what: str, *, relations: bool, transform_lists: bool
) -> dict[str, int]:
    engine = open_catalog(settings.catalog_url)
    store = LakeStore(settings.lake, spark)
    counts: dict[str, int] = {}
    with session_scope(engine) as session:
        _lock_publish(session, None)
        for family in pipeline_families():
            counts.update(family.publish(session, store, None))
        if relations:
            counts.update(publish_all_relations(session, store))
        if transform_lists:
            counts.update(transform_lists_publisher(settings)(session, store, None))
        faults.checkpoint(f"publish:{what}")
    log.info(f"{what} published", extra=counts)
    return counts


def _lock_publish(session: Session, run_id: str | None) -> None:
    """Make this transaction the only publisher until it ends, before checking what is committed:
    PostgreSQL takes a transaction-scoped advisory lock; SQLite takes its write lock with a first
    write (it has one writer at a time; a deferred transaction that only read first could fail to
    upgrade). Readers are never blocked: WAL on SQLite, MVCC on PostgreSQL."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_advisory_xact_lock(PUBLISH_LOCK_KEY)))
    elif run_id is not None:
        session.execute(delete(PublishRun).where(PublishRun.run_id == run_id, PublishRun.status == "running"))
    else:
        session.execute(delete(PublishRun).where(PublishRun.status == "running"))


def _publisher_name(publisher: Publisher) -> str:
    """`publish_joinable` -> "joinable"; a family's publisher by its module (`spark_jobs.mate.publish`: "mate")."""
    name = getattr(publisher, "__name__", "publisher")
    module = getattr(publisher, "__module__", "")
    if module.startswith("spark_jobs.") and module.endswith(".publish"):
        return module.split(".")[1]
    return name.removeprefix("publish_")


def published_batch_ids(settings: Settings) -> set[int]:
    engine = open_catalog(settings.catalog_url)
    with session_scope(engine) as session:
        rows = session.scalars(
            select(PublishRun.batch_id).where(PublishRun.status == "committed", PublishRun.kind == "batch")
        )
        return {int(b) for b in rows}


def _chunks(items: list[str], size: int = 500) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


__all__ = ["Publisher", "batch_publishers", "publish_rebuilt", "publish_tables", "published_batch_ids", "run"]
