"""An index family added through the registry alone: the toy family in `tests/registry/toy/` (its
lake unit, catalog table and migration, settings section, search method and search kind) is
built, updated, rebuilt, published and searched by the pipeline and the CLI, on both databases,
without a line of it outside its folder."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from catalog.cli.main import main
from catalog.core import registry
from catalog.core.identity import file_table_id, normalize_token
from catalog.core.settings import load_settings
from catalog.db.engine import open_catalog
from spark_jobs.lake.store import LakeStore
from tests.conftest import cli_home
from tests.registry.toy.models import ToyColumn

TOY = registry.FamilyEntry(
    "toy",
    search="tests.registry.toy.search:FAMILY",
    pipeline="tests.registry.toy.pipeline:FAMILY",
    settings="tests.registry.toy.settings:ToySettings",
    migrations="tests.registry.toy.migrations",
    migration_head="toy_0001",
)


@pytest.fixture
def toy_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalog_url: str, spark) -> Iterator[Path]:  # type: ignore[no-untyped-def]
    cli_home(tmp_path, monkeypatch, catalog_url, "[index]\ncells_buckets = 4\n\n[index.toy]\nrebuild_always = true\n")
    registry.register(TOY)
    try:
        yield tmp_path
    finally:
        registry.unregister("toy")


def _write(path: Path, rows: list[list[str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)


def _oracle(folder: Path) -> dict[str, tuple[str, list[str]]]:
    """column_id -> (table_id, sorted distinct tokens), straight from the files."""
    out = {}
    for path in sorted(folder.glob("*.csv")):
        with path.open(newline="", encoding="utf-8") as f:
            header, *rows = list(csv.reader(f))
        table_id = file_table_id(path.name)
        for i, name in enumerate(header):
            tokens = sorted({t for r in rows if (t := normalize_token(r[i])) is not None})
            if tokens:
                out[f"{table_id}#{name}"] = (table_id, tokens)
    return out


def _catalog(url: str) -> dict[str, tuple[str, list[str]]]:
    with open_catalog(url).connect() as conn:
        return {
            c: (t, json.loads(tok))
            for c, t, tok in conn.execute(select(ToyColumn.column_id, ToyColumn.table_id, ToyColumn.tokens))
        }


def _search(tmp: Path, values: list[str], capsys: pytest.CaptureFixture[str]) -> list[tuple[int, str]]:
    query = tmp / "q.txt"
    query.write_text("\n".join(values) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["search", "join", "--method", "toy", "--values", str(query), "--k", "3", "--json"]) == 0
    return [(r["overlap"], r["column_id"]) for r in json.loads(capsys.readouterr().out)]


def _brute(oracle: dict[str, tuple[str, list[str]]], values: list[str], k: int) -> list[tuple[int, str]]:
    query = {t for t in map(normalize_token, values) if t is not None}
    hits = [(len(query & set(tokens)), c) for c, (_, tokens) in oracle.items()]
    return sorted((h for h in hits if h[0] > 0), key=lambda h: (-h[0], h[1]))[:k]


def test_a_family_from_a_test_folder_runs_through_pipeline_and_cli(
    toy_home: Path, catalog_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lake_dir = toy_home / "files"
    _write(lake_dir / "a.csv", [["city", "n"], ["Boston", "1"], ["Denver", "2"], ["Austin", "3"]])
    _write(lake_dir / "b.csv", [["town"], ["boston"], ["DENVER"], ["Fresno"]])
    settings = load_settings()
    query = ["Boston", "Denver", "Fresno", "nowhere"]

    # built by the first batch, published, searched
    assert main(["crawl", "--dir", str(lake_dir), "--no-progress"]) == 0
    assert main(["index"]) == 0
    store = LakeStore(settings.lake)
    assert store.manifest("toy") is not None and store.manifest("toy").batch_id == 1
    assert _catalog(catalog_url) == _oracle(lake_dir)
    assert _search(toy_home, query, capsys) == _brute(_oracle(lake_dir), query, 3)
    assert main(["search", "toycount", "--table", "file:a.csv", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"table_id": "file:a.csv", "n_columns": 2}

    # updated by the next batch
    _write(lake_dir / "b.csv", [["town"], ["Austin"], ["Fresno"]])
    _write(lake_dir / "c.csv", [["place"], ["Boston"], ["Fresno"], ["Austin"]])
    (lake_dir / "a.csv").unlink()
    assert main(["crawl", "--dir", str(lake_dir), "--no-progress"]) == 0
    assert main(["index"]) == 0
    assert LakeStore(settings.lake).manifest("toy").batch_id == 2
    assert _catalog(catalog_url) == _oracle(lake_dir)
    assert _search(toy_home, query, capsys) == _brute(_oracle(lake_dir), query, 3)

    # rebuilt (its settings section says a rebuild is always due) and published again
    assert main(["rebuild", "--if-due"]) == 0
    manifest = LakeStore(settings.lake).manifest("toy")
    assert manifest.kind == "rebuild" and manifest.state["rebuilds"] == 1
    assert _catalog(catalog_url) == _oracle(lake_dir)
    assert _search(toy_home, query, capsys) == _brute(_oracle(lake_dir), query, 3)
