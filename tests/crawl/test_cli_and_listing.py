"""`juncture crawl --dir`, `juncture portal serve`, and listing edge cases (paging with ties)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from catalog.cli.main import main
from catalog.core.settings import SourceConfig
from plugins.local_portal import PortalHandle
from plugins.sources.ckan import CkanHook
from plugins.sources.http_client import HttpClient
from plugins.sources.socrata import SocrataHook
from tests.crawl.conftest import FAST_CRAWL, csv_bytes

REPO = Path(__file__).parents[2]


def test_cli_crawl_dir_reports_failures_and_exits_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spark
) -> None:  # type: ignore[no-untyped-def]
    """(`spark`: the tests' session exists before `index` asks for one, so it is the one reused.)"""
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "good.csv").write_bytes(csv_bytes([["a", "b"], ["1", "2"]]))
    (folder / "broken.csv").write_bytes(b"<html><body>404</body></html>")
    (folder / "empty.csv").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    for var in [v for v in __import__("os").environ if v.startswith("JUNCTURE_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("JUNCTURE_HOME", str(tmp_path / "home"))
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "listed 3, new 1, changed 0, deleted 0, unchanged 0, failed 2" in out
    assert "FAILED file:broken.csv: an HTML page" in out and "FAILED file:empty.csv: empty file" in out
    assert main(["crawl", "--dir", str(folder)]) == 0
    assert "nothing to index" in capsys.readouterr().out
    assert main(["crawl", "--dir", str(tmp_path / "nope")]) == 2
    assert main(["crawl", "--source", "nope"]) == 2
    assert main(["index", "--full"]) == 0  # nothing pending: regroup JOSIE, re-relate, publish
    assert "rebuilt josie index version" in capsys.readouterr().out


def test_portal_serve_command(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "juncture"),
            "portal",
            "serve",
            "--port",
            "0",
            "--data",
            str(tmp_path / "p"),
            "--seed",
            "small",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={"PATH": "/usr/bin:/bin", "JUNCTURE_HOME": str(tmp_path / "home")},
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("portal serving 6 datasets"), first
        url = first.rsplit(" at ", 1)[1].strip()
        soc = httpx.get(f"{url}/api/catalog/v1", params={"only": "dataset", "limit": 10}).json()
        assert soc["resultSetSize"] == 3
        ckan = httpx.get(f"{url}/api/3/action/package_search", params={"rows": 100}).json()
        assert ckan["success"] and ckan["result"]["count"] == 3
        res = ckan["result"]["results"][0]["resources"][0]
        assert httpx.get(res["url"]).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_ckan_keyset_paging_with_tied_stamps(portal: PortalHandle) -> None:
    for i in range(8):
        portal.store.add_ckan(f"p{i}", [("r", "CSV", b"a\n1\n"), ("s", "JSON", b"[]"), ("t", "PDF", b"x")])
    with portal.store._lock:  # script a portal where many packages share one stamp
        for i in (1, 2, 3, 4, 5):
            portal.store.datasets[f"ckan/p{i}"]["metadata_modified"] = "2020-01-01T00:00:00+00:00"
    src = SourceConfig(name="ck", kind="ckan", url=portal.url)
    with HttpClient(FAST_CRAWL) as client:
        hook = CkanHook(src, client, page_size=2)
        ids = [p["id"] for p in hook.packages()]
        assert sorted(ids) == [f"p{i}" for i in range(8)] and len(ids) == 8
        tables = hook.list_tables()
        assert len(tables) == 16 and {t.format for t in tables} == {"csv", "json"}
        since = portal.store.datasets["ckan/p7"]["metadata_modified"]
        assert [p["id"] for p in hook.packages(modified_since=since)] == ["p7"]


def test_socrata_scroll_paging_and_app_token(portal: PortalHandle) -> None:
    for i in range(25):
        portal.store.add_socrata(f"a{i:03d}-0000", csv_bytes([["x"], [str(i)]]))
    src = SourceConfig(name="soc", kind="socrata", url=portal.url, app_token="tok")
    with HttpClient(FAST_CRAWL) as client:
        tables = SocrataHook(src, client, page_size=4).list_tables()
    assert sorted(t.name for t in tables) == [f"a{i:03d}-0000" for i in range(25)]
    assert all(t.headers == {"X-App-Token": "tok"} for t in tables)
    assert sum("scroll_id" in r for r in portal.requests) == 6
