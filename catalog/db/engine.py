"""Engines and sessions for the catalog database, and schema creation/upgrade on first use.

SQLite (the embedded default) runs in WAL mode so lookups keep reading while a publish writes;
PostgreSQL is used as is. The schema is always brought to Alembic's head before the first query,
so `juncture` works on a fresh home and upgrades an old catalog in place.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from catalog.core.errors import UserError
from catalog.core.registry import families
from catalog.db.migrations import HEAD

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).with_name("migrations")
_ready: set[str] = set()
_lock = threading.Lock()


def version_locations() -> list[str]:
    """The core revisions, then each index family's own (`FamilyEntry.migrations`, a package)."""
    out = [str(MIGRATIONS / "versions")]
    for entry in families():
        if entry.migrations:
            spec = importlib.util.find_spec(entry.migrations)
            if spec is None or not spec.submodule_search_locations:
                raise UserError(f"index family {entry.name!r}: no migrations package {entry.migrations!r}")
            out.append(next(iter(spec.submodule_search_locations)))
    return out


def expected_heads() -> set[str]:
    """The revisions a catalog at head carries: the core head and each family branch's head."""
    return {HEAD} | {e.migration_head for e in families() if e.migration_head}


def alembic_config(url: str | None = None) -> Config:
    from alembic.config import Config  # deferred: a lookup on a catalog at head never loads Alembic

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("version_path_separator", "os")
    cfg.set_main_option("version_locations", os.pathsep.join(version_locations()))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for `url`; SQLite gets WAL, foreign keys and a busy timeout."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if parsed.get_backend_name() == "postgresql":
        kwargs.setdefault("pool_pre_ping", True)
        return create_engine(url, **kwargs)
    raise UserError(f"catalog_url: unsupported database {parsed.get_backend_name()!r} (use sqlite or postgresql)")


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def head_revisions() -> set[str]:
    """The newest migrations, as Alembic computes them from the scripts (slow: parses every script)."""
    from alembic.script import ScriptDirectory  # deferred: see alembic_config

    return set(ScriptDirectory.from_config(alembic_config()).get_heads())


def current_revisions(engine: Engine) -> set[str]:
    """The schema's revisions, read directly so that a lookup at head never imports Alembic."""
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return set()
        return set(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())


def upgrade_schema(engine: Engine) -> None:
    """Create or upgrade the catalog schema to head (idempotent, cheap when already at head)."""
    key = engine.url.render_as_string(hide_password=False)
    with _lock:
        if key in _ready:
            return
        if current_revisions(engine) != expected_heads():
            from alembic import command  # deferred: see alembic_config

            log.info("catalog schema upgrade", extra={"url": engine.url.render_as_string(hide_password=True)})
            cfg = alembic_config()
            with engine.begin() as conn:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "heads")
        _ready.add(key)


def open_catalog(url: str) -> Engine:
    """An engine on an up-to-date catalog: the one call entry points make before touching it."""
    engine = make_engine(url)
    upgrade_schema(engine)
    return engine


def open_reader(url: str) -> Engine:
    """An engine that serves lookups, each ONE SELECT. It runs in autocommit, which saves the
    BEGIN and ROLLBACK round trips around every lookup (a single statement still reads one
    snapshot), and PostgreSQL connections are not pinged on checkout: after a server restart the
    first lookup on a dead connection fails (the API answers 503), SQLAlchemy then discards the
    whole pool, and the next lookups reconnect. (The schema upgrade runs first on an ordinary
    engine, in a transaction.)"""
    open_catalog(url).dispose()
    return make_engine(url, pool_pre_ping=False, isolation_level="AUTOCOMMIT")


@contextmanager
def one_snapshot(conn: Connection) -> Iterator[Connection]:
    """Several reads on an `open_reader` connection (autocommit) from one snapshot of the database,
    as an online search needs: its dictionary, posting lists and sets must all be of the index
    version it started on, even while a publish commits. A read-only transaction, rolled back."""
    begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" if conn.dialect.name == "postgresql" else "BEGIN"
    conn.exec_driver_sql(begin)
    try:
        yield conn
    finally:
        if not conn.invalidated:
            conn.exec_driver_sql("ROLLBACK")


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A session whose work is committed on success and rolled back on any error."""
    factory = sessionmaker(bind=engine, expire_on_commit=False)
    with factory() as session, session.begin():
        yield session
