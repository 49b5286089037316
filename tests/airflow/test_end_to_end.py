"""End to end through the DAGs with `dag.test()`: crawl the local portal (Socrata API on loopback) and a
lake folder, index and publish; change, add and delete portal datasets and files and run again; then
a manual `lake_index` trigger with a conf. After each round the catalog must hold exactly the tables
and columns of the sources (oracle: Python's csv module over the bytes the test wrote)."""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path
from urllib.parse import urlparse

import pytest

from catalog import lookup
from catalog.core.identity import column_headers, socrata_table_id
from catalog.core.settings import Settings, SourceConfig
from catalog.db.engine import open_catalog, session_scope
from spark_jobs.orchestration import airflow_runner as airflow_env
from spark_jobs.orchestration import tasks as dag_tasks

pytestmark = pytest.mark.slow


def expected(files: dict[str, Path]) -> dict[str, list[str]]:
    """table_id -> headers, straight from the files."""
    out = {}
    for table_id, path in files.items():
        with path.open(newline="") as f:
            out[table_id] = column_headers(next(csv.reader(f)))
    return out


def catalog_state(settings: Settings) -> dict[str, tuple[list[str], str | None]]:
    """table_id -> (headers, batch_id) as the catalog publishes them."""
    with session_scope(open_catalog(settings.catalog_url)) as s:
        return {
            t.table_id: ([c.column for c in lookup.columns(s, t.table_id)], t.batch_id)
            for t in lookup.tables(s, limit=1000)
        }


def write(path: Path, rows: list[list[object]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    return path


def csv_bytes(rows: list[list[object]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def portal_headers(data: bytes) -> list[str]:
    return column_headers(next(csv.reader(io.StringIO(data.decode()))))


@pytest.fixture
def portal(tmp_path: Path):  # type: ignore[no-untyped-def]
    from plugins.local_portal import serve_in_background

    handle = serve_in_background(tmp_path / "portal")
    yield handle
    handle.stop()


def test_crawl_index_change_and_manual_update(af_settings: Settings, tmp_path: Path, portal, spark) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "lake-folder"
    a = write(folder / "a.csv", [["id", "city"], [1, "Oslo"], [2, "Lima"], [3, "Pune"]])
    b = write(folder / "b.csv", [["city", "country"], ["Oslo", "NO"], ["Lima", "PE"]])
    c = write(folder / "sub" / "c.csv", [["code", "", "code"], ["x", "1", "y"]])
    s1 = csv_bytes([["country", "capital"], ["NO", "Oslo"], ["PE", "Lima"]])
    s2 = csv_bytes([["city", "mayor"], ["Oslo", "A"]])
    portal.store.add_socrata("aaaa-0001", s1, title="capitals")
    portal.store.add_socrata("aaaa-0002", s2, title="mayors")
    host = urlparse(portal.url).hostname or ""
    sid = {k: socrata_table_id(host, k) for k in ("aaaa-0001", "aaaa-0002", "aaaa-0003")}
    crawl = dataclasses.replace(
        af_settings.crawl,
        timeout_s=5.0,
        max_retries=2,
        backoff_base_s=0.01,
        backoff_max_s=0.05,
        requests_per_second=1000.0,
    )
    settings = dataclasses.replace(
        af_settings,
        crawl=crawl,
        sources=(
            SourceConfig(name="soc", kind="socrata", url=portal.url),
            SourceConfig(name="folder", kind="folder", path=str(folder)),
        ),
    )

    # Round 1: lake_crawl (one mapped task per source) lands two batches and emits the asset event;
    # lake_index runs on it and publishes both.
    run1 = airflow_env.run_dag(settings, "lake_crawl")
    assert run1.tasks["announce"] == "success" and {"crawl[0]", "crawl[1]"} <= set(run1.tasks)
    assert [r.dag_id for r in run1.triggered] == ["lake_index"]
    index = run1.triggered[0]
    assert index.tasks["publish"] == "success" and index.tasks["land_manual"] == "success"
    want = {
        **{t: h for t, h in expected({"file:a.csv": a, "file:b.csv": b, "file:sub/c.csv": c}).items()},
        sid["aaaa-0001"]: portal_headers(s1),
        sid["aaaa-0002"]: portal_headers(s2),
    }
    state1 = catalog_state(settings)
    assert {t: h for t, (h, _) in state1.items()} == want

    # Round 2: change b (new column), delete c, add d; on the portal change 0001, remove 0002, add
    # 0003. a is untouched and must keep its batch.
    write(b, [["city", "country", "population"], ["Oslo", "NO", 700000], ["Pune", "IN", 3100000]])
    c.unlink()
    d = write(folder / "d.csv", [["country", "name"], ["NO", "Norway"]])
    s1b = csv_bytes([["country", "capital", "since"], ["NO", "Oslo", 1299]])
    s3 = csv_bytes([["name", "lang"], ["Peru", "es"]])
    portal.store.set_content("socrata/aaaa-0001", s1b)
    portal.store.remove("socrata/aaaa-0002")
    portal.store.add_socrata("aaaa-0003", s3, title="languages")
    run2 = airflow_env.run_dag(settings, "lake_crawl")
    assert [r.dag_id for r in run2.triggered] == ["lake_index"]
    want = {
        **expected({"file:a.csv": a, "file:b.csv": b, "file:d.csv": d}),
        sid["aaaa-0001"]: portal_headers(s1b),
        sid["aaaa-0003"]: portal_headers(s3),
    }
    state2 = catalog_state(settings)
    assert {t: h for t, (h, _) in state2.items()} == want
    assert state2["file:a.csv"][1] == state1["file:a.csv"][1]
    assert state2["file:b.csv"][1] == state2["file:d.csv"][1] != state1["file:b.csv"][1]
    assert state2[sid["aaaa-0001"]][1] == state2[sid["aaaa-0003"]][1] != state1[sid["aaaa-0001"]][1]
    with dag_tasks.bind_settings(settings):  # idempotent crawl tasks: nothing changed, no batch
        assert dag_tasks.crawl_source("folder") is None
        assert dag_tasks.crawl_source("soc") is None

    # Round 3: a manual trigger adds a file from outside the sources and deletes a portal table; the
    # dirty-share check is forced (threshold below any share) so lake_index also triggers lake_rebuild.
    e = write(tmp_path / "manual" / "e.csv", [["name", "lang"], ["Norway", "no"]])
    forced = dataclasses.replace(settings, index=settings.index.with_family("josie", dirty_threshold=-1.0))
    run = airflow_env.run_dag(forced, "lake_index", {"add": [str(e)], "delete": [sid["aaaa-0003"]]})
    assert run.tasks["trigger_rebuild"] == "success"
    assert [(r.dag_id, r.state) for r in run.triggered] == [("lake_rebuild", "success")]
    del want[sid["aaaa-0003"]]
    want["file:e.csv"] = expected({"file:e.csv": e})["file:e.csv"]
    state3 = catalog_state(settings)
    assert {t: h for t, (h, _) in state3.items()} == want
    assert all(state3[t][1] == state2[t][1] for t in want if t != "file:e.csv")

    # Idempotent tasks: the same manual request again lands nothing, and nothing is left pending.
    with dag_tasks.bind_settings(settings):
        assert dag_tasks.land_manual([str(e)], [sid["aaaa-0003"]]) is None
        assert dag_tasks.pending_batch_ids() == []
