"""Files built to exhaust memory, generated here in tmp: each is refused (or read within its limits)
before its cells are held, with a reason naming the limit, and the crawl goes on with the rest."""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import json
import os
import random
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import openpyxl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from plugins.sources.parsing import ParseError, ParseLimits, parse_file
from spark_jobs.crawl.crawl import run_crawl
from tests.crawl.conftest import bronze, crawl_settings, csv_bytes

ROOT = Path(__file__).resolve().parents[2]


def padded_xlsx(path: Path, rows: list[list[object]], dimension: str = "A1:XFD20000") -> None:
    """A small workbook whose sheet declares `dimension` (readers that trust it pad every row)."""
    wb = openpyxl.Workbook()
    for row in rows:
        wb.active.append(row)
    plain = path.with_suffix(".plain.xlsx")
    wb.save(plain)
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "xl/worksheets/sheet1.xml":
                data = re.sub(rb'<dimension ref="[^"]*"', f'<dimension ref="{dimension}"'.encode(), data)
            dst.writestr(item, data)
    plain.unlink()


def peak_rss_mb(code: str) -> tuple[float, str]:
    """Run `code` in a fresh interpreter; its peak resident memory in MB and its last output line.

    The peak is the process's own high-water mark (`VmHWM`), not `ru_maxrss`: Linux carries the
    forked parent's resident size over exec into `ru_maxrss`, so a child of a large test process
    would report the parent's memory as its own."""
    wrapped = code + (
        "\nprint(next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith('VmHWM')) / 1024)"
    )
    done = subprocess.run(
        [sys.executable, "-c", wrapped],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout.strip().splitlines()
    return float(out[-1]), out[-2] if len(out) > 1 else ""


@pytest.mark.timeout(120)
def test_xlsx_declaring_a_huge_dimension_is_read_as_stored(tmp_path: Path) -> None:
    path = tmp_path / "padded.xlsx"
    padded_xlsx(path, [["city", "n"], ["Oslo", 1], ["Lima", 2]])
    assert path.stat().st_size < 10_000
    content = parse_file(str(path), "xlsx", ParseLimits())
    assert content.headers == ["city", "n"] and content.n_rows == 2
    assert [list(c) for c in content.columns] == [["Oslo", "Lima"], ["1", "2"]]


def test_xlsx_over_the_cell_limit_is_refused_while_streaming(tmp_path: Path) -> None:
    path = tmp_path / "wide.xlsx"
    padded_xlsx(path, [[f"h{i}" for i in range(20)]] + [[i] * 20 for i in range(30)], dimension="A1:T31")
    with pytest.raises(ParseError, match=r"more than 200 cells"):
        parse_file(str(path), "xlsx", ParseLimits(max_cells=200))
    with pytest.raises(ParseError, match=r"more than 10 columns"):
        parse_file(str(path), "xlsx", ParseLimits(max_columns=10))
    assert parse_file(str(path), "xlsx", ParseLimits(max_cells=600)).n_rows == 30


@pytest.mark.timeout(300)
def test_a_single_line_of_ten_million_columns_is_refused_in_little_memory(tmp_path: Path) -> None:
    path = tmp_path / "line.csv"
    path.write_bytes(b"a," * 10_000_000 + b"a")  # 20 MB, one line, 10,000,001 columns
    code = (
        "from plugins.sources.parsing import ParseError, ParseLimits, parse_file\n"
        f"try:\n    parse_file({str(path)!r}, 'csv', ParseLimits())\nexcept ParseError as e:\n    print(e.reason)"
    )
    rss, reason = peak_rss_mb(code)
    assert reason == "the header has more than 16384 columns (crawl.max_columns)"
    assert rss < 400, f"peak RSS {rss:.0f} MB"


def test_a_body_row_of_millions_of_fields_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "row.csv"
    path.write_bytes(b"a,b\n1,2\n" + b"x," * 2_000_000 + b"\n3,4\n")
    with pytest.raises(ParseError, match=r"line 3 has more than 16384 fields"):
        parse_file(str(path), "csv", ParseLimits())


@pytest.mark.parametrize("ragged", [False, True])
def test_rows_over_the_limit_are_refused_on_both_csv_readers(tmp_path: Path, ragged: bool) -> None:
    rows = [["a", "b"]] + [[str(i), "x"] for i in range(500)]
    if ragged:
        rows[3] = ["1"]  # pyarrow refuses it; the lenient reader takes over
    path = tmp_path / "rows.csv"
    path.write_bytes(csv_bytes(rows))
    assert parse_file(str(path), "csv", ParseLimits(max_rows=500)).n_rows == 500
    with pytest.raises(ParseError, match=r"more than 499 rows"):
        parse_file(str(path), "csv", ParseLimits(max_rows=499))
    with pytest.raises(ParseError, match=r"more than 900 cells"):
        parse_file(str(path), "csv", ParseLimits(max_cells=900))


def test_compressed_and_binary_files_are_refused(tmp_path: Path) -> None:
    table = csv_bytes([["a", "b"]] + [[str(i), "x" * 10] for i in range(200)])
    files = {
        "t.csv.bz2.csv": (bz2.compress(table), "bzip2-compressed"),
        "gz_of_bz2.csv.gz": (gzip.compress(bz2.compress(table)), "bzip2-compressed"),
        "noise.csv": (random.Random(0).randbytes(64 * 1024), "binary content"),
        "t.json": (bz2.compress(b'[{"a": 1}]'), "bzip2-compressed"),
    }
    for name, (data, why) in files.items():
        (tmp_path / name).write_bytes(data)
        fmt = "json" if name.endswith(".json") else "csv"
        with pytest.raises(ParseError, match=why):
            parse_file(str(tmp_path / name), fmt, ParseLimits())


def test_json_over_its_limits_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text(json.dumps([{"a": "x" * 100} for _ in range(2000)]))
    with pytest.raises(ParseError, match=r"JSON document larger than 100000 bytes"):
        parse_file(str(big), "json", ParseLimits(max_json_bytes=100_000))
    wide = tmp_path / "wide.json"
    wide.write_text(json.dumps([{f"k{i}": i for i in range(50)}]))
    with pytest.raises(ParseError, match=r"more than 20 columns"):
        parse_file(str(wide), "json", ParseLimits(max_columns=20))


def test_parquet_over_the_row_limit_is_refused_from_its_metadata(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": list(range(1000))}), path)
    with pytest.raises(ParseError, match=r"more than 999 rows"):
        parse_file(str(path), "parquet", ParseLimits(max_rows=999))
    assert parse_file(str(path), "parquet", ParseLimits(max_rows=1000)).n_rows == 1000


def test_bombs_fail_alone_and_the_crawl_goes_on(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "good.csv").write_bytes(csv_bytes([["a"], ["1"]]))
    (root / "line.csv").write_bytes(b"a," * 100_000 + b"a")
    (root / "zipped.csv").write_bytes(bz2.compress(csv_bytes([["a"], ["1"]] * 50)))
    (root / "tall.tsv").write_bytes(b"a\tb\n" + b"1\t2\n" * 2000)
    settings = crawl_settings(tmp_path / "home")
    settings = dataclasses.replace(settings, crawl=dataclasses.replace(settings.crawl, max_rows=1000))
    report = run_crawl(settings, folder=str(root))
    failures = dict(report.failures)
    assert [r["table_id"] for r in bronze(settings)[0]] == ["file:good.csv"]
    assert "more than 16384 columns" in failures["file:line.csv"]
    assert "bzip2-compressed" in failures["file:zipped.csv"]
    assert "more than 1000 rows" in failures["file:tall.tsv"]


def test_memory_error_fails_the_dataset_and_the_crawl_goes_on(tmp_path: Path) -> None:
    """A real MemoryError, in a child whose address space is capped: the portal's JSON resource
    that needs more than that (millions of tiny objects: far more in memory than on the wire)
    fails with the reason, the small table still lands."""
    huge = "[" + ",".join(['{"a":1}'] * 8_000_000) + "]"
    (tmp_path / "huge.json").write_text(huge)
    code = f"""
import dataclasses, resource
from pathlib import Path
from catalog.core.settings import SourceConfig
from plugins.local_portal import serve_in_background
from tests.crawl.conftest import crawl_settings, csv_bytes
from spark_jobs.crawl.crawl import run_crawl
portal = serve_in_background(Path({str(tmp_path / "portal")!r}))
portal.store.add_ckan("a-small", [("r", "CSV", csv_bytes([["a"], ["1"]]))])
portal.store.add_ckan("b-huge", [("r", "JSON", Path({str(tmp_path / "huge.json")!r}).read_bytes())])
settings = crawl_settings(Path({str(tmp_path / "home")!r}), max_json_bytes=1 << 30, max_download_bytes=1 << 30,
                          max_decompressed_bytes=1 << 30, max_rows=1 << 30, max_cells=1 << 30)
settings = dataclasses.replace(settings, sources=(SourceConfig(name="ck", kind="ckan", url=portal.url),))
import pyarrow, deltalake  # loaded before the cap
resource.setrlimit(resource.RLIMIT_STACK, (1 << 20, resource.getrlimit(resource.RLIMIT_STACK)[1]))
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (int(open('/proc/self/statm').read().split()[0]) * 4096 + (1 << 30), hard))
report = run_crawl(settings)
print(report.new, report.failures)
"""
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "1 [('ckan:127.0.0.1:b-huge/r', 'MemoryError')]"
