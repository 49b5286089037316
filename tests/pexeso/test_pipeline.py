"""PEXESO through the real pipeline, on both catalog databases: a folder lake of textual columns
with case, punctuation and typo variants is crawled, embedded in Spark from silver column_tokens,
published and searched with `juncture search semantic` (both methods) and over HTTP; then tables
are deleted, changed and added (new vectors under the existing pivots), and the pivots re-selected
by `juncture rebuild`; the answers equal an oracle computing every distance after each step."""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from catalog.api.app import create_app
from catalog.cli.main import main
from catalog.core.embedding import CharNgramEmbedder
from catalog.core.identity import column_headers, file_table_id, normalize_token
from catalog.core.settings import load_settings
from catalog.db.engine import open_catalog
from catalog.search.pexeso import METHODS
from catalog.search.pexeso import index as index_module
from catalog.search.pexeso import source as source_module
from catalog.search.pexeso.index import pexeso_embedder
from catalog.search.pexeso.lists import LIST_K, LIST_T, LIST_TAU
from catalog.search.pexeso.models import PexesoColumn, PexesoMeta
from catalog.search.pexeso.repartition import PARTITIONS_FACT, partition_fact
from catalog.search.pexeso.search import distance_rows, need_count
from catalog.search.pexeso.source import IndexFrame, budget_vectors
from spark_jobs.lake.store import LakeStore
from spark_jobs.orchestration.rebuild import due_families
from spark_jobs.pexeso import update as pexeso_update
from tests.conftest import cli_home

pytestmark = pytest.mark.slow

Table = tuple[str, list[str], list[list[str]]]
# `[index.pexeso] memory_budget_mb`: cuts this lake's index into several partitions of a few columns each
SMALL_BUDGET_MB = 0.2
SYLLABLES = ["ka", "lo", "mi", "ber", "to", "san", "vel", "ro", "da", "nor", "qui", "st", "el", "pa"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalog_url: str, spark) -> Iterator[Path]:  # type: ignore[no-untyped-def]
    # the lake holds a column in rows of 3 values (a large column's rows are bounded): every step
    # below reads columns back from several rows
    monkeypatch.setattr(pexeso_update, "values_per_row", lambda dimension: 3)
    yield cli_home(
        tmp_path,
        monkeypatch,
        catalog_url,
        f"[index]\ncells_buckets = 4\n[index.pexeso]\nmemory_budget_mb = {SMALL_BUDGET_MB}\n",
    )


def _name(rng: np.random.Generator) -> str:
    words = ["".join(rng.choice(SYLLABLES, size=int(rng.integers(2, 4)))) for _ in range(int(rng.integers(1, 3)))]
    return " ".join(w.capitalize() for w in words)


def _variant(rng: np.random.Generator, value: str) -> str:
    """The value with its case, punctuation or one letter changed."""
    kind = int(rng.integers(4))
    if kind == 0:
        return value.upper()
    if kind == 1:
        return value.replace(" ", ". ") + "."
    if kind == 2 and len(value) > 3:
        i = int(rng.integers(1, len(value) - 1))
        return value[:i] + value[i + 1 :]
    return value


def _lake(seed: int, n_tables: int, names: list[str], prefix: str) -> list[Table]:
    rng = np.random.default_rng(seed)
    out = []
    for t in range(n_tables):
        n_rows = int(rng.integers(4, 20))
        rows = []
        for _ in range(n_rows):
            base = names[int(rng.integers(len(names)))]
            rows.append([_variant(rng, base) if rng.random() < 0.5 else base, _name(rng), str(int(rng.integers(100)))])
        out.append((f"{prefix}{t:03d}", ["Name", "Other", "n"], rows))
    return out


def _write(path: Path, headers: list[str], rows: list[list[str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(headers)
        w.writerows(rows)


def _oracle(folder: Path, query: list[str], tau: float, threshold: float) -> list[tuple[str, str, int]]:
    """(table_id, column, n_matched) of every joinable textual column, sorted."""
    embedder = pexeso_embedder()
    counts = Counter(t for v in query if (t := normalize_token(v)) is not None)
    qv = embedder.embed(list(counts))
    keep = np.any(qv != 0, axis=1)
    qv, weights = qv[keep], np.array(list(counts.values()))[keep]
    need = need_count(threshold, int(weights.sum()))
    out = []
    for path in sorted(folder.glob("*.csv")):
        with path.open(newline="", encoding="utf-8") as f:
            header, *rows = list(csv.reader(f))
        for c, name in enumerate(column_headers(header)):
            if name == "n":
                continue
            tokens = sorted({t for r in rows if (t := normalize_token(r[c] or None)) is not None})
            xv = embedder.embed(tokens)
            xv = xv[np.any(xv != 0, axis=1)]
            d = distance_rows(np.repeat(qv, len(xv), 0), np.tile(xv, (len(qv), 1))).reshape(len(qv), len(xv))
            matched = int(weights[(d <= 2 * tau).any(axis=1)].sum())
            if matched >= need:
                out.append((file_table_id(path.name), name, matched))
    return sorted(out)


def _semantic(home: Path, query: list[str], tau: float, threshold: float, method: str, capsys, *extra: str) -> list:  # type: ignore[no-untyped-def]
    (home / "q.txt").write_text("\n".join(query) + "\n", encoding="utf-8")
    capsys.readouterr()
    args = ["search", "semantic", "--values", str(home / "q.txt"), "--tau", str(tau), "--T", str(threshold)]
    assert main([*args, "--method", method, "--k", "1000", "--json", *extra]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["n_matched"] for r in rows] == sorted((r["n_matched"] for r in rows), reverse=True)
    assert all(r["exact"] and r["examples"] for r in rows)
    return sorted((r["table_id"], r["column"], r["n_matched"]) for r in rows)


def _check(home: Path, queries: list[list[str]], capsys) -> None:  # type: ignore[no-untyped-def]
    found = 0
    for query in queries:
        for tau, threshold in ((0.06, 0.6), (0.2, 0.3), (0.35, 0.5)):
            expected = _oracle(home / "files", query, tau, threshold)
            found += len(expected)
            for method in METHODS:
                assert _semantic(home, query, tau, threshold, method, capsys) == expected, (method, tau, threshold)
            # the setting's budget (SMALL_BUDGET_MB) loads a few partitions at a time; these load the
            # whole index at once, and a few columns at a time (partitions cut further)
            got = _semantic(home, query, tau, threshold, "pexeso", capsys, "--memory-budget", "1000")
            assert got == expected, (tau, threshold)
            got = _semantic(home, query, tau, threshold, "brute", capsys, "--memory-budget", str(SMALL_BUDGET_MB / 4))
            assert got == expected, (tau, threshold)
    assert found


def _partitions(catalog_url: str) -> dict[str, Any]:
    """The published partitions: how many, the record of them; each holds at most the budget's
    vectors unless it is one column, and every column has one."""
    with open_catalog(catalog_url).connect() as conn:
        frame = IndexFrame.of(dict(conn.execute(select(PexesoMeta.key, PexesoMeta.value)).tuples().all()))
        capacity = budget_vectors(SMALL_BUDGET_MB, frame.spec, frame.shape)
        rows = conn.execute(
            select(PexesoColumn.partition, func.count(), func.sum(PexesoColumn.n_values)).group_by(
                PexesoColumn.partition
            )
        ).all()
        fact = partition_fact(conn)
    assert all(p is not None and (held <= capacity or n == 1) for p, n, held in rows)
    assert fact["n_partitions"] >= len(rows) and fact["memory_budget_mb"] == SMALL_BUDGET_MB
    return {"pexeso_partitions": len(rows), "fact": fact}


def _check_lists(home: Path, capsys) -> int:  # type: ignore[no-untyped-def]
    """Every textual column's `lookup joinable --semantic` (CLI and HTTP) equals the oracle: its
    distinct tokens searched at the lists' thresholds, itself left out, the best LIST_K, then the
    columns of its exact joinable list removed. Returns how many answers were compared."""
    folder = home / "files"
    client = TestClient(create_app(load_settings()))
    compared = 0
    for path in sorted(folder.glob("*.csv")):
        table_id = file_table_id(path.name)
        with path.open(newline="", encoding="utf-8") as f:
            header, *rows = list(csv.reader(f))
        for c, name in enumerate(column_headers(header)):
            if name == "n":
                continue
            column_id = f"{table_id}#{name}"
            tokens = sorted({t for r in rows if (t := normalize_token(r[c] or None)) is not None})
            found = [x for x in _oracle(folder, tokens, LIST_TAU, LIST_T) if x[:2] != (table_id, name)]
            found.sort(key=lambda x: (-x[2], x[0], x[1]))
            capsys.readouterr()
            assert main(["lookup", "joinable", column_id, "--k", "100", "--json"]) == 0
            exact = {r["column_id"] for r in json.loads(capsys.readouterr().out)}
            expected = [(t, col, m) for t, col, m in found[:LIST_K] if f"{t}#{col}" not in exact]
            assert main(["lookup", "joinable", column_id, "--semantic", "--k", "100", "--json"]) == 0
            got = json.loads(capsys.readouterr().out)
            assert [(r["table_id"], r["column"], r["n_matched"]) for r in got] == expected, column_id
            assert [r["rank"] for r in got] == list(range(1, len(got) + 1))
            page = client.get(f"/v1/joinable/{column_id.replace('#', '%23')}", params={"semantic": "true", "k": 2})
            assert page.status_code == 200
            assert [r["column_id"] for r in page.json()["items"]] == [f"{t}#{col}" for t, col, _ in expected[:2]]
            compared += len(expected)
    return compared


def test_semantic_search_through_the_pipeline_equals_the_oracle(home: Path, catalog_url: str, capsys) -> None:  # type: ignore[no-untyped-def]
    folder = home / "files"
    rng = np.random.default_rng(1)
    names = [_name(rng) for _ in range(40)]
    for table_id, headers, rows in _lake(2, 10, names, "t"):
        _write(folder / f"{table_id}.csv", headers, rows)
    # names written with punctuation only: no value in common with any table, so only the
    # embedding joins them (the semantic lists' subject)
    _write(folder / "dots.csv", ["Label"], [[n.replace(" ", ". ") + "."] for n in names])
    queries = [[_variant(rng, names[int(i)]) for i in rng.integers(0, 12, size=15)] for _ in range(2)]
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    assert main(["index"]) == 0
    held = LakeStore(load_settings().lake).read_arrow("pexeso_vectors", columns=["column_id", "n_values"])
    assert held.num_rows > len(set(held["column_id"].to_pylist())) and max(held["n_values"].to_pylist()) == 3
    _check(home, queries, capsys)
    first = _partitions(catalog_url)
    assert first["pexeso_partitions"] > 2  # several, each within the budget
    assert _check_lists(home, capsys)
    pivots = LakeStore(load_settings().lake).read_arrow("pexeso_state").to_pylist()[0]["pivots"]

    # a batch: two tables deleted, one changed, two added
    (folder / "t001.csv").unlink()
    (folder / "t004.csv").unlink()
    _, headers, rows = _lake(3, 1, names, "x")[0]
    _write(folder / "t007.csv", headers, rows)
    for table_id, headers, rows in _lake(4, 2, names, "new"):
        _write(folder / f"{table_id}.csv", headers, rows)
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    assert main(["index"]) == 0
    state = LakeStore(load_settings().lake).read_arrow("pexeso_state").to_pylist()[0]
    assert not state["full"] and state["pivots"] == pivots and state["n_changed"] > 0
    with open_catalog(catalog_url).connect() as conn:
        published = set(conn.execute(select(PexesoColumn.table_id)).scalars())
    assert published == {file_table_id(p.name) for p in folder.glob("*.csv")}
    _check(home, queries, capsys)
    assert _check_lists(home, capsys)

    after = _partitions(catalog_url)  # the added columns placed, the quality recorded
    assert after["fact"]["pivots"] == first["fact"]["pivots"] and after["fact"]["quality"] > 0

    # the partitions' quality fell past repartition_share: a rebuild is due, re-selects the pivots
    # and re-partitions; the same answers
    with open_catalog(catalog_url).begin() as conn:
        fact = dict(after["fact"], quality=0.1 * after["fact"]["quality_at_partitioning"])
        conn.execute(update(PexesoMeta).where(PexesoMeta.key == PARTITIONS_FACT).values(value=json.dumps(fact)))
    assert "pexeso" in due_families(None, load_settings())
    assert main(["rebuild"]) == 0
    rebuilt = _partitions(catalog_url)
    assert rebuilt["fact"]["pivots"] != first["fact"]["pivots"]
    assert rebuilt["fact"]["quality"] == rebuilt["fact"]["quality_at_partitioning"] > 0.1 * after["fact"]["quality"]
    assert "pexeso" not in due_families(None, load_settings())
    _check(home, queries[:1], capsys)

    # over HTTP
    client = TestClient(create_app(load_settings()))
    answer = client.post("/v1/search/semantic", json={"values": queries[0], "tau": 0.2, "T": 0.3, "k": 1000})
    assert answer.status_code == 200
    got = sorted((r["table_id"], r["column"], r["n_matched"]) for r in answer.json()["results"])
    assert got == _oracle(folder, queries[0], 0.2, 0.3)
    assert client.post("/v1/search/semantic", json={"values": queries[0], "tau": 2}).status_code == 422
    assert client.post("/v1/search/semantic", json={"values": queries[0], "method": "x"}).status_code == 422
    assert client.post("/v1/search/semantic", json={"values": ["", None]}).status_code == 400


def test_bad_semantic_searches_are_refused_with_one_line(home: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    _write(home / "files" / "a.csv", ["city"], [["Boston"], ["New York"], ["Chicago"]])
    assert main(["crawl", "--dir", str(home / "files"), "--no-progress"]) == 0
    assert main(["index"]) == 0
    (home / "q.txt").write_text("BOSTON\nnew-york\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["search", "semantic", "--values", str(home / "q.txt"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["column"], r["n_matched"], r["joinability"]) for r in rows] == [("city", 2, 1.0)]
    assert rows[0]["examples"][0] == {"query_value": "boston", "lake_value": "boston", "distance": 0.0}
    for args, message in (
        (["--values", str(home / "nope.txt")], "no such file"),
        (["--values", str(home / "q.txt"), "--tau", "1.5"], "tau must be in"),
        (["--values", str(home / "q.txt"), "--T", "0"], "threshold T must be in"),
        (["--values", str(home / "q.txt"), "--memory-budget", "0"], "memory budget must be a positive"),
    ):
        assert main(["search", "semantic", *args]) == 2
        assert message in capsys.readouterr().err
    (home / "empty.txt").write_text("\n\n", encoding="utf-8")
    assert main(["search", "semantic", "--values", str(home / "empty.txt")]) == 2
    assert "no non-empty value" in capsys.readouterr().err


def _version_1(dimension: int = 256) -> CharNgramEmbedder:
    """PEXESO's embedder before the canonical form: case and punctuation only."""
    return CharNgramEmbedder(dimension=dimension, grams=(2, 3, 4), normalise=True, name="char-ngram-2-4")


def test_an_index_of_the_previous_embedder_version_is_refused_then_re_embedded_by_a_rebuild(
    home: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    names = ["John Smith", "Jane Doe", "Ann Lee", "Bob Stone", "Eve Adams"]
    _write(home / "files" / "people.csv", ["name"], [[n] for n in names])
    reordered = ["Smith, John", "Doe, Jane", "Lee, Ann", "Stone, Bob"]
    with monkeypatch.context() as m:  # the index built by version 1
        m.setattr(index_module, "pexeso_embedder", _version_1)
        m.setattr(source_module, "pexeso_embedder", _version_1)
        assert main(["crawl", "--dir", str(home / "files"), "--no-progress"]) == 0
        assert main(["index"]) == 0
        assert _semantic(home, reordered, 0.06, 0.6, "pexeso", capsys) == []  # word order mattered
    spec = json.loads(LakeStore(load_settings().lake).read_arrow("pexeso_state").to_pylist()[0]["spec"])
    assert spec["version"] == 1
    (home / "q.txt").write_text("\n".join(reordered) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["search", "semantic", "--values", str(home / "q.txt")]) == 2
    assert "v1" in capsys.readouterr().err  # this build would embed the query otherwise: refused
    assert main(["rebuild"]) == 0
    state = LakeStore(load_settings().lake).read_arrow("pexeso_state").to_pylist()[0]
    assert json.loads(state["spec"])["version"] == pexeso_embedder().version == 2 and state["full"]
    assert _semantic(home, reordered, 0.06, 0.6, "pexeso", capsys) == [("file:people.csv", "name", 4)]
