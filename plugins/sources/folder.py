"""A lake folder: CSV, TSV, Parquet files and Delta tables under a root (a local path or any URI
pyarrow's filesystems understand), one table each, `table_id = file:<path relative to the root>`.

The stamp of a file is `mtime_ns:size`; of a Delta table, its version. Folders holding a
`_delta_log` are one table and are not descended into; hidden and `_`-prefixed entries are skipped.

A folder is not trusted either (on a local disk):
* symbolic links: a link to a folder is never descended (what it points to inside the root is
  listed under its own path, so a loop such as `sub/up -> ..` cannot multiply tables); a link to a
  file is listed only when the file lies inside the root, so `ext -> /outside/secret.csv` is not read;
* Juncture's own folders (its lake, home, Airflow home, crawl scratch space) are skipped when a
  crawled folder contains them, and a root inside the lake is refused;
* a file larger than `max_bytes` is listed with a problem instead of being read;
* two entries that map to one table_id are both listed with a problem (neither is landed).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

import pyarrow.fs as pafs
from deltalake import DeltaTable

from catalog.core.filesystems import filesystem_of
from catalog.core.identity import file_table_id
from catalog.core.settings import Settings
from plugins.sources.listing import ListedTable, ListingError, reject_duplicate_ids

log = logging.getLogger(__name__)


FILE_FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv.gz": "csv",
    ".tsv.gz": "tsv",
}


def file_format(name: str) -> str | None:
    lower = name.lower()
    for suffix in sorted(FILE_FORMATS, key=len, reverse=True):
        if lower.endswith(suffix):
            return FILE_FORMATS[suffix]
    return None


def own_paths(settings: Settings) -> tuple[str, ...]:
    """The folders Juncture writes, which a crawl never reads: its lake, home, Airflow home and
    crawl scratch space (remote lakes are not on this disk)."""
    home = Path(settings.home)
    airflow = Path(settings.airflow.home) if settings.airflow.home else home / "airflow"
    return tuple(str(p) for p in (settings.lake, home, airflow, home / "crawl-tmp") if p and "://" not in str(p))


def list_source_folder(root: str, source_name: str, settings: Settings) -> list[ListedTable]:
    """`list_folder` with the crawl's limits: files over `crawl.max_download_bytes` are not read,
    Juncture's own folders are skipped, and a root inside the lake is refused."""
    lake = () if "://" in settings.lake else (settings.lake,)
    return list_folder(
        root, source_name, max_bytes=settings.crawl.max_download_bytes, exclude=own_paths(settings), refuse_inside=lake
    )


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class _LocalGuard:
    """Symlink and own-folder checks for a root on the local disk (remote stores have no links)."""

    def __init__(self, base: str, exclude: Iterable[str], refuse_inside: Iterable[str]) -> None:
        self.real_root = os.path.realpath(base)
        for folder in map(os.path.realpath, refuse_inside):
            if _inside(self.real_root, folder):
                raise ListingError(f"lake folder {base!r} is inside Juncture's own lake {folder!r}")
        # a folder that holds the root (a home the data sits in) is not skipped, its other parts are
        self.excluded = [f for f in map(os.path.realpath, exclude) if not _inside(self.real_root, f)]

    def skip(self, path: str, is_dir: bool) -> str | None:
        """Why the entry at `path` is not listed, or None."""
        real = os.path.realpath(path)
        if os.path.islink(path):
            if is_dir:
                return "a symbolic link to a folder (not followed)"
            if not _inside(real, self.real_root):
                return "a symbolic link out of the crawled folder"
        if any(_inside(real, folder) for folder in self.excluded):
            return "Juncture's own lake or home"
        return None


def list_folder(
    root: str,
    source_name: str,
    *,
    max_bytes: int | None = None,
    exclude: Iterable[str] = (),
    refuse_inside: Iterable[str] = (),
) -> list[ListedTable]:
    """Every table under `root`. `exclude` names folders never read (Juncture's own, see `own_paths`),
    `refuse_inside` folders the root may not lie in, `max_bytes` the largest file that is read."""
    fs, base = filesystem_of(root)
    info = fs.get_file_info(base)
    if info.type != pafs.FileType.Directory:
        raise ListingError(f"lake folder {root!r} is not a directory")
    guard = _LocalGuard(base, exclude, refuse_inside) if isinstance(fs, pafs.LocalFileSystem) else None
    out: list[ListedTable] = []
    pending = [base]
    while pending:
        folder = pending.pop()
        for entry in fs.get_file_info(pafs.FileSelector(folder, recursive=False)):
            if entry.base_name.startswith((".", "_")):
                continue
            rel = PurePosixPath(entry.path).relative_to(PurePosixPath(base)).as_posix()
            is_dir = entry.type == pafs.FileType.Directory
            why = guard.skip(entry.path, is_dir) if guard is not None else None
            if why is not None:
                log.warning("folder entry skipped", extra={"path": rel, "reason": why})
                continue
            if is_dir:
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
                too_big = max_bytes is not None and entry.size is not None and entry.size > max_bytes
                out.append(
                    ListedTable(
                        table_id=file_table_id(rel),
                        source=source_name,
                        name=rel,
                        stamp=f"{mtime}:{entry.size}",
                        format=fmt,
                        path=entry.path,
                        problem=f"file of {entry.size} bytes is over the limit of {max_bytes} "
                        "(crawl.max_download_bytes)"
                        if too_big
                        else None,
                    )
                )
    return sorted(reject_duplicate_ids(out), key=lambda t: (t.table_id, t.name))


def _delta_entry(path: str, rel: str, source_name: str) -> ListedTable:

    try:
        stamp = f"delta:{DeltaTable(path).version()}"
        problem = None
    except Exception as e:  # a broken table is that table's failure, not the crawl's
        stamp, problem = "", f"unreadable Delta table: {e}"
    return ListedTable(
        table_id=file_table_id(rel),
        source=source_name,
        name=rel,
        stamp=stamp,
        format="delta",
        path=path,
        problem=problem,
    )
