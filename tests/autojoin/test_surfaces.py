"""`juncture autojoin` and POST /v1/autojoin: the issue's JSON document, and bad input answered
with one line and exit 2 (CLI) or a 4xx with a message (API)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from catalog.api.app import create_app
from catalog.cli.main import main
from catalog.core.settings import Settings

PEOPLE = [("Hopper", "Grace"), ("Lovelace", "Ada"), ("Turing", "Alan"), ("Curie", "Marie"), ("Noether", "Emmy")]
SOURCE = "name,born\n" + "".join(f'"{last}, {first}",{1900 + i}\n' for i, (last, first) in enumerate(PEOPLE))
TARGET = "full,field\n" + "".join(f"{first} {last},x\n" for last, first in reversed(PEOPLE))
EXPECTED = {
    "pairs": [{"source_row": i, "target_row": len(PEOPLE) - 1 - i} for i in range(len(PEOPLE))],
    "program": 'Concat(SplitSubstr(name, ", ", -1), " ", SplitSubstr(name, ", ", 0))',
    "source_columns": ["name"],
    "target_columns": ["full"],
    "coverage": len(PEOPLE),
    "fuzzy": False,
}


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    monkeypatch.setenv("JUNCTURE_HOME", str(tmp_path / "home"))
    (tmp_path / "s.csv").write_text(SOURCE, encoding="utf-8")
    (tmp_path / "t.csv").write_text(TARGET, encoding="utf-8")
    return str(tmp_path / "s.csv"), str(tmp_path / "t.csv")


def test_cli_prints_the_issue_document(files: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["autojoin", *files, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == EXPECTED
    assert main(["autojoin", *files]) == 0
    out = capsys.readouterr().out
    assert EXPECTED["program"] in out and "coverage: 5 target key rows" in out


def test_cli_bad_sides_exit_2_with_one_line(files: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["autojoin", files[0], "nowhere.csv"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "TARGET: no such file" in err
    assert main(["autojoin", files[0], "not a table"]) == 2
    assert "neither a CSV file nor a lake table_id" in capsys.readouterr().err
    assert main(["autojoin", files[0], "socrata:abcd-1234"]) == 2  # a table_id the (empty) lake lacks
    assert "unknown table" in capsys.readouterr().err


def test_api_answers_the_same_document(catalog_settings: Settings) -> None:
    client = TestClient(create_app(catalog_settings))
    answer = client.post("/v1/autojoin", json={"source": {"csv": SOURCE}, "target": {"csv": TARGET}})
    assert answer.status_code == 200 and answer.json() == EXPECTED
    both = client.post("/v1/autojoin", json={"source": {"csv": SOURCE, "table_id": "x"}, "target": {"csv": TARGET}})
    assert both.status_code == 422
    empty = client.post("/v1/autojoin", json={"source": {"csv": ""}, "target": {"csv": TARGET}})
    assert empty.status_code == 400 and "empty" in empty.json()["detail"]
    unknown = client.post("/v1/autojoin", json={"source": {"table_id": "file:x.csv"}, "target": {"csv": TARGET}})
    assert unknown.status_code == 404
