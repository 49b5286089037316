"""`juncture autojoin` with lake tables: two CSV files crawled into bronze, then joined by their
table_ids (read from bronze cells with delta-rs), the same answer as from the files."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from markupsafe import escape

from catalog.api.app import create_app
from catalog.cli.main import main
from catalog.core.identity import file_table_id
from catalog.core.settings import load_settings
from tests.autojoin.test_surfaces import EXPECTED, SOURCE, TARGET
from tests.conftest import cli_home

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalog_url: str, spark) -> Iterator[Path]:  # type: ignore[no-untyped-def]
    yield cli_home(tmp_path, monkeypatch, catalog_url, "[index]\ncells_buckets = 4\n")


def test_autojoin_by_table_id_equals_by_file(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / "files" / "people.csv").write_text(SOURCE, encoding="utf-8")
    (home / "files" / "directory.csv").write_text(TARGET, encoding="utf-8")
    assert main(["crawl", "--dir", str(home / "files"), "--no-progress"]) == 0
    capsys.readouterr()
    source, target = file_table_id("people.csv"), file_table_id("directory.csv")
    assert main(["autojoin", source, target, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == EXPECTED
    assert main(["autojoin", source, file_table_id("nowhere.csv"), "--json"]) == 2
    assert "unknown table" in capsys.readouterr().err


def test_search_transform_finds_the_table_and_its_program(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A lake of four tables (the directory keyed by "First Last", an unrelated one, one sharing
    only common words, one of numbers that digits of the query's `ref` would join); the query holds
    "Last, First": the directory comes first, with its program, and the numbers are no answer
    (`autojoin` alone joins them with `Substr(ref, 1, 5)`: a coincidence search leaves out)."""
    people = [
        ("Hopper", "Grace"), ("Lovelace", "Ada"), ("Turing", "Alan"), ("Curie", "Marie"), ("Noether", "Emmy"),
        ("Hamilton", "Margaret"), ("Franklin", "Rosalind"), ("Goodall", "Jane"), ("Meitner", "Lise"),
    ]  # fmt: skip
    directory = "full,field\n" + "".join(f"{first} {last},f{i}\n" for i, (last, first) in enumerate(people))
    (home / "files" / "directory.csv").write_text(directory, encoding="utf-8")
    (home / "files" / "codes.csv").write_text("code,n\n" + "".join(f"Q{i:04d},{i}\n" for i in range(40)))
    (home / "files" / "words.csv").write_text("word\n" + "".join(f"{w}\n" for w in ("grace", "alan", "jane")))
    measures = "value,other\n" + "".join(f"{1000 + 7 * i},{3 * i}\n" for i in range(60))
    (home / "files" / "measures.csv").write_text(measures)
    assert main(["crawl", "--dir", str(home / "files"), "--no-progress"]) == 0
    assert main(["index"]) == 0
    query = home / "query.csv"
    rows = [f'"{last}, {first}",{i},r{1000 + 7 * i}x\n' for i, (last, first) in enumerate(people)]
    query.write_text("name,n,ref\n" + "".join(rows))
    capsys.readouterr()
    assert main(["search", "transform", "--csv", str(query), "--json"]) == 0
    answers = json.loads(capsys.readouterr().out)
    assert answers[0] == {
        "coverage": len(people),
        "table_id": file_table_id("directory.csv"),
        "program": 'Concat(SplitSubstr(name, ", ", -1), " ", SplitSubstr(name, ", ", 0))',
        "query_columns": ["name"],
        "table_columns": ["full"],
    }
    assert not {file_table_id("codes.csv"), file_table_id("measures.csv")} & {a["table_id"] for a in answers}
    assert main(["search", "transform", "--csv", str(query), "--k", "0"]) == 2

    # the table's transformation page runs the same search with a lake table as the query, itself left out
    shutil.copy(query, home / "files" / "query.csv")
    assert main(["crawl", "--dir", str(home / "files"), "--no-progress"]) == 0
    assert main(["index"]) == 0
    capsys.readouterr()
    assert main(["search", "transform", "--csv", str(query), "--json"]) == 0
    lake_query = file_table_id("query.csv")
    expected = [(a["table_id"], str(a["coverage"])) for a in json.loads(capsys.readouterr().out)]
    with TestClient(create_app(load_settings(cwd=home))) as client:
        # the table is listed (`lake_index` precomputed its transformation lists): its page shows the
        # directory's join instead of the on-request button (the pair's program, learned in column-id
        # order, reads the directory: docs/algorithms/autojoin.md)
        listed = client.get("/table", params={"id": lake_query}).text
        assert 'action="/table/transform"' not in listed
        assert f'<tr data-column-id="{file_table_id("directory.csv")}#full"><td>name</td>' in listed
        page = client.get("/table/transform", params={"id": lake_query})
        assert page.status_code == 200 and str(escape(answers[0]["program"])) in page.text
        rows = re.findall(r'<tr data-table-id="([^"]*)" data-coverage="(\d+)">', page.text)
        assert rows[0] == (file_table_id("directory.csv"), str(len(people)))
        assert rows == [r for r in expected if r[0] != lake_query]
        assert client.get("/table/transform", params={"id": file_table_id("nowhere.csv")}).status_code == 404
        assert client.get("/table/transform", params={"id": "not-a-table"}).status_code == 400
