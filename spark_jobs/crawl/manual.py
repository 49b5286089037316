"""Manual updates (`juncture update`, a `lake_index` trigger conf): land "add these files, folders or
sources; delete these table ids" as one change batch in bronze.

* A file or folder is parsed with the crawler's parser (`table_parsing.parse_file`); its table id is
  `file:<path relative to the folder source holding it>`, or relative to the path's parent folder
  when no configured folder source holds it (`x/a.csv` -> `file:a.csv`, folder `x/d` -> `file:d/…`).
* A configured source name is crawled (`crawl_sources.run_crawl`), which lands its own batch.
* Idempotent: a file whose content is already landed (same SHA-256) and a table already deleted are
  skipped, so the same request run twice lands nothing the second time.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path

import pyarrow.compute as pc

from catalog.core.errors import UnknownIdError, UserError
from catalog.core.identity import file_table_id, valid_table_id
from catalog.core.settings import Settings, load_settings
from plugins.sources.folder import file_format, list_source_folder
from plugins.sources.parsing import ParseLimits, delta_content_sha256, parse_file
from spark_jobs.crawl.crawl import run_crawl
from spark_jobs.crawl.land import ParsedTable, land_batch
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.bronze import CHANGES, DATASETS, DELETE
from spark_jobs.lake.lock import lake_lock
from spark_jobs.lake.store import LakeStore

log = logging.getLogger(__name__)

MANUAL_SOURCE = "manual"


def _landed(store: LakeStore) -> dict[str, str | None]:
    """table_id -> content_sha256 of every table in bronze."""
    if not store.exists(DATASETS):
        return {}
    t = store.read_arrow(DATASETS, columns=["table_id", "content_sha256"])
    return dict(zip(t["table_id"].to_pylist(), t["content_sha256"].to_pylist(), strict=True))


def _ever_deleted(store: LakeStore, table_ids: Sequence[str]) -> set[str]:
    if not store.exists(CHANGES) or not table_ids:
        return set()
    t = store.read_arrow(CHANGES, columns=["table_id", "op"], where={"table_id": list(table_ids)})
    return set(t.filter(pc.equal(t["op"], DELETE))["table_id"].to_pylist())


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def path_tables(settings: Settings, entry: str) -> list[tuple[str, str, str, str]]:
    """(table_id, source, format, path) of every table file under `entry` (a file or a folder)."""

    path = Path(entry).expanduser().resolve()
    if not path.exists():
        raise UserError(f"--add {entry}: no such file or folder")
    root, source = path.parent, MANUAL_SOURCE
    for s in settings.sources:
        if s.kind == "folder" and "://" not in s.path and path.is_relative_to(Path(s.path).resolve()):
            root, source = Path(s.path).resolve(), s.name
            break
    if path.is_file():
        fmt = file_format(path.name)
        if fmt is None:
            raise UserError(f"--add {entry}: not a table file (csv, tsv, json, xlsx, parquet)")
        return [(file_table_id(path.relative_to(root).as_posix()), source, fmt, str(path))]
    prefix = path.relative_to(root).as_posix()
    out = [
        (file_table_id(f"{prefix}/{t.name}") if prefix != "." else t.table_id, source, t.format, t.path)
        for t in list_source_folder(str(path), source, settings)
    ]
    if not out:
        raise UserError(f"--add {entry}: no table files found in the folder")
    return out


def land_update(settings: Settings, store: LakeStore, *, add: Sequence[str], delete: Sequence[str]) -> ChangeBatch:
    """Land one batch: `add` = files, folders or configured source names; `delete` = table ids."""

    bad = [t for t in delete if not valid_table_id(t)]
    if bad:
        raise UserError(f"--delete {bad[0]}: not a table id (expected socrata:…, ckan:… or file:…)")
    sources = {s.name for s in settings.sources}
    crawled: ChangeBatch | None = None
    for entry in add:
        if entry in sources:  # a whole source: crawl it (its own batch)
            report = run_crawl(settings, source_name=entry)
            if report.batch_id:
                crawled = ChangeBatch(report.batch_id, (), ())
    with lake_lock(settings, "update"):
        batch = _land_files(settings, LakeStore(settings.lake, store.spark), add=add, delete=delete, sources=sources)
    return batch if batch.batch_id or crawled is None else crawled


def _land_files(
    settings: Settings, store: LakeStore, *, add: Sequence[str], delete: Sequence[str], sources: set[str]
) -> ChangeBatch:
    """Parse the files and folders of `add` and land them with `delete` (the caller holds the lock)."""

    landed = _landed(store)
    limits = ParseLimits.from_settings(settings.crawl)
    added: list[ParsedTable] = []
    for entry in add:
        if entry in sources:
            continue
        for table_id, source, fmt, path in path_tables(settings, entry):
            sha = delta_content_sha256(path) if fmt == "delta" else _sha256(Path(path))
            if landed.get(table_id) == sha or any(t.table_id == table_id for t in added):
                continue
            content = parse_file(path, fmt, limits)
            added.append(
                ParsedTable(
                    table_id=table_id,
                    headers=content.headers,
                    columns=content.columns,
                    source=source,
                    name=Path(path).name,
                    format=fmt,
                    content_sha256=sha,
                )
            )
    gone = [t for t in delete if t not in landed]
    unknown = sorted(set(gone) - _ever_deleted(store, gone))
    if unknown:
        raise UnknownIdError("table_id", unknown[0])
    deleted = sorted({t for t in delete if t in landed} - {t.table_id for t in added})
    batch = land_batch(store, added, deleted, n_buckets=settings.index.cells_buckets)
    log.info(
        "manual update landed", extra={"batch_id": batch.batch_id, "n_added": len(added), "n_deleted": len(deleted)}
    )
    return batch


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="manual_update")
    parser.add_argument("--add", nargs="*", default=[])
    parser.add_argument("--delete", nargs="*", default=[])
    args = parser.parse_args(argv)
    settings = load_settings()
    batch = land_update(settings, LakeStore(settings.lake), add=args.add, delete=args.delete)
    log.info("landed", extra={"batch_id": batch.batch_id})
    return 0
