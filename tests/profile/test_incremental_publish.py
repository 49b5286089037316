"""Incremental behaviour: only a batch's tables are profiled, deleted tables disappear from silver
and the catalog, re-running a batch changes nothing; publishing into SQLite and PostgreSQL and the
`juncture lookup profile|keys --json` answers."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from catalog import lookup
from catalog.cli.main import main
from catalog.core.errors import UnknownIdError
from catalog.core.settings import Settings
from catalog.db.engine import open_catalog, session_scope
from catalog.db.models import CatalogTable
from catalog.db.models.base import text_key
from spark_jobs.crawl.land import ParsedTable, land_batch
from spark_jobs.lake.store import LakeStore
from spark_jobs.orchestration.pipeline import run_batch
from spark_jobs.profile import keys as detect_keys
from spark_jobs.profile import profiles as profile_columns
from spark_jobs.profile import tokens as column_tokens
from spark_jobs.publish import catalog as publish_catalog
from spark_jobs.publish.catalog import publish_tables
from spark_jobs.publish.profiles import publish_keys, publish_profiles
from tests.profile import lakes, oracle

A = "file:inc/a.csv"
B = "file:inc/b.csv"
C = "file:inc/c.csv"


def _publish(spark, settings, batch):  # type: ignore[no-untyped-def]
    return publish_catalog.run(spark, settings, batch, publishers=[publish_tables, publish_profiles, publish_keys])


STAGES = [
    ("tokens", column_tokens.run),
    ("profile", profile_columns.run),
    ("keys", detect_keys.run),
    ("publish", _publish),
]


def a_v1() -> ParsedTable:
    return lakes.table(A, ["id", "city", "temp"], [["1", "NYC", "1.5"], ["2", "Paris", "2.5"], ["3", "NYC", None]])


def a_v2() -> ParsedTable:
    return lakes.table(A, ["code", "n"], [["X1", "10"], ["X2", "10"], ["X3", "12"], ["X3", "13"]])


def b_v1() -> ParsedTable:
    return dataclasses.replace(lakes.triple_key(), table_id=B)


def c_v1() -> ParsedTable:
    return lakes.table(C, ["when", "flag"], [["2013-01-01", "y"], ["2013-01-02", "n"], ["2013-01-03", "y"]])


def silver_state(store: LakeStore) -> tuple[dict[str, str], set[tuple[str, tuple[str, ...]]], set[str]]:
    rows = store.read_arrow(profile_columns.COLUMN_PROFILES).to_pylist()
    profiles = {r["column_id"]: r["inferred_type"] for r in rows}
    keys = {(r["table_id"], tuple(r["columns"])) for r in store.read_arrow(detect_keys.KEYS).to_pylist()}
    searched = {r["table_id"] for r in store.read_arrow(detect_keys.KEY_SEARCHES).to_pylist()}
    return profiles, keys, searched


def expected_state(tables: list[ParsedTable]) -> tuple[dict[str, str], set[tuple[str, tuple[str, ...]]], set[str]]:
    profiles = {cid: p["inferred_type"] for t in tables for cid, p in oracle.table_profiles(t).items()}
    keys = {(t.table_id, cols) for t in tables for cols, _ in oracle.keys(t)}
    return profiles, keys, {t.table_id for t in tables}


def test_batches_replace_only_their_tables_and_publish(
    spark,
    catalog_settings: Settings,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = catalog_settings
    store = LakeStore(settings.lake, spark)
    n_buckets = settings.index.cells_buckets
    batch1 = land_batch(store, [a_v1(), b_v1()], [], n_buckets=n_buckets)
    run_batch(spark, settings, batch1, STAGES)
    assert silver_state(store) == expected_state([a_v1(), b_v1()])

    batch2 = land_batch(store, [a_v2(), c_v1()], [B], n_buckets=n_buckets)
    report = run_batch(spark, settings, batch2, STAGES)
    assert report.results["publish"]["n_profiles"] == 4
    state = silver_state(store)
    assert state == expected_state([a_v2(), c_v1()])
    assert not any(cid.startswith(B) for cid in state[0])

    versions = {
        n: store.version(n) for n in (profile_columns.COLUMN_PROFILES, detect_keys.KEYS, detect_keys.KEY_SEARCHES)
    }
    again = run_batch(spark, settings, batch2, STAGES)  # re-running a batch changes nothing
    assert again.results["profile"].skipped and again.results["publish"].get("skipped")
    assert {n: store.version(n) for n in versions} == versions
    assert silver_state(store) == state

    engine = open_catalog(settings.catalog_url)
    with session_scope(engine) as session:
        prof = lookup.profile(session, f"{A}#n")
        want = oracle.table_profiles(a_v2())[f"{A}#n"]
        assert (prof.row_count, prof.null_count, prof.distinct_count, prof.inferred_type) == (
            want["row_count"],
            want["null_count"],
            want["distinct_count"],
            want["inferred_type"],
        )
        assert prof.histogram == {
            "edges": pytest.approx([10 + 0.3 * i for i in range(11)]),
            "counts": [2, 0, 0, 0, 0, 0, 1, 0, 0, 1],
        }
        assert prof.top_values == [["10", 2], ["12", 1], ["13", 1]]
        assert [k.columns for k in lookup.keys(session, C)] == [["when"]]  # flag repeats
        assert session.get(CatalogTable, text_key(C)).keys_search_complete is True
        assert [(k.columns, k.exact) for k in lookup.keys(session, A)] == [(["code", "n"], True)]
        with pytest.raises(UnknownIdError):
            lookup.keys(session, B)
        with pytest.raises(UnknownIdError):
            lookup.profile(session, f"{B}#site")

    monkeypatch.chdir(tmp_path)
    for var in [v for v in os.environ if v.startswith("JUNCTURE_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("JUNCTURE_HOME", str(settings.home))
    monkeypatch.setenv("JUNCTURE_CATALOG_URL", settings.catalog_url)
    capsys.readouterr()
    assert main(["lookup", "profile", f"{C}#when", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {
        k: doc[k]
        for k in (
            "column_id",
            "column",
            "row_count",
            "null_count",
            "distinct_count",
            "inferred_type",
            "min_value",
            "max_value",
        )
    } == {
        "column_id": f"{C}#when",
        "column": "when",
        "row_count": 3,
        "null_count": 0,
        "distinct_count": 3,
        "inferred_type": "date",
        "min_value": "2013-01-01",
        "max_value": "2013-01-03",
    }
    assert main(["lookup", "keys", C, "--json"]) == 0
    keys = json.loads(capsys.readouterr().out)
    assert [{k: v for k, v in key.items() if k != "score"} for key in keys] == [
        {"columns": ["when"], "exact": True, "uniqueness": 1.0}
    ]
    assert 0.0 < keys[0]["score"] <= 1.0
    assert main(["lookup", "keys", B, "--json"]) == 2

    batch3 = land_batch(store, [], [C], n_buckets=n_buckets)  # a batch that only deletes
    run_batch(spark, settings, batch3, STAGES)
    assert silver_state(store) == expected_state([a_v2()])
    assert main(["lookup", "keys", C, "--json"]) == 2
