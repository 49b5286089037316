"""Publishing relations: one transaction per batch, seen whole or not at all by concurrent lookups
(SQLite WAL and PostgreSQL), a killed publish leaves the old state, a rerun completes it, and
re-publishing is a no-op."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import sessionmaker

from catalog import lookup
from catalog.core.errors import UnknownIdError
from catalog.db.engine import make_engine
from spark_jobs.publish import catalog as publish_catalog
from spark_jobs.publish.relations import publish_joinable, publish_unionable
from tests.relations.lakes import brute_force_joinable, column_sets

ROOT = Path(__file__).resolve().parents[2]
UNKNOWN = "UNKNOWN"


def _queries(two_states) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    tables = two_states.table_ids()
    return (
        [("table", t) for t in tables]
        + [("columns", t) for t in tables]
        + [("unionable", t) for t in tables]
        + [("joinable", c) for c in two_states.column_ids()]
    )


def _answer(sessions: sessionmaker, kind: str, ident: str) -> Any:
    with sessions() as session:
        try:
            if kind == "joinable":
                return lookup.as_dict(lookup.joinable(session, ident, 50))
            if kind == "unionable":
                return lookup.as_dict(lookup.unionable(session, ident, 50))
            return lookup.as_dict(getattr(lookup, kind)(session, ident))
        except UnknownIdError:
            return UNKNOWN


def _state(sessions: sessionmaker, queries: list[tuple[str, str]]) -> dict[tuple[str, str], Any]:
    return {q: _answer(sessions, *q) for q in queries}


class Gate:
    """A publisher that holds the transaction open until every reader has done `reads` lookups
    while it waits: readers provably run in the middle of the publish, with no sleeps."""

    def __init__(self, n_readers: int, reads: int) -> None:
        self.cond = threading.Condition()
        self.open = False
        self.counts = [0] * n_readers
        self.reads = reads

    def publisher(self, session: Any, store: Any, batch: Any) -> dict[str, int]:
        with self.cond:
            self.open = True
            self.counts = [0] * len(self.counts)
            self.cond.notify_all()
            if not self.cond.wait_for(lambda: min(self.counts) >= self.reads, timeout=300):
                raise TimeoutError("readers did not make progress")
            self.open = False
        return {}

    def count(self, reader: int) -> bool:
        """Record one lookup done; True if it ran entirely while the publish was held open."""
        with self.cond:
            if self.open:
                self.counts[reader] += 1
                self.cond.notify_all()
                return True
            return False


def test_concurrent_lookups_see_the_old_or_the_new_state_never_a_mix(two_states, catalog_settings):
    queries = _queries(two_states)
    engine = make_engine(catalog_settings.catalog_url)
    sessions = sessionmaker(bind=engine)
    publish_catalog.run(None, two_states.settings(catalog_settings, two_states.lake_a), two_states.batch_1)
    state_a = _state(sessions, queries)

    n_readers, gate = 4, Gate(4, reads=len(queries))
    seen: list[list[tuple[tuple[str, str], Any, bool]]] = [[] for _ in range(n_readers)]
    done = threading.Event()
    errors: list[BaseException] = []

    def reader(i: int) -> None:
        try:
            j = i
            while not done.is_set():
                q = queries[j % len(queries)]
                j += 1
                with gate.cond:
                    was_open = gate.open
                ans = _answer(sessions, *q)
                seen[i].append((q, ans, was_open and gate.count(i)))
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(n_readers)]
    for t in threads:
        t.start()
    try:
        publishers = [
            publish_catalog.publish_tables,
            publish_joinable,
            gate.publisher,
            publish_unionable,
            gate.publisher,
        ]
        publish_catalog.run(
            None, two_states.settings(catalog_settings, two_states.lake_b), two_states.batch_2, publishers=publishers
        )
    finally:
        done.set()
        for t in threads:
            t.join()
    assert not errors
    state_b = _state(sessions, queries)
    assert sum(state_a[q] != state_b[q] for q in queries) > len(queries) // 4  # the two states differ a lot
    n_during = 0
    for answers in seen:
        for q, ans, during in answers:
            assert ans in (state_a[q], state_b[q]), q
            if during:
                n_during += 1
                assert ans == state_a[q], q  # uncommitted work is never visible
    assert n_during >= 2 * n_readers * len(queries)  # both gates were held while every reader read
    engine.dispose()


def test_publisher_failing_midway_leaves_the_old_state_and_a_rerun_completes(two_states, catalog_settings):
    queries = _queries(two_states)
    engine = make_engine(catalog_settings.catalog_url)
    sessions = sessionmaker(bind=engine)
    settings_b = two_states.settings(catalog_settings, two_states.lake_b)
    publish_catalog.run(None, two_states.settings(catalog_settings, two_states.lake_a), two_states.batch_1)
    state_a = _state(sessions, queries)

    def boom(session: Any, store: Any, batch: Any) -> dict[str, int]:
        raise RuntimeError("publisher died")

    with pytest.raises(RuntimeError, match="publisher died"):
        publish_catalog.run(
            None,
            settings_b,
            two_states.batch_2,
            publishers=[publish_catalog.publish_tables, publish_joinable, boom, publish_unionable],
        )
    assert _state(sessions, queries) == state_a
    counts = publish_catalog.run(None, settings_b, two_states.batch_2)
    assert counts.get("n_joinable_lists", 0) > 0
    state_b = _state(sessions, queries)
    assert state_b != state_a
    _assert_joinable_is_brute_force(sessions, two_states, catalog_settings)
    # re-publishing is a no-op
    assert publish_catalog.run(None, settings_b, two_states.batch_2)["skipped"] is True
    assert _state(sessions, queries) == state_b
    engine.dispose()


_KILLED_PUBLISH = """
import dataclasses, pathlib, sys, time
from catalog.core.settings import load_settings
from spark_jobs.publish import catalog as publish_catalog
from spark_jobs.lake.batches import load_batch
from spark_jobs.lake.store import LakeStore
from spark_jobs.publish.relations import publish_joinable, publish_unionable

url, lake, batch_id, marker, home = sys.argv[1:6]
settings = dataclasses.replace(load_settings({}, cwd=pathlib.Path(home)), catalog_url=url, lake=lake)

def hang(session, store, batch):
    session.flush()
    pathlib.Path(marker).write_text("inside the transaction")
    while True:
        time.sleep(1)

publish_catalog.run(None, settings, load_batch(LakeStore(lake), int(batch_id)),
                    publishers=[publish_catalog.publish_tables, publish_joinable, publish_unionable, hang])
"""


def test_publish_process_killed_mid_transaction_leaves_the_old_state(two_states, catalog_settings, tmp_path):
    queries = _queries(two_states)
    engine = make_engine(catalog_settings.catalog_url)
    sessions = sessionmaker(bind=engine)
    publish_catalog.run(None, two_states.settings(catalog_settings, two_states.lake_a), two_states.batch_1)
    state_a = _state(sessions, queries)
    marker = tmp_path / "marker"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _KILLED_PUBLISH,
            catalog_settings.catalog_url,
            two_states.lake_b,
            str(two_states.batch_2.batch_id),
            str(marker),
            str(tmp_path),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():  # wait for the child to be inside its transaction
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the publish never reached its last publisher"
            time.sleep(0.05)
        assert _state(sessions, queries) == state_a  # its uncommitted work is invisible
    finally:
        proc.kill()
        proc.wait()
    assert _state(sessions, queries) == state_a
    publish_catalog.run(None, two_states.settings(catalog_settings, two_states.lake_b), two_states.batch_2)
    assert _state(sessions, queries) != state_a
    _assert_joinable_is_brute_force(sessions, two_states, catalog_settings)
    engine.dispose()


def _assert_joinable_is_brute_force(sessions: sessionmaker, two_states, settings) -> None:  # type: ignore[no-untyped-def]
    sets = column_sets(two_states.tables_b)
    expected = brute_force_joinable(sets, settings.index.joinable_k)
    for column_id in sets:
        got = _answer(sessions, "joinable", column_id)
        assert [(a["column_id"], a["overlap"]) for a in got] == expected.get(column_id, []), column_id
