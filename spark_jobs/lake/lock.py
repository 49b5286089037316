"""The lake lock: one writer at a time, whatever started it (a CLI command or a DAG task).

Every entry point that writes the lake (crawl landing, index, update, rebuild, each DAG task that
writes) holds this lock for its writes; readers never take it. A second writer waits up to
`settings.lock_wait_s`, saying who holds the lock, then gives up with `LakeBusyError` (the CLI
prints one line and exits 2; a DAG task fails and Airflow retries it).

* A lake on a local path is locked with an OS file lock (`flock`) on `<lake>/_juncture.lock`; the
  kernel releases it when the holder dies, even by SIGKILL, so a killed writer never leaves a stale
  lock. The file also records who holds it, for the message.
* A lake that is not a local path (object storage shared by several hosts) cannot be locked by a
  file; with a PostgreSQL catalog the lock is a session-level PostgreSQL advisory lock keyed by the
  lake's URI, which every host that writes the lake shares, and which PostgreSQL releases when the
  holder's connection drops. With a SQLite catalog such a lake is locked per host only (the file
  lock under the home), which the README states.

The lock is re-entrant within a thread: `juncture update` locks, then lands a crawl that locks too.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

from catalog.core.errors import UserError
from catalog.core.settings import Settings

log = logging.getLogger(__name__)

LOCK_FILE = "_juncture.lock"
_POLL_S = 0.25
_held = threading.local()


class LakeBusyError(UserError):
    """Another writer holds the lake lock and did not release it within the wait."""

    def __init__(self, lake: str, holder: str, waited_s: float) -> None:
        super().__init__(
            f"lake is busy: {holder} holds the lake lock of {lake}; "
            f"gave up after waiting {waited_s:.0f}s (setting lock_wait_s)"
        )
        self.lake, self.holder, self.waited_s = lake, holder, waited_s


def lock_path(settings: Settings) -> Path:
    """The lock file: in the lake folder when the lake is a local path, else under the home."""
    base = Path(settings.lake) if "://" not in settings.lake else Path(settings.home)
    return base / LOCK_FILE


def _holder_text(raw: str) -> str:
    try:
        info = json.loads(raw)
    except ValueError:
        return "another writer"
    return (
        f"{info.get('owner', '?')} (pid {info.get('pid', '?')} on {info.get('host', '?')}, "
        f"since {info.get('since', '?')})"
    )


def _me(owner: str) -> str:
    return json.dumps(
        {
            "owner": owner,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
    )


@contextlib.contextmanager
def lake_lock(
    settings: Settings, owner: str, *, wait_s: float | None = None, on_wait: Callable[[str], None] | None = None
) -> Iterator[None]:
    """Hold the lake's write lock for the block. `on_wait(holder)` is called once if it must wait."""
    depth = getattr(_held, "depth", {})
    _held.depth = depth
    key = settings.lake
    if depth.get(key):
        depth[key] += 1
        try:
            yield
        finally:
            depth[key] -= 1
        return
    wait_s = settings.lock_wait_s if wait_s is None else wait_s
    remote_pg = "://" in settings.lake and settings.catalog_url.startswith("postgresql")
    acquire = _pg_lock if remote_pg else _file_lock
    with acquire(settings, owner, wait_s, on_wait):
        depth[key] = 1
        log.info("lake lock taken", extra={"owner": owner})
        try:
            yield
        finally:
            depth[key] = 0


@contextlib.contextmanager
def _file_lock(settings: Settings, owner: str, wait_s: float, on_wait: Callable[[str], None] | None) -> Iterator[None]:
    path = lock_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _wait(
            lambda: _try_flock(fd),
            lambda: _holder_text(os.pread(fd, 4096, 0).decode("utf-8", "replace")),
            settings.lake,
            wait_s,
            on_wait,
        )
        os.ftruncate(fd, 0)
        os.pwrite(fd, _me(owner).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextlib.contextmanager
def _pg_lock(settings: Settings, owner: str, wait_s: float, on_wait: Callable[[str], None] | None) -> Iterator[None]:
    import psycopg  # deferred: only a remote lake with a PostgreSQL catalog needs it

    key = zlib.crc32(settings.lake.encode()) & 0x7FFFFFFF
    conninfo = settings.catalog_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(conninfo, autocommit=True, application_name=f"juncture:{owner}"[:63]) as conn:

        def holder() -> str:
            row = conn.execute(
                "SELECT a.application_name, a.client_addr::text, a.pid, a.backend_start::text FROM pg_locks l "
                "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.objid = %s "
                "AND l.granted LIMIT 1",
                (key,),
            ).fetchone()
            return "another writer" if row is None else f"{row[0]} (backend {row[2]} from {row[1]}, since {row[3]})"

        _wait(
            lambda: bool(conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]),  # type: ignore[index]
            holder,
            settings.lake,
            wait_s,
            on_wait,
        )
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


def _wait(
    try_lock: Callable[[], bool],
    holder: Callable[[], str],
    lake: str,
    wait_s: float,
    on_wait: Callable[[str], None] | None,
) -> None:
    start = time.monotonic()
    told = False
    while not try_lock():
        waited = time.monotonic() - start
        if waited >= wait_s:
            raise LakeBusyError(lake, holder(), waited)
        if not told:
            told = True
            who = holder()
            log.warning("waiting for the lake lock", extra={"holder": who, "wait_s": wait_s})
            if on_wait is not None:
                on_wait(who)
        time.sleep(_POLL_S)
