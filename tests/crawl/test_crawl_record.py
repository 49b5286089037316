"""Every crawl is recorded in the catalog, on both databases: what it found, the datasets it could
not read with the reason, and its batch, pending until a publish commits it; the state page shows
them (escaped) and the next `juncture index` clears the pending batch."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from catalog.api.app import create_app
from catalog.cli.main import main
from catalog.core.settings import load_settings
from catalog.db.engine import open_catalog
from catalog.lake_state import pending_batches, recent_crawls
from tests.conftest import cli_home

pytestmark = pytest.mark.slow  # one `juncture index` per database


def test_crawls_their_failures_and_pending_batches_are_recorded(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    catalog_url: str,
    spark,  # type: ignore[no-untyped-def]
) -> None:
    home = cli_home(tmp_path, monkeypatch, catalog_url, "[index]\ncells_buckets = 2\n")
    folder = home / "files"
    folder.mkdir(exist_ok=True)
    (folder / "good.csv").write_text("city,n\nberlin,1\nparis,2\n")
    (folder / "empty.csv").write_text("")
    (folder / "<b>bold.csv").write_text("")  # a hostile name: stored as text, shown escaped
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    engine = open_catalog(catalog_url)
    with engine.connect() as conn:
        [crawl] = recent_crawls(conn)
        assert (crawl.listed, crawl.new, crawl.failed) == (3, 1, 2) and crawl.batch_id == "1"
        assert crawl.sources == [f"folder:{folder}"] and not crawl.published
        assert sorted(crawl.failures) == [("file:<b>bold.csv", "empty file"), ("file:empty.csv", "empty file")]
        assert pending_batches(conn) == ["1"]
    page = TestClient(create_app(load_settings())).get("/state").text
    assert "Crawled but not published yet: batch 1" in page and "&lt;b&gt;bold.csv" in page
    assert "<b>bold" not in page

    assert main(["index"]) == 0
    (folder / "empty.csv").write_text("city,n\nrome,3\n")
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    with engine.connect() as conn:
        newest, first = recent_crawls(conn)
        assert first.published and not newest.published and newest.batch_id == "2"
        assert newest.failures == [("file:<b>bold.csv", "empty file")] and newest.new == 1
        assert pending_batches(conn) == ["2"]
    assert main(["index"]) == 0
    with engine.connect() as conn:
        assert pending_batches(conn) == [] and all(c.published for c in recent_crawls(conn))
    engine.dispose()
