"""`POST /v1/search/join`: answers equal brute force for every method on both databases, bad
requests are refused before any read, an empty catalog answers no columns, a newly published index
version is answered from its own dictionary, and a search reads one snapshot while a publish
commits."""

from __future__ import annotations

import dataclasses
import random

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, text, update

from bench.josie_lake import store_index
from catalog.api.app import create_app
from catalog.api.search import MAX_SEARCH_BODY_BYTES
from catalog.core.settings import Settings
from catalog.db.engine import one_snapshot, open_catalog, open_reader
from catalog.search.josie import build_memory_index
from catalog.search.josie.brute_force import brute_force_top_k
from catalog.search.josie.models import JosieMeta, JosiePosting, JosieSet, JosieToken
from catalog.search.josie.reader import clear_dictionary_cache
from tests.josie_search.lakes import random_lake, random_query

METHODS = ("josie", "mergelist", "probeset", "brute")


def _publish(url: str, lake: dict[str, set[str]], version: int) -> None:
    """Replace the catalog's JOSIE index with `lake`'s, as index version `version`."""
    engine = open_catalog(url)
    with engine.begin() as conn:
        for model in (JosiePosting, JosieSet, JosieToken):
            conn.execute(delete(model))
        store_index(conn, build_memory_index(lake), version=version)
    engine.dispose()


def _expected(lake: dict[str, set[str]], query: set[str], k: int, exclude: str | None = None) -> list[dict]:
    return [
        {"overlap": r.overlap, "column_id": r.column_id, "table_id": r.table_id, "column": r.column, "exact": True}
        for r in brute_force_top_k(lake, query, k, exclude_column_id=exclude)
    ]


@pytest.fixture
def client(catalog_settings: Settings):  # type: ignore[no-untyped-def]
    clear_dictionary_cache()
    with TestClient(create_app(catalog_settings)) as c:
        yield c
    clear_dictionary_cache()


def test_every_method_equals_brute_force_and_follows_new_index_versions(client, catalog_settings):  # type: ignore[no-untyped-def]
    rng = random.Random(5)
    for version, seed in ((1, 21), (2, 22)):
        lake = random_lake(random.Random(seed), n_sets=60, vocab=40)
        _publish(catalog_settings.catalog_url, lake, version)
        for _ in range(4):
            query = random_query(rng, lake, 40)
            values = [v.upper() + "  " for v in sorted(query)] + [None, "", "null"]
            for method in METHODS:
                got = client.post("/v1/search/join", json={"values": values, "k": 5, "method": method})
                assert got.status_code == 200, got.text
                assert got.json() == {"method": method, "k": 5, "results": _expected(lake, query, 5)}
        me = max(lake, key=lambda c: len(lake[c]))
        got = client.post("/v1/search/join", json={"values": sorted(lake[me]), "k": 3, "exclude": me})
        assert got.json()["method"] == "josie"
        assert got.json()["results"] == _expected(lake, lake[me], 3, exclude=me)


def test_bad_requests_are_refused_with_the_reason(client, catalog_settings):  # type: ignore[no-untyped-def]
    lake = random_lake(random.Random(3), n_sets=20, vocab=20)
    _publish(catalog_settings.catalog_url, lake, 1)
    url = "/v1/search/join"
    for body in (
        {"values": ["a"], "k": 0},
        {"values": ["a"], "k": 100_000},
        {"values": ["a"], "method": "nonsense"},
        {"values": ["a"], "exclude": "not-a-column"},
        {"values": ["a"], "exclude": "file:a.csv#\x01"},
        {"values": "a"},
        {"values": ["a"], "surprise": 1},
        {},
    ):
        got = client.post(url, json=body)
        assert got.status_code == 422, (body, got.text)
    unknown = client.post(url, json={"values": ["1"], "exclude": "file:nowhere.csv#x"})
    assert unknown.status_code == 404 and unknown.json()["id"] == "file:nowhere.csv#x"
    # a body far over the lookups' limit is fine here; one over the search limit is refused unread
    big = [f"value {i}" for i in range(20_000)]
    assert client.post(url, json={"values": big, "k": 3}).status_code == 200
    oversized = b'{"values": ["' + b"x" * MAX_SEARCH_BODY_BYTES + b'"]}'
    assert client.post(url, content=oversized, headers={"content-type": "application/json"}).status_code == 413
    assert client.get(url).status_code == 405


def test_a_catalog_with_nothing_indexed_yet_answers_no_columns(client):  # type: ignore[no-untyped-def]
    got = client.post("/v1/search/join", json={"values": ["a", "b"]})
    assert got.status_code == 200 and got.json() == {"method": "josie", "k": 10, "results": []}


def test_one_snapshot_does_not_see_a_publish_commit_meanwhile(catalog_settings):  # type: ignore[no-untyped-def]
    url = catalog_settings.catalog_url
    _publish(url, {"file:a.csv#x": {"1"}}, 1)
    reader, writer = open_reader(url), open_catalog(url)
    version = text("SELECT value FROM josie_meta WHERE key = 'index_version'")
    with reader.connect() as conn:
        with one_snapshot(conn):
            assert conn.execute(version).scalar() == "1"
            with writer.begin() as w:
                w.execute(update(JosieMeta).values(value="2"))
            assert conn.execute(version).scalar() == "1"
        assert conn.execute(version).scalar() == "2"
    reader.dispose()
    writer.dispose()


def test_the_route_is_documented(catalog_settings):  # type: ignore[no-untyped-def]
    spec = TestClient(create_app(dataclasses.replace(catalog_settings))).get("/openapi.json").json()
    body = spec["paths"]["/v1/search/join"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["$ref"].endswith("/JoinQuery")
    assert {"values", "k", "method", "exclude"} <= set(spec["components"]["schemas"]["JoinQuery"]["properties"])
