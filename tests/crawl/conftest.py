"""Fixtures for the crawl tests: a real local portal on loopback, fast-retrying crawl settings, and
readers of bronze that tests compare against plain-Python oracles."""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from catalog.core.settings import CrawlSettings, Settings, SourceConfig
from plugins.local_portal import PortalHandle, serve_in_background
from spark_jobs.lake.store import LakeStore
from tests.conftest import make_settings

FAST_CRAWL = CrawlSettings(
    timeout_s=4.0,
    max_retries=3,
    backoff_base_s=0.001,
    backoff_max_s=0.01,
    requests_per_second=1000.0,
    max_download_bytes=16 * 1024 * 1024,
    max_cell_bytes=64 * 1024,
    max_retry_after_s=0.01,
    max_decompressed_bytes=16 * 1024 * 1024,
    page_size=3,
)


@pytest.fixture
def portal(tmp_path: Path) -> Iterator[PortalHandle]:
    handle = serve_in_background(tmp_path / "portal")
    yield handle
    handle.stop()


def crawl_settings(home: Path, portal: PortalHandle | None = None, **crawl: object) -> Settings:
    sources = ()
    if portal is not None:
        sources = (
            SourceConfig(name="soc", kind="socrata", url=portal.url),
            SourceConfig(name="ck", kind="ckan", url=portal.url),
        )
    return make_settings(home, crawl=dataclasses.replace(FAST_CRAWL, **crawl), sources=sources)


def csv_bytes(rows: list[list[str]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def oracle_cells(data: bytes) -> tuple[list[str], set[tuple[int, int, str | None]]]:
    """Headers and (row, col, value) of a well-formed UTF-8 CSV, read by Python's csv module."""
    rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"))))
    return rows[0], {(r, c, v or None) for r, row in enumerate(rows[1:]) for c, v in enumerate(row, start=1)}


def bronze(settings: Settings) -> tuple[list[dict], list[tuple]]:
    """(datasets rows without landed_at, sorted) and (cells, sorted): the state a crawl leaves."""
    store = LakeStore(settings.lake)
    if not store.exists("datasets"):
        return [], []
    ds = [{k: v for k, v in r.items() if k != "landed_at"} for r in store.read_arrow("datasets").to_pylist()]
    cells = store.read_arrow("cells").to_pylist()
    return (
        sorted(ds, key=lambda r: r["table_id"]),
        sorted((c["table_id"], c["bucket"], c["row"], c["col"], c["value"] or "") for c in cells),
    )


def table_cells(settings: Settings, table_id: str) -> set[tuple[int, int, str | None]]:
    cells = LakeStore(settings.lake).read_arrow("cells", where={"table_id": [table_id]}).to_pylist()
    return {(c["row"], c["col"], c["value"]) for c in cells}


def changes_of(settings: Settings, batch_id: int) -> tuple[set[str], set[str]]:
    rows = LakeStore(settings.lake).read_arrow("changes", where={"batch_id": [batch_id]}).to_pylist()
    return ({r["table_id"] for r in rows if r["op"] == "ADD"}, {r["table_id"] for r in rows if r["op"] == "DELETE"})
