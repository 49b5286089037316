"""The lake lock's two mechanisms: a file lock beside a local lake, and a PostgreSQL advisory lock for
a lake that is not a local path when the catalog is PostgreSQL (writers on other hosts share it)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

from catalog.core.settings import Settings
from spark_jobs.lake.lock import LakeBusyError, lake_lock, lock_path


def _other_thread_outcome(settings: Settings) -> str:
    out: list[str] = []

    def other() -> None:
        try:
            with lake_lock(settings, "second writer", wait_s=0.5):
                out.append("got it")
        except LakeBusyError as e:
            out.append(str(e))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    return out[0]


def test_a_remote_lake_with_a_postgresql_catalog_is_locked_in_postgresql(settings: Settings, pg_database: str) -> None:
    remote = dataclasses.replace(settings, lake="s3://bucket/some/lake", catalog_url=pg_database)
    with lake_lock(remote, "first writer"):
        outcome = _other_thread_outcome(remote)
        assert outcome.startswith("lake is busy: juncture:first writer (backend ")
        # another lake is another lock
        assert _other_thread_outcome(dataclasses.replace(remote, lake="s3://bucket/other")) == "got it"
    assert _other_thread_outcome(remote) == "got it"  # released with the block
    assert not lock_path(remote).exists()  # no file lock was involved


def test_a_local_lake_is_locked_by_a_file_beside_it(settings: Settings, tmp_path: Path) -> None:
    with lake_lock(settings, "first writer"):
        assert lock_path(settings) == Path(settings.lake) / "_juncture.lock"
        assert "first writer" in lock_path(settings).read_text()
        assert _other_thread_outcome(settings).startswith("lake is busy: first writer (pid ")
    assert _other_thread_outcome(settings) == "got it"


def test_waiting_is_announced_once_and_bounded(settings: Settings) -> None:
    told: list[str] = []
    with lake_lock(settings, "holder"):
        done: list[BaseException] = []

        def waiter() -> None:
            try:
                with lake_lock(settings, "waiter", wait_s=0.6, on_wait=told.append):
                    pass
            except LakeBusyError as e:
                done.append(e)

        t = threading.Thread(target=waiter)
        t.start()
        t.join()
    assert len(told) == 1 and told[0].startswith("holder (pid ")
    assert len(done) == 1 and "gave up after waiting" in str(done[0])
    with pytest.raises(ValueError), lake_lock(settings, "raiser"):  # released when the block raises
        raise ValueError("boom")
    assert _other_thread_outcome(settings) == "got it"
