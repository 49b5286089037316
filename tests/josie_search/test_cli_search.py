"""`juncture search join`: JSON shape, exit statuses, no heavy imports (Spark, Airflow, Arrow, pandas,
FastAPI), cost refit."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from bench.josie_lake import store_index
from catalog.cli.main import main
from catalog.db.engine import open_catalog
from catalog.search.josie import build_memory_index
from catalog.search.josie.brute_force import brute_force_top_k
from tests.josie_search.lakes import random_lake

# What a new `juncture search join` process must not import (it needs SQLAlchemy, numpy and mmh3):
# each would add a tenth of a second or more to its start. pyarrow belongs to the LSH Ensemble
# search, alembic to a schema upgrade.
HEAVY = ("pyspark", "py4j", "airflow", "pyarrow", "pandas", "scipy", "fastapi", "pydantic", "uvicorn", "alembic")
PROBE = f"""
import sys
HEAVY = {HEAVY!r}
from catalog.cli.main import main
rc = main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.split('.')[0] in HEAVY)
print('HEAVY=' + ','.join(heavy), file=sys.stderr)
sys.exit(rc)
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalog_url: str) -> tuple[Path, dict[str, set[str]]]:
    monkeypatch.chdir(tmp_path)
    for var in [v for v in os.environ if v.startswith("JUNCTURE_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("JUNCTURE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("JUNCTURE_CATALOG_URL", catalog_url)
    lake = random_lake(random.Random(21), n_sets=60, vocab=40)
    engine = open_catalog(catalog_url)
    with engine.begin() as conn:
        store_index(conn, build_memory_index(lake))
    engine.dispose()
    return tmp_path, lake


def _values_file(tmp: Path, values: list[str]) -> Path:
    path = tmp / "values.txt"
    path.write_text("\n".join(values) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("method", ["josie", "mergelist", "probeset", "brute"])
def test_json_results_match_brute_force(
    home: tuple[Path, dict[str, set[str]]], method: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tmp, lake = home
    query = sorted(set().union(*(lake[c] for c in sorted(lake)[:3])))
    path = _values_file(tmp, [v.upper() + "  " for v in query] + ["null", ""])
    assert main(["search", "join", "--values", str(path), "--k", "5", "--method", method, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    expected = brute_force_top_k(lake, set(query), 5)
    assert doc == [
        {"table_id": r.table_id, "column": r.column, "column_id": r.column_id, "overlap": r.overlap, "exact": True}
        for r in expected
    ]
    assert doc and all(d["overlap"] > 0 for d in doc)


def test_exclude_leaves_the_query_column_out(
    home: tuple[Path, dict[str, set[str]]], capsys: pytest.CaptureFixture[str]
) -> None:
    tmp, lake = home
    me = max(lake, key=lambda c: len(lake[c]))
    path = _values_file(tmp, sorted(lake[me]))
    assert main(["search", "join", "--values", str(path), "--k", "3", "--exclude", me, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["column_id"] for d in doc] == [
        r.column_id for r in brute_force_top_k(lake, lake[me], 3, exclude_column_id=me)
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["--values", "missing.txt"],
        ["--values", "VALUES", "--k", "0"],
        ["--values", "VALUES", "--k", "-3"],
        ["--k", "3"],
        ["--values", "VALUES", "--exclude", "file:nope.csv#x"],
    ],
)
def test_bad_requests_exit_2_with_one_line(
    home: tuple[Path, dict[str, set[str]]], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    tmp, _ = home
    path = _values_file(tmp, ["a"])
    argv = [str(path) if a == "VALUES" else a for a in argv]
    assert main(["search", "join", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("juncture: ")


def test_refit_costs_stores_constants(
    home: tuple[Path, dict[str, set[str]]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["search", "join", "--refit-costs", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["database"] in ("sqlite", "postgresql") and doc["read_list_b"] >= 0 and doc["read_set_b"] >= 0


def test_cli_from_stdin_in_a_subprocess_imports_nothing_heavy(home: tuple[Path, dict[str, set[str]]]) -> None:
    _tmp, lake = home
    query = "\n".join(sorted(lake[sorted(lake)[0]] | {"zzz"}))
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "search", "join", "--values", "-", "--k", "3", "--json"],
        input=query,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY=\n" in proc.stderr
    doc = json.loads(proc.stdout)
    assert [d["overlap"] for d in doc] == [r.overlap for r in brute_force_top_k(lake, set(query.split("\n")), 3)]


def test_a_semantic_search_needs_the_pexeso_index(
    home: tuple[Path, dict[str, set[str]]], capsys: pytest.CaptureFixture[str]
) -> None:
    tmp, _ = home
    path = _values_file(tmp, ["a"])
    assert main(["search", "semantic", "--values", str(path)]) == 2
    assert "no PEXESO index yet" in capsys.readouterr().err
