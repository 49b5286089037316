"""A small folder lake of realistic files, the mutations an operator makes to such a folder, and a
brute-force oracle computed from the files alone.

The oracle reads the files with Python's `csv` and `gzip` (never the crawler's parser), maps them to
ids with `catalog.core.identity` (the contract every stage shares) and derives what the catalog
must answer: the tables and their columns, each column's token set, the exact top-k overlap of a
query, every column's joinable list and (through `tests.profile.oracle`, written from the profile
definitions) each column's profile and keys.

Folder rules the oracle mirrors (the documented folder-source contract): CSV, TSV and gzipped
CSV/TSV files under the root, hidden and `_`-prefixed entries skipped, `table_id = file:<relative
path>`. A file that cannot be a table (zero bytes, only whitespace) is a failed dataset, and a
failed dataset keeps its last good version.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import os
import random
import shutil
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from catalog.core.identity import column_headers, column_id, file_table_id, normalize_token, token_set
from spark_jobs.crawl.land import ParsedTable
from tests.profile import oracle as profile_oracle

SUFFIXES = (".csv.gz", ".tsv.gz", ".csv", ".tsv", ".tab")
JOINABLE_K = 20  # settings.index.joinable_k, the default every test here runs with

CITIES = [
    "Zürich",
    "São Paulo",
    "Montréal",
    "Köln",
    "Malmö",
    "Genève",
    "Bogotá",
    "Reykjavík",
    "Lyon",
    "Oslo",
    "Porto",
    "Kraków",
    "Sevilla",
    "Århus",
    "Nîmes",
    "Linz",
    "Gent",
    "Brno",
    "Turku",
    "Cork",
]
COUNTRIES = [
    "CH",
    "BR",
    "CA",
    "DE",
    "SE",
    "FR",
    "CO",
    "IS",
    "NO",
    "PT",
    "PL",
    "ES",
    "DK",
    "AT",
    "BE",
    "CZ",
    "FI",
    "IE",
    "IT",
    "NL",
]
NULLISH = ["", "NA", "null", "-", "n/a", "None"]
STATUS = ["open", "closed", "pending", "Open ", "CLOSED"]


# ---------------------------------------------------------------- writing and reading files


def encoding_of(data: bytes) -> str:
    """The encoding a file was written in, as the tests write them: a BOM, else UTF-8, else Latin-1."""
    if data.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    try:
        data.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        return "latin-1"


def delimiter_of(path: Path) -> str:
    name = path.name.lower()
    return "\t" if name.endswith((".tsv", ".tsv.gz", ".tab")) else ","


def write_table(path: Path, headers: Sequence[str], rows: Iterable[Sequence[str]], *, encoding: str = "utf-8") -> None:
    """Write a CSV/TSV file (gzipped for `.gz`) in `encoding` (`utf-16` and `utf-8-sig` write a BOM)."""
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter=delimiter_of(path), lineterminator="\n")
    writer.writerow(headers)
    writer.writerows(rows)
    data = buf.getvalue().encode(encoding)
    if path.name.lower().endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def file_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def read_table(path: Path) -> tuple[list[str], list[list[str | None]]] | None:
    """(raw headers, rows with empty fields as None), or None for a file that is no table."""
    data = file_bytes(path)
    if not data.strip(b" \t\r\n\x00\xef\xbb\xbf\xff\xfe"):
        return None
    text = data.decode(encoding_of(data))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter_of(path))
    records = [r for r in reader if r]
    headers, body = records[0], records[1:]
    rows = [[v if v != "" else None for v in r] for r in body]
    assert all(len(r) == len(headers) for r in rows), f"{path}: the tests write rectangular files"
    return headers, rows


def file_encoding(path: Path) -> str:
    return encoding_of(file_bytes(path))


def listed_files(root: Path) -> list[str]:
    """Paths (relative, POSIX) of the files a folder crawl lists as tables."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for name in files:
            if name.startswith((".", "_")) or not name.lower().endswith(SUFFIXES):
                continue
            out.append(Path(folder, name).relative_to(root).as_posix())
    return sorted(out)


# ---------------------------------------------------------------- the lake


def _ids(rng: random.Random, n: int, prefix: str) -> list[str]:
    return [f"{prefix}{i:04d}" for i in rng.sample(range(1, 3 * max(n, 1) + 1), n)]


def build_lake(root: Path, seed: int = 7) -> list[str]:
    """Write the initial lake: 20 tables of skewed sizes (0 to 300 rows) sharing vocabularies, so
    that columns join; with repeated and blank headers, an all-empty column, a 300-value column,
    null-likes, `12.0`-style integers, quoted commas and a multi-line cell, CSV, TSV and gzip."""
    rng = random.Random(seed)
    files: dict[str, tuple[list[str], list[list[str]]]] = {}

    def cities(n: int) -> list[str]:
        return [rng.choice(CITIES) for _ in range(n)]

    files["geo/cities.csv"] = (
        ["city", "country", "population"],
        [[c, COUNTRIES[CITIES.index(c)], str(rng.randint(10, 900) * 1000)] for c in CITIES],
    )
    files["geo/countries.tsv"] = (
        ["code", "name", "eu"],
        [[c, f"Country {c}", rng.choice(["yes", "no"])] for c in COUNTRIES[:15]],
    )
    files["geo/cities_copy.csv"] = files["geo/cities.csv"]  # a byte-identical twin
    ids = _ids(rng, 300, "P")
    files["people/persons.csv"] = (  # the big table: a 300-value identifier column
        ["person_id", "name", "city", "age", "note", "note"],
        [
            [
                pid,
                f"Person {i}, {rng.choice(['Jr.', 'Sr.', 'II'])}",
                rng.choice(CITIES),
                str(rng.randint(18, 90)),
                rng.choice(NULLISH),
                "",
            ]
            for i, pid in enumerate(ids)
        ],
    )
    files["people/visits.csv"] = (
        ["visit", "person_id", "city", "day"],
        [[str(i), rng.choice(ids), rng.choice(CITIES), f"2024-0{rng.randint(1, 9)}-1{i % 10}"] for i in range(150)],
    )
    files["people/visits_2023.csv.gz"] = (
        ["visit", "person_id", "city", "day"],
        [
            [str(i), rng.choice(ids[:100]), rng.choice(CITIES), f"2023-1{rng.randint(0, 2)}-0{1 + i % 9}"]
            for i in range(80)
        ],
    )
    files["people/empty_header_only.csv"] = (["person_id", "comment"], [])
    files["orders/orders.csv"] = (
        ["order_id", "amount", "status", "city", " "],
        [
            [str(1000 + i), f"{rng.randint(1, 99)}.0", rng.choice(STATUS), rng.choice(CITIES), rng.choice(["x", ""])]
            for i in range(60)
        ],
    )
    files["orders/orders_eu.tsv"] = (
        ["order_id", "amount", "status"],
        [[str(1000 + i * 2), str(rng.randint(1, 99)), rng.choice(STATUS)] for i in range(40)],
    )
    files["orders/items.csv"] = (
        ["order_id", "sku", "qty"],
        [[str(1000 + rng.randint(0, 59)), f"SKU-{rng.randint(1, 30):03d}", str(rng.randint(1, 5))] for _ in range(120)],
    )
    files["orders/skus.csv"] = (
        ["sku", "label"],
        [[f"SKU-{i:03d}", f"Article {i}\nline two" if i == 7 else f"Article {i}"] for i in range(1, 31)],
    )
    files["misc/one_column.csv"] = (["city"], [[c] for c in cities(12)])
    files["misc/tiny.csv"] = (["k", "v"], [["1", "Oslo"], ["2", "Lyon"], ["3", "-"]])
    files["misc/nulls.csv"] = (["a", "b"], [[rng.choice(NULLISH), rng.choice(NULLISH)] for _ in range(10)])
    files["misc/numbers.csv"] = (["n", "n_float"], [[str(i), f"{i}.00"] for i in range(-5, 45)])
    files["misc/wide.csv"] = (
        [f"c{j}" for j in range(25)] + ["c3"],
        [[str(rng.randint(0, 9)) for _ in range(26)] for _ in range(8)],
    )
    files["misc/status_codes.tsv"] = (["status", "meaning"], [[s, f"means {s.strip()}"] for s in STATUS])
    files["misc/latin.csv"] = (["ville", "pays"], [[c, COUNTRIES[CITIES.index(c)]] for c in cities(25)])
    files["misc/ids_subset.csv"] = (["pid"], [[p] for p in ids[::7]])
    files["misc/.hidden.csv"] = (["x"], [["never listed"]])
    files["_staging/skip.csv"] = (["x"], [["never listed"]])
    for rel, (headers, rows) in files.items():
        write_table(root / rel, headers, rows)
    (root / "misc" / "readme.txt").write_text("not a table\n", encoding="utf-8")
    return listed_files(root)


# ---------------------------------------------------------------- mutations


def delete(root: Path, rel: str) -> None:
    (root / rel).unlink()


def truncate(root: Path, rel: str, keep_rows: int) -> None:
    """Keep the header and the first `keep_rows` rows (same encoding); -1 truncates to zero bytes."""
    path = root / rel
    if keep_rows < 0:
        path.write_bytes(b"")
        return
    table = read_table(path)
    assert table is not None
    headers, rows = table
    write_table(path, headers, [[v or "" for v in r] for r in rows[:keep_rows]], encoding=file_encoding(path))


def append_rows(root: Path, rel: str, rows: Sequence[Sequence[str]]) -> None:
    path = root / rel
    table = read_table(path)
    assert table is not None
    headers, old = table
    write_table(path, headers, [*([v or "" for v in r] for r in old), *rows], encoding=file_encoding(path))


def replace_table(root: Path, rel: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    write_table(root / rel, headers, rows)


def copy(root: Path, src: str, dst: str) -> None:
    (root / dst).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(root / src, root / dst)


def rename(root: Path, src: str, dst: str) -> None:
    (root / dst).parent.mkdir(parents=True, exist_ok=True)
    os.replace(root / src, root / dst)


def reencode(root: Path, rel: str, encoding: str) -> None:
    """Rewrite the same table in another encoding (`latin-1`, `utf-16` or `utf-8-sig` with a BOM)."""
    path = root / rel
    table = read_table(path)
    assert table is not None
    headers, rows = table
    write_table(path, headers, [[v or "" for v in r] for r in rows], encoding=encoding)


# ---------------------------------------------------------------- the oracle


@dataclass
class LakeOracle:
    """What the catalog must answer about a folder, from its files; `observe` after every change."""

    root: Path
    tables: dict[str, ParsedTable] = field(default_factory=dict)

    def observe(self) -> LakeOracle:
        seen: dict[str, ParsedTable] = {}
        for rel in listed_files(self.root):
            tid = file_table_id(rel)
            table = read_table(self.root / rel)
            if table is None:  # a failed dataset keeps its last good version
                if tid in self.tables:
                    seen[tid] = self.tables[tid]
                continue
            headers, rows = table
            columns = [[r[j] for r in rows] for j in range(len(headers))]
            seen[tid] = ParsedTable(table_id=tid, headers=headers, columns=columns)
        self.tables = seen
        return self

    def headers(self, table_id: str) -> list[str]:
        return column_headers(list(self.tables[table_id].headers))

    def column_values(self) -> dict[str, list[str | None]]:
        out = {}
        for tid, t in sorted(self.tables.items()):
            for header, values in zip(self.headers(tid), t.columns, strict=True):
                out[column_id(tid, header)] = list(values)
        return out

    def sets(self) -> dict[str, frozenset[str]]:
        return {cid: token_set(v) for cid, v in self.column_values().items()}

    def top_k(self, values: Iterable[str | None], k: int, *, exclude: str | None = None) -> list[tuple[str, int]]:
        """[(column_id, overlap)]: overlap desc, column_id asc, overlap 0 never listed."""
        query = token_set(values)
        scored = sorted((-len(query & s), cid) for cid, s in self.sets().items() if cid != exclude)
        return [(cid, -neg) for neg, cid in scored if neg < 0][:k]

    def key_columns(self) -> set[str]:
        """Single-column exact keys (what joinable answers call `is_key`)."""
        out = set()
        for tid, t in self.tables.items():
            for cols, exact in profile_oracle.keys(t):
                if exact and len(cols) == 1:
                    out.add(column_id(tid, cols[0]))
        return out

    def joinable(self, k: int = JOINABLE_K) -> dict[str, list[dict[str, Any]]]:
        """column_id -> its top-k joinable columns with the pair's measures, for every column."""
        values = self.column_values()
        sets = {cid: token_set(v) for cid, v in values.items()}
        n_values = {cid: sum(1 for x in v if normalize_token(x) is not None) for cid, v in values.items()}
        keys = self.key_columns()
        out: dict[str, list[dict[str, Any]]] = {}
        for cid, mine in sets.items():
            ranked = sorted(
                (-len(mine & theirs), other) for other, theirs in sets.items() if other != cid and mine & theirs
            )[:k]
            answers = []
            for rank, (neg, other) in enumerate(ranked, start=1):
                o, a, b = -neg, len(mine), len(sets[other])
                is_key, cand_key = cid in keys, other in keys
                answers.append(
                    {
                        "rank": rank,
                        "column_id": other,
                        "table_id": other.split("#", 1)[0],
                        "overlap": o,
                        "size": a,
                        "candidate_size": b,
                        "containment": o / a,
                        "candidate_containment": o / b,
                        "jaccard": o / (a + b - o),
                        "est_join_size": o * (n_values[cid] / a) * (n_values[other] / b),
                        "query_is_key": is_key,
                        "candidate_is_key": cand_key,
                        "direction": (
                            "one-to-one"
                            if is_key and cand_key
                            else "many-to-one"
                            if cand_key
                            else "one-to-many"
                            if is_key
                            else "many-to-many"
                        ),
                        "exact": True,
                    }
                )
            out[cid] = answers
        return out

    def profiles(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for t in self.tables.values():
            out.update(profile_oracle.table_profiles(t))
        return out

    def twins(self) -> dict[str, set[str]]:
        """table_id -> the other tables with exactly the same headers and rows."""
        by_content: dict[Any, set[str]] = {}
        for tid, t in self.tables.items():
            key = (tuple(self.headers(tid)), tuple(map(tuple, t.columns)))
            by_content.setdefault(key, set()).add(tid)
        return {tid: group - {tid} for group in by_content.values() for tid in group if len(group) > 1}

    def token_counts(self) -> Counter[str]:
        return Counter(t for s in self.sets().values() for t in s)
