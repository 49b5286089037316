"""LSH Ensemble through the real pipeline, on both catalog databases: a folder lake is crawled,
indexed (signatures in Spark), published and searched with `juncture search contain`, then
changed (a table grows past every partition, one disappears, one arrives) and searched again; a
repartition and a spec change are applied; verified answers equal brute-force containment."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from catalog.api.app import create_app
from catalog.cli.main import main
from catalog.core.errors import SignatureMismatchError
from catalog.core.identity import file_table_id, normalize_token
from catalog.core.minhash import MinHashSpec, signature
from catalog.core.settings import load_settings
from catalog.db.engine import open_catalog
from catalog.search.lshensemble.models import LsheColumn
from catalog.search.lshensemble.search import load_index, signed_candidates
from spark_jobs.lake.store import LakeStore
from tests.conftest import cli_home

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalog_url: str, spark) -> Iterator[Path]:  # type: ignore[no-untyped-def]
    yield cli_home(
        tmp_path,
        monkeypatch,
        catalog_url,
        "[index]\ncells_buckets = 4\n\n[index.lshensemble]\nnum_perm = 128\nn_partitions = 4\n",
    )


def _write(path: Path, header: list[str], columns: list[list[str]]) -> None:
    rows = max(len(c) for c in columns)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        for i in range(rows):
            w.writerow([c[i] if i < len(c) else "" for c in columns])


def _oracle(folder: Path) -> dict[str, set[str]]:
    out = {}
    for path in sorted(folder.glob("*.csv")):
        with path.open(newline="", encoding="utf-8") as f:
            header, *rows = list(csv.reader(f))
        for i, name in enumerate(header):
            tokens = {t for r in rows if i < len(r) and (t := normalize_token(r[i])) is not None}
            if tokens:
                out[f"{file_table_id(path.name)}#{name}"] = tokens
    return out


def _contain(home: Path, values: list[str], t: float, capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict]:
    query = home / "q.txt"
    query.write_text("\n".join(values) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["search", "contain", "--values", str(query), "--threshold", str(t), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _brute(oracle: dict[str, set[str]], values: list[str], t: float) -> list[tuple[str, float]]:
    q = {v for v in map(normalize_token, values) if v is not None}
    hits = [(c, len(q & s) / len(q)) for c, s in oracle.items() if len(q & s) >= t * len(q) - 1e-9]
    return sorted(((c, round(x, 4)) for c, x in hits), key=lambda h: (-h[1], h[0]))


def _lake(folder: Path, rng: np.random.Generator) -> None:
    cities = [f"city{i}" for i in range(300)]
    _write(folder / "a.csv", ["city", "code"], [cities[:200], [f"c{i}" for i in range(50)]])
    _write(folder / "b.csv", ["town"], [cities[100:260]])
    _write(folder / "c.csv", ["place", "n"], [cities[:20], [str(i) for i in range(5)]])
    _write(folder / "d.csv", ["city"], [cities[:200]])  # a duplicate of a.city
    picked = rng.choice(300, size=120, replace=False).tolist()
    _write(folder / "e.csv", ["x"], [[cities[i] for i in picked]])


QUERIES = [
    [f"city{i}" for i in range(0, 60)],
    [f"city{i}" for i in range(90, 150)] + ["nowhere", "nothing"],
    [f"city{i}" for i in range(0, 10)] + [f"c{i}" for i in range(10)],
]


def test_contain_search_through_the_pipeline_equals_brute_force(
    home: Path, catalog_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = home / "files"
    _lake(folder, np.random.default_rng(0))
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    assert main(["index"]) == 0
    for values in QUERIES:
        for t in (0.5, 0.7, 0.9):
            got = _contain(home, values, t, capsys)
            assert [(r["column_id"], r["containment"]) for r in got] == _brute(_oracle(folder), values, t)
            assert all(r["exact"] and r["overlap"] is not None for r in got)
    for values in QUERIES:  # top-k join by falling thresholds
        _contain(home, values, 1.0, capsys)
        assert main(["search", "join", "--method", "lshe", "--values", str(home / "q.txt"), "--k", "3", "--json"]) == 0
        got = [(r["overlap"], r["column_id"]) for r in json.loads(capsys.readouterr().out)]
        q = {v for v in map(normalize_token, values) if v is not None}
        overlaps = sorted((-len(q & s), c) for c, s in _oracle(folder).items() if q & s)
        assert got == [(-o, c) for o, c in overlaps[:3]]
    unverified = _contain(home, QUERIES[0], 0.5, capsys, "--no-verify")
    assert not any(r["exact"] for r in unverified)
    assert {c for c, _ in _brute(_oracle(folder), QUERIES[0], 0.5)} <= {r["column_id"] for r in unverified}

    # a table grows past every partition, one disappears, one arrives
    _write(folder / "b.csv", ["town"], [[f"city{i}" for i in range(100, 300)] + [f"far{i}" for i in range(3000)]])
    (folder / "c.csv").unlink()
    _write(folder / "f.csv", ["code"], [[f"c{i}" for i in range(40)]])
    before = json.loads(LakeStore(load_settings().lake).read_arrow("lshe_state").to_pylist()[0]["spec"])
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    assert main(["index"]) == 0
    state = LakeStore(load_settings().lake).read_arrow("lshe_state").to_pylist()[0]
    assert state["uppers"][-1] >= 3200 and state["n_raised"] >= 1 and not state["full"]
    assert json.loads(state["spec"]) == before
    with open_catalog(catalog_url).connect() as conn:
        published = set(conn.execute(select(LsheColumn.column_id)).scalars())
    assert published == set(_oracle(folder))
    for values in QUERIES:
        for t in (0.5, 0.9):
            got = _contain(home, values, t, capsys)
            assert [(r["column_id"], r["containment"]) for r in got] == _brute(_oracle(folder), values, t)

    # the repartition re-buckets, the answers stay
    assert main(["rebuild"]) == 0
    state = LakeStore(load_settings().lake).read_arrow("lshe_state").to_pylist()[0]
    assert state["n_raised"] == 0 and state["cost"] == pytest.approx(state["optimal_cost"])
    got = _contain(home, QUERIES[1], 0.5, capsys, "--k", "2")
    assert [(r["column_id"], r["containment"]) for r in got] == _brute(_oracle(folder), QUERIES[1], 0.5)[:2]

    # over HTTP
    client = TestClient(create_app(load_settings()))
    answer = client.post("/v1/search/contain", json={"values": QUERIES[2], "threshold": 0.5})
    assert answer.status_code == 200
    assert [(r["column_id"], r["containment"]) for r in answer.json()["results"]] == _brute(
        _oracle(folder), QUERIES[2], 0.5
    )
    assert client.post("/v1/search/contain", json={"values": ["a"], "threshold": 1.5}).status_code == 422


def test_a_query_signed_otherwise_is_refused_and_a_spec_change_resigns(
    home: Path, catalog_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = home / "files"
    _lake(folder, np.random.default_rng(1))
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    assert main(["index"]) == 0
    other = MinHashSpec(num_perm=64, seed=1)
    with open_catalog(catalog_url).connect() as conn:
        loaded = load_index(conn)
        assert loaded.index.spec == MinHashSpec(num_perm=128, seed=1)
        with pytest.raises(SignatureMismatchError, match="num_perm"):
            signed_candidates(loaded, other, signature(other, ["city1"]), 1, 0.5)

    # the settings change: the next batch re-signs the whole lake with the new spec
    (home / "juncture.toml").write_text("[index]\ncells_buckets = 4\n\n[index.lshensemble]\nnum_perm = 64\n")
    _write(folder / "g.csv", ["k"], [["city1", "city2"]])
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    assert main(["index"]) == 0
    state = LakeStore(load_settings().lake).read_arrow("lshe_state").to_pylist()[0]
    assert state["full"] and json.loads(state["spec"])["num_perm"] == 64
    with open_catalog(catalog_url).connect() as conn:
        assert load_index(conn).index.spec == other
        assert {len(s) for s in conn.execute(select(LsheColumn.signature)).scalars()} == {64 * 4}
    got = _contain(home, QUERIES[0], 0.7, capsys)
    assert [(r["column_id"], r["containment"]) for r in got] == _brute(_oracle(folder), QUERIES[0], 0.7)
    assert main(["search", "contain", "--values", str(home / "q.txt"), "--threshold", "0"]) == 2
