"""`juncture autojoin` with lake tables: two CSV files crawled into bronze, then joined by their
table_ids (read from bronze cells with delta-rs), the same answer as from the files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from catalog.cli.main import main
from catalog.core.identity import file_table_id
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
