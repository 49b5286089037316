"""A hostile lake folder: symbolic links out of the root and in loops, names that collide or carry
`#` and `%`, Juncture's own lake inside the crawled folder, files over the size cap."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import httpx
import uvicorn

from catalog.api.app import create_app
from catalog.cli.main import main
from catalog.core.identity import file_table_id
from catalog.core.settings import Settings
from plugins.sources.listing import ListedTable, reject_duplicate_ids
from spark_jobs.crawl.crawl import run_crawl
from spark_jobs.lake.batches import load_batch
from spark_jobs.lake.store import LakeStore
from spark_jobs.orchestration.pipeline import run_batch
from tests.crawl.conftest import bronze, crawl_settings, csv_bytes, table_cells


def _ids(settings: Settings) -> list[str]:
    return [r["table_id"] for r in bronze(settings)[0]]


def test_symlinks_stay_inside_the_root_and_loops_do_not_multiply(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.csv").write_bytes(csv_bytes([["password"], ["hunter2"]]))
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "a.csv").write_bytes(csv_bytes([["a"], ["1"]]))
    (root / "sub" / "b.csv").write_bytes(csv_bytes([["b"], ["2"]]))
    (root / "ext").symlink_to(outside)  # a folder link out of the root
    (root / "leak.csv").symlink_to(outside / "secret.csv")  # a file link out of the root
    (root / "sub" / "up").symlink_to("..")  # a loop
    (root / "twin.csv").symlink_to(root / "a.csv")  # a file link inside the root: a table of its own
    settings = crawl_settings(tmp_path / "home")

    report = run_crawl(settings, folder=str(root))

    assert report.failures == []
    assert _ids(settings) == ["file:a.csv", "file:sub/b.csv", "file:twin.csv"]
    landed = {cell[4] for cell in bronze(settings)[1]}
    assert "hunter2" not in landed and "password" not in landed


def test_names_that_collided_are_two_tables_each_with_its_own_cells(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "b.csv").write_bytes(csv_bytes([["slash"], ["from a/b"]]))
    (root / "a\\b.csv").write_bytes(csv_bytes([["backslash"], ["from a\\b"]]))
    settings = crawl_settings(tmp_path / "home")

    report = run_crawl(settings, folder=str(root))

    assert report.failures == [] and report.new == 2
    slash, backslash = file_table_id("a/b.csv"), file_table_id("a\\b.csv")
    assert slash != backslash and _ids(settings) == sorted([slash, backslash])
    assert table_cells(settings, slash) == {(0, 1, "from a/b")}
    assert table_cells(settings, backslash) == {(0, 1, "from a\\b")}


def test_entries_sharing_an_id_are_all_reported() -> None:
    entries = [ListedTable("file:x.csv", "s", name, "1:1", "csv") for name in ("x.csv", "X.csv")]
    entries.append(ListedTable("file:y.csv", "s", "y.csv", "1:1", "csv"))
    out = reject_duplicate_ids(entries)
    assert [e.problem is not None for e in out] == [True, True, False]
    assert "2 entries map to table_id 'file:x.csv'" in (out[0].problem or "")
    assert "'X.csv'" in (out[0].problem or "") and "'x.csv'" in (out[0].problem or "")


@contextmanager
def _served(settings: Settings) -> Iterator[str]:
    """The API on uvicorn on a free loopback port, in a thread."""
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_hash_and_percent_in_a_name_round_trip_through_every_surface(
    tmp_path: Path,
    spark,
    monkeypatch,  # type: ignore[no-untyped-def]
    capsys,
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    name = "q#1 50%.csv"
    (root / name).write_bytes(csv_bytes([["city", "n#"], ["Oslo", "1"], ["Lima", "2"]]))
    (root / "q%231 50%25.csv").write_bytes(csv_bytes([["other"], ["x"]]))  # the escaped spelling of `name`
    settings = crawl_settings(tmp_path / "home")
    report = run_crawl(settings, folder=str(root))
    assert report.failures == [] and report.new == 2
    run_batch(spark, settings, load_batch(LakeStore(settings.lake), report.batch_id))
    tid = file_table_id(name)
    assert "#" not in tid and tid in _ids(settings) and len(set(_ids(settings))) == 2

    # a real server: the test client decodes a path twice, uvicorn (what users meet) once
    with _served(settings) as base, httpx.Client(base_url=base) as client:
        table = client.get(f"/v1/tables/{quote(tid, safe='')}")
        assert table.status_code == 200, table.text
        assert table.json()["table_id"] == tid and table.json()["name"] == name
        columns = client.get(f"/v1/columns/{quote(tid, safe='')}")
        assert columns.status_code == 200 and [c["column"] for c in columns.json()["items"]] == ["city", "n#"]
        for header in ("city", "n#"):
            profile = client.get(f"/v1/profile/{quote(tid + '#' + header, safe='')}")
            assert profile.status_code == 200, profile.text
            assert profile.json()["table_id"] == tid and profile.json()["column"] == header
            joinable = client.get(f"/v1/joinable/{quote(tid + '#' + header, safe='')}")
            assert joinable.status_code == 200, joinable.text
        assert client.get(f"/v1/unionable/{quote(tid, safe='')}").status_code == 200

    monkeypatch.setenv("JUNCTURE_HOME", str(settings.home))
    monkeypatch.setenv("JUNCTURE_LAKE", settings.lake)
    monkeypatch.setenv("JUNCTURE_CATALOG_URL", settings.catalog_url)
    monkeypatch.chdir(tmp_path)
    assert main(["lookup", "table", tid, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == name


def test_a_folder_holding_junctures_own_lake_skips_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "t.csv").write_bytes(csv_bytes([["t"], ["1"]]))
    settings = crawl_settings(tmp_path / "data" / "var")  # home (and lake) inside the crawled folder
    first = run_crawl(settings, folder=str(data))
    assert first.failures == [] and _ids(settings) == ["file:t.csv"]
    # the lake now holds Parquet files and raw copies; a recrawl must not land them as tables
    assert any(Path(settings.lake).rglob("*.parquet"))
    second = run_crawl(settings, folder=str(data))
    assert second.failures == [] and second.new == 0 and _ids(settings) == ["file:t.csv"]
    # a root inside the lake is refused as a whole
    inside = run_crawl(settings, folder=str(Path(settings.lake)))
    assert inside.new == 0 and "inside Juncture's own lake" in inside.failures[0][1]


def test_folder_files_over_the_size_cap_fail_alone(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "small.csv").write_bytes(csv_bytes([["s"], ["1"]]))
    big = csv_bytes([["b"]] + [["x" * 100]] * 200)
    (root / "big.csv").write_bytes(big)
    settings = crawl_settings(tmp_path / "home", max_download_bytes=4096)
    report = run_crawl(settings, folder=str(root))
    assert _ids(settings) == ["file:small.csv"]
    assert report.failures == [
        ("file:big.csv", f"file of {len(big)} bytes is over the limit of 4096 (crawl.max_download_bytes)")
    ]
