"""A lake folder: CSV, TSV, Parquet files and Delta tables under a root (a local path or any URI
pyarrow's filesystems understand), one table each, `table_id = file:<path relative to the root>`.

The stamp of a file is `mtime_ns:size`; of a Delta table, its version. Folders holding a
`_delta_log` are one table and are not descended into; hidden and `_`-prefixed entries are skipped.
"""

from __future__ import annotations

import os
from pathlib import PurePosixPath

import pyarrow.fs as pafs

from catalog.core.identity import file_table_id
from plugins.sources.listing import ListedTable, ListingError

FILE_FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".parquet": "parquet", ".pq": "parquet",
                ".csv.gz": "csv", ".tsv.gz": "tsv"}


def folder_filesystem(root: str) -> tuple[pafs.FileSystem, str]:
    if "://" in root:
        return pafs.FileSystem.from_uri(root)
    return pafs.LocalFileSystem(), os.path.abspath(root)


def file_format(name: str) -> str | None:
    lower = name.lower()
    for suffix in sorted(FILE_FORMATS, key=len, reverse=True):
        if lower.endswith(suffix):
            return FILE_FORMATS[suffix]
    return None


def list_folder(root: str, source_name: str) -> list[ListedTable]:
    fs, base = folder_filesystem(root)
    info = fs.get_file_info(base)
    if info.type != pafs.FileType.Directory:
        raise ListingError(f"lake folder {root!r} is not a directory")
    out: list[ListedTable] = []
    pending = [base]
    while pending:
        folder = pending.pop()
        for entry in fs.get_file_info(pafs.FileSelector(folder, recursive=False)):
            if entry.base_name.startswith((".", "_")):
                continue
            rel = PurePosixPath(entry.path).relative_to(PurePosixPath(base)).as_posix()
            if entry.type == pafs.FileType.Directory:
                log_dir = fs.get_file_info(f"{entry.path}/_delta_log")
                if log_dir.type == pafs.FileType.Directory:
                    out.append(_delta_entry(entry.path, rel, source_name))
                else:
                    pending.append(entry.path)
            elif entry.type == pafs.FileType.File:
                fmt = file_format(entry.base_name)
                if fmt is None:
                    continue
                mtime = entry.mtime_ns if entry.mtime_ns is not None else 0
                out.append(ListedTable(table_id=file_table_id(rel), source=source_name, name=rel,
                                       stamp=f"{mtime}:{entry.size}", format=fmt, path=entry.path))
    return sorted(out, key=lambda t: t.table_id)


def _delta_entry(path: str, rel: str, source_name: str) -> ListedTable:
    from deltalake import DeltaTable

    try:
        stamp = f"delta:{DeltaTable(path).version()}"
        problem = None
    except Exception as e:  # a broken table is that table's failure, not the crawl's
        stamp, problem = "", f"unreadable Delta table: {e}"
    return ListedTable(table_id=file_table_id(rel), source=source_name, name=rel, stamp=stamp, format="delta",
                       path=path, problem=problem)
