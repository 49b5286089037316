"""Parsing the bad-input corpus (tests/crawl/corpus, plus big files generated here): each file either
parses with its problems counted or fails with a readable reason. Oracles are written out by hand."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from plugins.sources.parsing import ParseError, ParseLimits, detect_encoding, parse_file

CORPUS = Path(__file__).parent / "corpus"
LIMITS = ParseLimits(max_cell_bytes=64 * 1024, max_decompressed_bytes=8 * 1024 * 1024)


def rows_of(path: Path, fmt: str = "csv") -> tuple[list, list[list], list[str]]:
    p = parse_file(str(path), fmt, LIMITS)
    cols = [c.to_pylist() if hasattr(c, "to_pylist") else list(c) for c in p.columns]
    return p.headers, [list(r) for r in zip(*cols, strict=True)], p.problems


@pytest.mark.parametrize(
    ("name", "headers", "rows"),
    [
        ("latin1.csv", ["city", "note"], [["Zürich", "café crème"], ["Málaga", "niño"]]),
        ("utf8_bom.csv", ["name", "value"], [["Åsa", "1"], ["José", "2"]]),
        ("utf16.csv", ["name", "value"], [["Åsa", "1"], ["東京", "2"]]),
        ("blank_dup_headers.csv", ["", "name", "name", " "], [["1", "a", "b", "c"], ["2", "d", "e", "f"]]),
        ("semicolon_tab.tsv", ["k", "v"], [["x", "1"], ["y", "2"]]),
    ],
)
def test_encodings_and_headers(name: str, headers: list, rows: list) -> None:
    got_headers, got_rows, problems = rows_of(CORPUS / name, "tsv" if name.endswith(".tsv") else "csv")
    assert (got_headers, got_rows, problems) == (headers, rows, [])


def test_ragged_rows_are_padded_cut_and_counted() -> None:
    headers, rows, problems = rows_of(CORPUS / "ragged.csv")
    assert headers == ["a", "b", "c"]
    assert rows == [["1", "2", "3"], ["4", "5", None], ["6", "7", "8"], ["10", "11", "12"]]
    assert problems == ["1 short rows padded with nulls", "1 long rows cut to the header's 3 columns"]


def test_stray_quotes_parse_leniently_and_are_counted() -> None:
    headers, rows, problems = rows_of(CORPUS / "stray_quote.csv")
    assert headers == ["id", "text"]
    assert [r[0] for r in rows] == ["1", "2", "3"]
    assert rows[1] == ["2", "plain"]
    assert any("quote" in p for p in problems) and any("long rows" in p for p in problems)


def test_header_only_is_an_empty_table() -> None:
    assert rows_of(CORPUS / "header_only.csv") == (["alpha", "beta", "gamma"], [], [])


def test_json_records() -> None:
    headers, rows, _ = rows_of(CORPUS / "records.json", "json")
    assert headers == ["a", "b", "c"]
    assert rows == [["1", "x", None], ["2.5", None, "true"], ["12", None, None]]


@pytest.mark.parametrize(
    ("name", "fmt", "reason"),
    [
        ("empty.csv", "csv", "empty file"),
        ("html_error.csv", "csv", "HTML page"),
        ("invalid.json", "json", "invalid JSON"),
    ],
)
def test_failures_have_reasons(name: str, fmt: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason):
        parse_file(str(CORPUS / name), fmt, LIMITS)


def test_huge_cell_fails_without_reading_it_all(tmp_path: Path) -> None:
    path = tmp_path / "big_cell.csv"
    with path.open("wb") as f:
        f.write(b"id,blob\n1,")
        chunk = b"x" * (1 << 20)
        for _ in range(100):  # one cell of 100 MB
            f.write(chunk)
        f.write(b"\n2,small\n")
    with pytest.raises(ParseError, match="over the limit"):
        parse_file(str(path), "csv", LIMITS)


def test_gzip_bomb_is_capped(tmp_path: Path) -> None:
    path = tmp_path / "bomb.csv"
    with gzip.open(path, "wb", compresslevel=9) as f:
        f.write(b"a,b\n")
        zeros = b"0" * (1 << 20)
        for _ in range(64):
            f.write(zeros)
    assert path.stat().st_size < 1_000_000
    with pytest.raises(ParseError, match="gzip bomb"):
        parse_file(str(path), "csv", LIMITS)


def test_gzip_csv_within_cap_parses(tmp_path: Path) -> None:
    path = tmp_path / "ok.csv.gz"
    path.write_bytes(gzip.compress(b"a,b\n1,2\n"))
    assert rows_of(path) == (["a", "b"], [["1", "2"]], [])


def test_xlsx(tmp_path: Path) -> None:
    import datetime as dt

    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["name", "n", "when"])
    ws.append(["a", 1, dt.date(2024, 1, 2)])
    ws.append(["b", 2.5, None])
    wb.save(tmp_path / "t.xlsx")
    headers, rows, _ = rows_of(tmp_path / "t.xlsx", "xlsx")
    assert headers == ["name", "n", "when"]
    assert rows == [["a", "1", "2024-01-02T00:00:00"], ["b", "2.5", None]]


def test_partitioned_delta_keeps_partition_columns(tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(
        str(tmp_path / "t"), pa.table({"k": ["a", "b", "c"], "p": ["x", "y", None], "n": [1, 2, 3]}), partition_by=["p"]
    )
    headers, rows, _ = rows_of(tmp_path / "t", "delta")
    assert headers == ["k", "p", "n"]
    assert sorted(rows, key=str) == sorted([["a", "x", "1"], ["b", "y", "2"], ["c", None, "3"]], key=str)


@pytest.mark.parametrize(
    ("text", "written_as"),
    [
        ("ville,pays\nSão Paulo,Brésil\nGenève,Suisse\nÅrhus,Danemark\nZürich,Suisse\nMálaga,España\n", "latin-1"),
        ("miasto,kraj\nŁódź,Polska\nGdańsk,Polska\nŚwiętochłowice,Polska\nKraków,Polska\nWrocław,Polska\n", "cp1250"),
        ("город,страна\nМосква,Россия\nСанкт-Петербург,Россия\nНовосибирск,Россия\n", "cp1251"),
    ],
)
def test_single_byte_code_pages_read_back_the_text_written(text: str, written_as: str) -> None:
    """A tie between code pages goes to Windows-1252 (a Latin-1 file once read as cp1250 turned
    "São Paulo" into "Săo Paulo"); text that reads worse in it keeps its own code page."""
    data = text.encode(written_as)
    assert data.decode(detect_encoding(data)) == text
