"""The command-line contract: help, exit statuses, one-line errors, lookup against a real catalog."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from catalog.cli.main import main
from catalog.core.settings import environment_with
from catalog.db.engine import open_catalog, session_scope
from catalog.db.models import CatalogColumn, CatalogTable

CONTRACT = ["demo", "portal", "crawl", "index", "update", "rebuild", "lookup", "search", "serve"]
JUNCTURE = str(Path(sys.executable).with_name("juncture"))
# Every `juncture` process builds the whole parser (each family's search methods and kinds included)
# and loads the settings (an `[index]` table loads every family's settings class); none of these may
# load before a command that uses them runs.
HEAVY = ("pyspark", "py4j", "airflow", "pyarrow", "pandas", "scipy", "fastapi", "pydantic", "uvicorn", "alembic")
PARSER_PROBE = """
import sys
from catalog.cli.main import build_parser
from catalog.core.settings import load_settings
build_parser()
load_settings()
print(','.join(sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1:]))))
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalog_url: str) -> Path:
    monkeypatch.chdir(tmp_path)
    for var in [v for v in os.environ if v.startswith("JUNCTURE_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("JUNCTURE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("JUNCTURE_CATALOG_URL", catalog_url)
    engine = open_catalog(catalog_url)
    with session_scope(engine) as s:
        s.add(
            CatalogTable(
                table_id="socrata:data.example.org:abcd-1234",
                name="Trees",
                n_rows=2,
                n_columns=1,
                published_at=dt.datetime.now(dt.UTC),
            )
        )
        s.add(
            CatalogColumn(
                column_id="socrata:data.example.org:abcd-1234#species",
                table_id="socrata:data.example.org:abcd-1234",
                position=1,
                header="species",
            )
        )
    return tmp_path


def test_help_lists_every_contract_command() -> None:
    out = subprocess.run([JUNCTURE, "--help"], capture_output=True, text=True, check=True).stdout
    for command in CONTRACT:
        assert f"    {command}" in out


def test_parser_and_settings_import_nothing_heavy(tmp_path: Path) -> None:
    (tmp_path / "juncture.toml").write_text("[index]\njoinable_k = 20\n", encoding="utf-8")
    env = environment_with(os.environ)
    proc = subprocess.run(
        [sys.executable, "-c", PARSER_PROBE, *HEAVY], capture_output=True, text=True, cwd=tmp_path, env=env, check=True
    )
    assert proc.stdout == "\n"


def test_a_semantic_search_before_any_index_exits_2(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / "q.txt").write_text("boston\n", encoding="utf-8")
    assert main(["search", "semantic", "--values", str(home / "q.txt")]) == 2
    err = capsys.readouterr().err
    assert "no PEXESO index yet" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["lookup"],
        ["lookup", "bogus", "x"],
        ["nosuchcommand"],
        ["lookup", "table"],
        ["search", "join", "--values", "f", "--k", "ten"],
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("juncture")


def test_a_value_starting_with_a_dash_is_shown_how_to_pass(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse takes `-88.8.1` for an option; the one line says how to give it as a value."""
    with pytest.raises(SystemExit) as exit_:
        main(["search", "nary", "--csv", "q.csv", "--key", "-88.8.1,lat"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--key=VALUE" in err and err.count("\n") == 1


def test_lookup_table_json(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lookup", "table", "socrata:data.example.org:abcd-1234", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["table_id"] == "socrata:data.example.org:abcd-1234"
    assert (doc["name"], doc["n_columns"]) == ("Trees", 1)


def test_lookup_columns_json_and_text(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lookup", "columns", "socrata:data.example.org:abcd-1234", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == [
        {
            "column_id": "socrata:data.example.org:abcd-1234#species",
            "table_id": "socrata:data.example.org:abcd-1234",
            "column": "species",
            "position": 1,
            "portal_type": None,
        }
    ]
    assert main(["lookup", "columns", "socrata:data.example.org:abcd-1234"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].split()[:3] == ["column_id", "table_id", "column"] and "species" in text[1]


def test_unknown_id_exits_2_with_one_line(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lookup", "table", "file:nope.csv", "--json"]) == 2
    err = capsys.readouterr().err
    assert err == "juncture: unknown table_id 'file:nope.csv'\n"


def test_bad_settings_exit_2_naming_file_and_key(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / "juncture.toml").write_text("[spark]\nshuffle_partitions = 'lots'\n")
    assert main(["lookup", "table", "file:x.csv"]) == 2
    err = capsys.readouterr().err
    assert "juncture.toml" in err and "spark.shuffle_partitions" in err


def test_verbose_logs_structured_lines(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUNCTURE_CATALOG_URL", f"sqlite:///{home / 'fresh.db'}")  # forces a schema upgrade
    assert main(["-v", "lookup", "columns", "file:nope.csv"]) == 2
    err = capsys.readouterr().err
    assert 'level=info logger=catalog.db.engine event="catalog schema upgrade"' in err


def test_quiet_and_verbose_are_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["-q", "-v", "lookup", "table", "x"])
    assert exit_.value.code == 2


def test_the_demo_removes_its_portal_files_even_when_a_dag_fails(
    tmp_path: Path, catalog_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`juncture demo` seeds a local portal in a temporary folder (about 40 MB of real tables); it
    is removed when the demo ends, however it ends (every `make demo` used to leave one)."""
    import tempfile

    from catalog.cli.context import CliContext
    from catalog.cli.demo import run_demo
    from spark_jobs.orchestration import airflow_runner
    from tests.conftest import make_settings

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    def failing_dag(*args: object, **kwargs: object) -> None:
        assert list(scratch.glob("juncture-portal-*/*")), "the portal is seeded before the first DAG"
        raise RuntimeError("lake_crawl failed")

    monkeypatch.setattr(airflow_runner, "run_dag", failing_dag)
    ctx = CliContext(make_settings(tmp_path / "home", catalog_url=catalog_url))
    with pytest.raises(RuntimeError, match="lake_crawl failed"):
        run_demo(ctx)
    assert list(scratch.iterdir()) == []
