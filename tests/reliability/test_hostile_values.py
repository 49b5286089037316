"""A folder lake of hostile values, end to end on SQLite and PostgreSQL: `juncture crawl --dir`, then
`juncture index` (tokens, JOSIE, relations, publish), then every surface the catalog answers on —
`search join` (three methods), the lookups and the HTTP API — against a brute-force oracle computed
from the values written into the files, under the same normalization contract.

The corpus holds what PostgreSQL used to refuse while SQLite took it: tokens of 3,000-4,000
incompressible characters, a 10 KB header, NUL in cells and headers (CSV bytes and Parquet
strings), right-to-left text and overrides, combining marks, 64 KiB cells and a table of 10,000
columns. (A folder holds no format that can carry a lone surrogate; portal JSON can, and the
landing test in tests/foundation/test_column_tokens.py lands them.)
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import random
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from catalog import lookup
from catalog.api.app import create_app
from catalog.cli.main import main
from catalog.core.identity import column_headers, normalize_token, storable_text
from catalog.core.settings import load_settings
from catalog.db.engine import make_engine
from catalog.search.josie import DbIndexReader, search_join
from plugins.local_portal import serve_in_background
from spark_jobs.crawl.crawl import run_crawl
from spark_jobs.orchestration.pipeline import index_pending
from tests.crawl.conftest import crawl_settings, csv_bytes

pytestmark = pytest.mark.slow  # 2-4 minutes per database on two shared cores

Columns = list[list[str | None]]
N_WIDE = 10_000


def noise(n: int, rnd: random.Random) -> str:
    """n characters no compressor shrinks (PostgreSQL compresses index entries before their size
    limit), without the CSV delimiter, quotes or line breaks."""
    pools = [(0x30, 0x7A), (0x410, 0x44F), (0x4E00, 0x9FFF), (0x5D0, 0x5EA)]
    out = []
    for _ in range(n):
        lo, hi = rnd.choice(pools)
        out.append(chr(rnd.randrange(lo, hi)))
    return "".join(out)


class Lake:
    """The files of the lake and, per table, the headers and columns its parser yields."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tables: dict[str, tuple[list[str], Columns]] = {}

    def add_csv(self, name: str, headers: list[str], rows: list[list[str]]) -> None:
        with open(self.root / name, "w", encoding="utf-8", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows([headers, *rows])
        columns = [[v if v != "" else None for v in col] for col in zip(*rows, strict=True)]
        self.tables[f"file:{name}"] = (headers, columns)

    def add_parquet(self, name: str, headers: list[str], rows: list[list[str]]) -> None:
        columns: Columns = [list(col) for col in zip(*rows, strict=True)]
        pq.write_table(pa.table([pa.array(c, pa.string()) for c in columns], names=headers), self.root / name)
        self.tables[f"file:{name}"] = (headers, columns)

    def column_sets(self) -> dict[str, frozenset[str]]:
        """The oracle: column_id -> token set, by the contract (headers are landed text too)."""
        out = {}
        for table_id, (_headers, columns) in self.tables.items():
            for header, values in zip(self.headers(table_id), columns, strict=True):
                out[f"{table_id}#{header}"] = frozenset(t for t in map(normalize_token, values) if t is not None)
        return out

    def headers(self, table_id: str) -> list[str]:
        return column_headers([storable_text(h) for h in self.tables[table_id][0]])


def build_lake(root: Path) -> tuple[Lake, dict[str, list[str]]]:
    """The corpus, and the query value lists the test searches with."""
    rnd = random.Random(12)
    lake = Lake(root)
    long_tokens = [noise(rnd.randrange(3000, 4001), rnd) for _ in range(40)]
    big = ["B" * 65_536, "b" * 65_536 + "\u0301", rnd.choice("xyz") * 65_536]
    ids = [str(i) for i in range(40)]

    rows_a = [[ids[i], long_tokens[i], big[i % 3] if i < 6 else "", f"{i}.0"] for i in range(40)]
    lake.add_csv("long_tokens.csv", ["id", "long", "big", "float id"], rows_a)

    long_header = noise(10_000, rnd)
    rtl = ["\u05e9\u05dc\u05d5\u05dd", "\u202eevil\u202c", "\u0645\u0631\u062d\u0628\u0627 x", "e\u0301\u0301"]
    hostile_values = [
        "x\x00y",
        "\x00",
        "\ufffdabc",
        "abc\x00\ufffd",
        "\U0001f600",
        *rtl,
        "A\u030a",
        "\u00c5",
        " \x00n/a\x00 ",
        "NUL\x00L",
    ]
    rows_b = []
    for i in range(30):
        rows_b.append(
            [
                long_tokens[i + 10] if i < 25 else noise(3500, rnd),  # 15 shared with long_tokens.csv
                hostile_values[i % len(hostile_values)],
                rtl[i % len(rtl)] + str(i % 7),
                big[i % 3] if i < 3 else str(i),
            ]
        )
    lake.add_parquet("hostile.parquet", ["long\x00key", "\u202eRTL\u202c header", long_header, "big\x00"], rows_b)

    # NUL bytes in a CSV, after the first 4 KB (where the encoding is sniffed)
    rows_c = [[long_tokens[i], f"p\x00q{i % 3}", "\x00" if i % 4 == 0 else f"{i}\x00"] for i in range(5, 25)]
    lake.add_csv("nul_bytes.csv", ["long", "with nul", "nul\x00header"], rows_c)

    wide_headers = [f"c{j}" for j in range(N_WIDE)]
    wide_rows = [[ids[r] if j == 0 else f"w{j}.{r}" for j in range(N_WIDE)] for r in range(3)]
    lake.add_csv("wide.csv", wide_headers, wide_rows)

    queries = {
        "long": long_tokens[:30],
        "hostile": ["x\x00y", "ABC\ufffd", "\u202eEVIL\u202c", "\u05e9\u05dc\u05d5\u05dd0", "\u00c5", "n/a"],
        "big": [big[0], big[1], "b" * 65_536 + "\u0301"],
        "ids": [*ids[:3], "1.00", "p\x00q1", "pq2"],
    }
    return lake, queries


def oracle_top(sets: dict[str, frozenset[str]], values: Sequence[str], k: int) -> dict[str, int]:
    """Overlap of every lake column with the query's token set (brute force), positive ones only."""
    query = {t for t in map(normalize_token, values) if t is not None}
    return {c: len(query & s) for c, s in sets.items() if query & s}


def check_join(answers: list[dict], overlaps: dict[str, int], k: int) -> None:
    """The answer is a correct top-k: every listed column has its true overlap, overlaps descend, and
    no column left out beats the last one listed."""
    got = [(a["column_id"], a["overlap"]) for a in answers]
    assert all(overlaps.get(c) == o for c, o in got), got
    assert [o for _, o in got] == sorted((o for _, o in got), reverse=True)
    best = sorted(overlaps.values(), reverse=True)[:k]
    assert [o for _, o in got] == best


@pytest.fixture
def cli_env(tmp_path: Path, catalog_url: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in [v for v in os.environ if v.startswith("JUNCTURE_")]:
        monkeypatch.delenv(var)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JUNCTURE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("JUNCTURE_CATALOG_URL", catalog_url)
    monkeypatch.setenv("JUNCTURE_SPARK_MASTER", "local[2]")
    return tmp_path


def test_hostile_lake_end_to_end(spark, cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    folder = cli_env / "lake_files"
    folder.mkdir()
    lake, queries = build_lake(folder)
    sets = lake.column_sets()

    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"listed {len(lake.tables)}, new {len(lake.tables)}," in out and "failed 0" in out, out
    assert main(["index"]) == 0
    capsys.readouterr()

    for name, values in queries.items():
        values_file = cli_env / f"{name}.txt"
        values_file.write_text("\n".join(values) + "\n", encoding="utf-8")
        overlaps = oracle_top(sets, values, 10)
        assert overlaps, name
        for method in ("josie", "mergelist", "brute"):
            assert (
                main(["search", "join", "--values", str(values_file), "--k", "10", "--method", method, "--json"]) == 0
            )
            check_join(json.loads(capsys.readouterr().out), overlaps, 10)

    settings = load_settings()
    engine = make_engine(settings.catalog_url)
    client = TestClient(create_app(settings), raise_server_exceptions=False)
    try:
        with engine.connect() as conn:
            assert sorted(t.table_id for t in lookup.tables(conn, limit=100)) == sorted(lake.tables)
            for table_id in lake.tables:
                headers = lake.headers(table_id)
                assert [c.column for c in lookup.columns(conn, table_id)] == headers
                for header in headers[:6]:
                    column_id = f"{table_id}#{header}"
                    profile = lookup.profile(conn, column_id)
                    assert profile.column == header
                    for j in lookup.joinable(conn, column_id, k=50):
                        assert len(sets[column_id] & sets[j.column_id]) == j.overlap, (column_id, j.column_id)
                if len(headers) < 10:  # the API answers the same (the wide table's 10,000 ids: lookups only)
                    got = client.get(f"/v1/columns/{quote(table_id, safe='')}").json()["items"]
                    assert [c["column"] for c in got] == headers
            big = lookup.profile(conn, "file:long_tokens.csv#big")
            assert big.length_max is not None and big.length_max >= 65_536
            long_json = f"file:hostile.parquet#{lake.headers('file:hostile.parquet')[0]}"
            assert lake.headers("file:hostile.parquet")[0] == "longkey"
            joins = {j.column_id: j.overlap for j in lookup.joinable(conn, long_json, k=10)}
            assert joins.get("file:long_tokens.csv#long") == 25 and joins.get("file:nul_bytes.csv#long") == 15
        rtl_header = lake.headers("file:hostile.parquet")[1]
        response = client.get(f"/v1/profile/{quote('file:hostile.parquet#' + rtl_header, safe='')}")
        assert response.status_code == 200 and response.json()["column"] == rtl_header
        assert client.get("/v1/tables?source=%00").status_code == 422
    finally:
        engine.dispose()


def test_ckan_json_with_lone_surrogates_nul_and_long_stamps(spark, tmp_path: Path, catalog_url: str) -> None:  # type: ignore[no-untyped-def]
    """A CKAN resource in JSON (whose escapes can spell NUL and lone surrogates) with a stamp far over
    64 characters, crawled, indexed and published twice (the second time after a change), then the
    search and lookups against the oracle. PostgreSQL refused the stamp (`StringDataRightTruncation`)
    and the rerun failed the same way, blocking every later batch."""
    portal = serve_in_background(tmp_path / "portal")
    try:
        settings = dataclasses.replace(crawl_settings(tmp_path / "home", portal), catalog_url=catalog_url)
        rnd = random.Random(5)
        shared = [noise(3000, rnd) for _ in range(8)]
        headers = ["tok\x00en", "odd\ud800", "\u202eRTL\u202c"]
        rows = [
            [shared[i], ["\ud800x", "y\udfff", "a\x00b", "\U0001f600"][i % 4], "\u05d0" * (i + 1)] for i in range(8)
        ]
        data = json.dumps([dict(zip(headers, r, strict=True)) for r in rows], ensure_ascii=True).encode()
        portal.store.add_ckan("pkg" + "p" * 90, [("res" + "r" * 90, "JSON", data)])
        other = csv_bytes([["k"], *[[t] for t in shared[:5]]])
        portal.store.add_ckan("other", [("r", "CSV", other)])
        run_crawl(settings)
        index_pending(spark, settings)

        engine = make_engine(catalog_url)
        with engine.connect() as conn:
            ids = {t.table_id.rsplit("/", 1)[0].rsplit(":", 1)[-1]: t.table_id for t in lookup.tables(conn)}
            json_id, csv_id = ids["pkg" + "p" * 90], ids["other"]
            landed = column_headers([storable_text(h) for h in headers])
            assert landed == ["token", "odd\ufffd", "\u202eRTL\u202c"]
            oracle = {
                f"{json_id}#{h}": frozenset(t for t in (normalize_token(r[c]) for r in rows) if t is not None)
                for c, h in enumerate(landed)
            }
            oracle[f"{csv_id}#k"] = frozenset(map(normalize_token, shared[:5]))  # type: ignore[arg-type]
            info = lookup.table(conn, json_id)
            assert info.source_updated_at is not None and len(info.source_updated_at) > 64
            assert [c.column for c in lookup.columns(conn, json_id)] == landed
            query = ["\ud800X", "A\x00B", shared[0], shared[6]]
            for method in ("josie", "mergelist", "brute"):
                found = search_join(DbIndexReader(conn), query, k=5, method=method).results
                check_join(
                    [{"column_id": r.column_id, "overlap": r.overlap} for r in found], oracle_top(oracle, query, 5), 5
                )
        engine.dispose()

        portal.store.set_content("ckan/pkg" + "p" * 90, data.replace(b"\\u0000", b"\\u0000\\u0000") + b" ")
        run_crawl(settings)
        assert len(index_pending(spark, settings)) == 1  # the rerun after a long stamp publishes too
    finally:
        portal.stop()
