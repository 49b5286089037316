"""Portal ids never become paths (path traversal) and never reach SQL unparameterised; crawled
tables are published to the catalog and deleted ones disappear from lookups."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from sqlalchemy import inspect

from catalog import lookup
from catalog.core.errors import UnknownIdError
from catalog.core.settings import Settings
from catalog.db.engine import open_catalog, session_scope
from plugins.local_portal import PortalHandle
from spark_jobs.crawl.crawl import run_crawl
from spark_jobs.lake.batches import load_batch
from spark_jobs.lake.store import LakeStore
from spark_jobs.orchestration.pipeline import run_batch
from spark_jobs.publish import catalog as publish_catalog
from tests.crawl.conftest import bronze, crawl_settings, csv_bytes

EVIL = ["../../../../tmp/evil", "..", "a/../../b", "x'; DROP TABLE tables; --", "..\\..\\win", "%2e%2e%2fenc"]


def _outside(root: Path, inside: list[Path]) -> set[str]:
    """Every path under `root` that is not one of `inside` or below one of them."""
    return {str(p) for p in root.rglob("*") if not any(d == p or d in p.parents for d in inside)}


def test_hostile_portal_ids_never_become_paths(tmp_path: Path, portal: PortalHandle) -> None:
    # The home sits deep enough that every `..` in EVIL would still land inside tmp_path, where the
    # test can see it (other tests' folders beside tmp_path change on their own: SQLite WAL files).
    home = tmp_path / "d1" / "d2" / "d3" / "d4" / "d5" / "home"
    home.mkdir(parents=True)
    settings = crawl_settings(home, portal)
    inside = [home, tmp_path / "portal"]
    for i, bad in enumerate(EVIL):
        portal.store.add_socrata(bad, csv_bytes([["evil"], [str(i)]]))
        portal.store.add_ckan(bad, [("r", "CSV", csv_bytes([["evil"], [str(i)]]))])
        portal.store.add_ckan(f"ok-{i}", [(bad, "CSV", csv_bytes([["evil"], [str(i)]]))])
    portal.store.add_socrata("good-0001", csv_bytes([["fine"], ["1"]]))
    outside_before = _outside(tmp_path, inside)
    assert not Path("/tmp/evil").exists()

    report = run_crawl(settings)
    assert report.new == 1 and report.failed == 3 * len(EVIL)
    assert all("unsafe or malformed" in reason for _, reason in report.failures)
    assert [r["table_id"] for r in bronze(settings)[0]] == ["socrata:127.0.0.1:good-0001"]
    # nothing was written outside the lake; raw files are named by their hash only
    assert _outside(tmp_path, inside) == outside_before
    assert not Path("/tmp/evil").exists()
    assert not [p for p in tmp_path.rglob("*evil*")]
    files = os.listdir(Path(settings.lake) / "files")
    assert files and all(re.fullmatch(r"[0-9a-f]{64}", f) for f in files)
    # the portal never saw a download request for a hostile id
    assert not [r for r in portal.requests if "/rows.csv" in r and "good-0001" not in r]


def _publish_pending(settings: Settings, batch_id: int) -> None:
    store = LakeStore(settings.lake)
    run_batch(None, settings, load_batch(store, batch_id), stages=[("publish", publish_catalog.run)])


def test_quotes_in_ids_reach_sql_as_parameters_and_deletes_leave_lookups(tmp_path: Path) -> None:
    settings = crawl_settings(tmp_path / "home")
    root = tmp_path / "folder"
    root.mkdir()
    nasty = "o'brien\"; DROP TABLE tables; --.csv"
    (root / nasty).write_bytes(csv_bytes([["name'; --", "v"], ["x'y", "1"]]))
    (root / "plain.csv").write_bytes(csv_bytes([["a"], ["1"]]))
    r1 = run_crawl(settings, folder=str(root))
    assert r1.failures == []
    _publish_pending(settings, r1.batch_id)
    engine = open_catalog(settings.catalog_url)
    tid = f"file:{nasty}"
    with session_scope(engine) as session:
        assert lookup.table(session, tid).n_rows == 1
        assert [c.column for c in lookup.columns(session, tid)] == ["name'; --", "v"]
        assert lookup.table(session, "file:plain.csv").n_columns == 1

    (root / nasty).unlink()
    r2 = run_crawl(settings, folder=str(root))
    assert r2.removed == (tid,)
    _publish_pending(settings, r2.batch_id)
    with session_scope(engine) as session:
        with pytest.raises(UnknownIdError):
            lookup.table(session, tid)
        assert lookup.columns(session, "file:plain.csv")[0].column == "a"
    assert "tables" in inspect(engine).get_table_names()
    assert LakeStore(settings.lake).read_arrow("cells", where={"table_id": [tid]}).num_rows == 0
