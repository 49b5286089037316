"""The lake's state as the catalog records it: sources and their last publish, recent crawls with
the datasets they could not read (and why), the batches crawled but not yet published, recent
publish runs (failed ones with their message), and each index family's published facts (index
version, dirty share) with when its next rebuild is due.

Read-only, from the catalog database alone (the serving layer never opens the lake): every crawl
records itself there (`spark_jobs.crawl.record`), and a batch is published when a committed
publish run names it. A batch landed by `juncture update` rather than a crawl is not listed as
pending.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection, Table, func, inspect, select

from catalog.core.errors import SettingsError
from catalog.core.settings import Settings
from catalog.db.models import CatalogTable, CrawlFailure, CrawlRun, PublishRun
from catalog.search.family import search_families

_TABLES = cast(Table, CatalogTable.__table__)
_RUNS = cast(Table, PublishRun.__table__)
_CRAWLS = cast(Table, CrawlRun.__table__)
_FAILURES = cast(Table, CrawlFailure.__table__)
RECENT_RUNS = 10
REBUILD_WEEKDAY = 6  # lake_rebuild runs @weekly: Sunday 00:00 UTC (Monday = 0)


@dataclass(frozen=True)
class SourceState:
    source: str | None  # None: tables added with `juncture update --add` (no configured source)
    n_tables: int
    n_rows: int
    last_published_at: str | None
    last_batch_id: str | None


@dataclass(frozen=True)
class RunState:
    run_id: str
    batch_id: str
    kind: str
    status: str  # running | committed | failed
    started_at: str
    finished_at: str | None
    index_version: int
    message: str | None


@dataclass(frozen=True)
class CrawlState:
    run_id: str
    finished_at: str
    sources: list[str]
    listed: int
    new: int
    changed: int
    deleted: int
    unchanged: int
    failed: int
    batch_id: str | None  # None: nothing changed, nothing landed
    published: bool  # its batch has a committed publish run (False for no batch)
    failures: list[tuple[str, str]]  # (dataset, reason)


@dataclass(frozen=True)
class IndexState:
    family: str
    published: bool
    index_version: int | None
    dirty_share: float | None
    dirty_threshold: float | None
    rebuild_due_now: bool  # the dirty share passes the family's threshold
    facts: dict[str, str]


@dataclass(frozen=True)
class LakeState:
    sources: list[SourceState]
    runs: list[RunState]
    indexes: list[IndexState]
    crawls: list[CrawlState]
    pending_batches: list[str]  # landed by a crawl, not published yet, oldest first
    next_scheduled_rebuild: str  # the weekly lake_rebuild run


def _iso(value: Any) -> str | None:
    return None if value is None else value.isoformat() if isinstance(value, dt.datetime) else str(value)


def source_states(conn: Connection) -> list[SourceState]:
    statement = (
        select(
            _TABLES.c.source_name,
            func.count(),
            func.coalesce(func.sum(_TABLES.c.n_rows), 0),
            func.max(_TABLES.c.published_at),
            func.max(_TABLES.c.batch_id),
        )
        .group_by(_TABLES.c.source_name)
        .order_by(_TABLES.c.source_name)
    )
    return [SourceState(r[0], int(r[1]), int(r[2]), _iso(r[3]), r[4]) for r in conn.execute(statement)]


def recent_runs(conn: Connection, limit: int = RECENT_RUNS) -> list[RunState]:
    statement = select(_RUNS).order_by(_RUNS.c.started_at.desc(), _RUNS.c.run_id).limit(limit)
    return [
        RunState(
            r.run_id,
            r.batch_id,
            r.kind,
            r.status,
            _iso(r.started_at) or "",
            _iso(r.finished_at),
            r.index_version,
            r.message,
        )
        for r in conn.execute(statement)
    ]


def _published_batches(conn: Connection) -> Any:
    return select(_RUNS.c.batch_id).where(_RUNS.c.status == "committed")


def recent_crawls(conn: Connection, limit: int = RECENT_RUNS) -> list[CrawlState]:
    """The last crawls, newest first, each with the datasets it could not read."""
    published = _published_batches(conn)
    statement = (
        select(_CRAWLS, _CRAWLS.c.batch_id.in_(published).label("published"))
        .order_by(_CRAWLS.c.finished_at.desc(), _CRAWLS.c.run_id)
        .limit(limit)
    )
    runs = conn.execute(statement).all()
    failures: dict[str, list[tuple[str, str]]] = {r.run_id: [] for r in runs}
    if runs:
        rows = conn.execute(
            select(_FAILURES.c.run_id, _FAILURES.c.dataset, _FAILURES.c.reason)
            .where(_FAILURES.c.run_id.in_(list(failures)))
            .order_by(_FAILURES.c.run_id, _FAILURES.c.position)
        )
        for run_id, dataset, reason in rows:
            failures[run_id].append((dataset, reason))
    return [
        CrawlState(
            r.run_id,
            _iso(r.finished_at) or "",
            list(r.sources or []),
            r.listed,
            r.new,
            r.changed,
            r.deleted,
            r.unchanged,
            r.failed,
            r.batch_id,
            bool(r.published),
            failures[r.run_id],
        )
        for r in runs
    ]


def pending_batches(conn: Connection) -> list[str]:
    """Batches crawls landed that no committed publish run names yet (the next `juncture index`)."""
    statement = (
        select(_CRAWLS.c.batch_id)
        .where(_CRAWLS.c.batch_id.is_not(None), _CRAWLS.c.batch_id.not_in(_published_batches(conn)))
        .order_by(_CRAWLS.c.finished_at)
    )
    return [str(b) for b in conn.execute(statement).scalars()]


def _meta_table(models: tuple[type, ...]) -> Table | None:
    """A family's key/value facts table (`<family>_meta`), if it has one."""
    for model in models:
        table = cast(Table, getattr(model, "__table__", None))
        if table is not None and table.name.endswith("_meta") and {"key", "value"} <= set(table.c.keys()):
            return table
    return None


def index_states(conn: Connection, settings: Settings) -> list[IndexState]:
    present = set(inspect(conn).get_table_names())
    out = []
    for family in search_families():
        meta = _meta_table(family.models)
        facts: dict[str, str] = {}
        if meta is not None and meta.name in present:
            facts = {r.key: r.value for r in conn.execute(select(meta.c.key, meta.c.value))}
        threshold = getattr(_family_settings(settings, family.name), "dirty_threshold", None)
        dirty = float(facts["dirty_share"]) if "dirty_share" in facts else None
        version = int(facts["index_version"]) if "index_version" in facts else None
        due = dirty is not None and threshold is not None and dirty > threshold
        shown = {k: v for k, v in facts.items() if len(v) <= 200}  # specs and partition bounds stay out
        out.append(IndexState(family.name, bool(facts), version, dirty, threshold, due, shown))
    return out


def _family_settings(settings: Settings, name: str) -> Any:
    try:
        return settings.index.family(name)
    except (KeyError, SettingsError):  # a family without settings of its own
        return None


def next_weekly_rebuild(now: dt.datetime) -> dt.datetime:
    """The next `@weekly` run after `now`: Sunday 00:00 UTC."""
    midnight = now.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    days = (REBUILD_WEEKDAY - midnight.weekday()) % 7 or 7
    return midnight + dt.timedelta(days=days)


def lake_state(conn: Connection, settings: Settings, now: dt.datetime | None = None) -> LakeState:
    when = next_weekly_rebuild(now or dt.datetime.now(dt.UTC))
    return LakeState(
        source_states(conn),
        recent_runs(conn),
        index_states(conn, settings),
        recent_crawls(conn),
        pending_batches(conn),
        when.isoformat(),
    )
