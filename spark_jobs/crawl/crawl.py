"""Crawl portals and lake folders into bronze: list, decide new / changed / deleted, download, keep
the raw bytes, parse, and land one change batch.

Change detection, per table, against bronze `datasets` (the state of the last committed batch):
* a table whose portal stamp equals the recorded one is unchanged (no download);
* otherwise it is downloaded and hashed: the same SHA-256 as recorded means unchanged (only the
  recorded stamp is refreshed — a stamp bump without a data change causes no re-index); a new
  hash is a changed table, an unknown table a new one;
* a recorded table that a source no longer lists is deleted — but only when that source was listed
  completely; a source whose listing failed deletes nothing, and a table whose download or parse
  fails keeps its last good version.

Resumable: nothing is announced until `land_tables.land_batch` commits the `changes` rows last.
Dataset rows written by a landing that was killed before that commit carry a batch id that is not
in `changes`: a rerun treats those tables as not landed and lands them again, and the deletions
the killed run intended are read back from the intent file written before landing. So a crawl
killed anywhere and rerun leaves bronze exactly as one uninterrupted crawl would.

Original downloads are kept content-addressed under `<lake>/files/<sha256>`; portal ids never
become paths (they are checked in the hooks and only ever appear inside table ids and URLs).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from catalog.core.errors import UserError
from catalog.core.logs import log_context
from catalog.core.settings import Settings, SourceConfig, load_settings
from plugins.sources.folder import folder_filesystem, list_source_folder
from plugins.sources.http_client import FetchError, HttpClient
from plugins.sources.listing import BadIdError, ListedTable, ListingError
from plugins.sources.parsing import ParseError, ParseLimits, delta_content_sha256, parse_file
from spark_jobs.crawl.land import ParsedTable, land_batch
from spark_jobs.lake.batches import batch_ids, next_batch_id
from spark_jobs.lake.bronze import DATASETS
from spark_jobs.lake.store import LakeStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

FILES = "files"
_INTENT = "_crawl/intent.json"

Progress = Callable[[int, int, str], None]
Fault = Callable[[str], None]


@dataclass
class CrawlReport:
    batch_id: int | None = None
    listed: int = 0
    new: int = 0
    changed: int = 0
    deleted: int = 0
    unchanged: int = 0
    failed: int = 0
    bytes: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    def fail(self, dataset: str, reason: str) -> None:
        self.failed += 1
        self.failures.append((dataset, reason))
        log.warning("dataset failed", extra={"dataset_id": dataset, "reason": reason})


@dataclass(frozen=True)
class _Prior:
    source: str
    sha: str | None
    stamp: str | None
    committed: bool


def folder_source(path: str) -> SourceConfig:
    root = path if "://" in path else os.path.abspath(path)
    return SourceConfig(name=f"folder:{root}", kind="folder", path=root)


def _sources(settings: Settings, source_name: str | None, folder: str | None) -> list[SourceConfig]:
    if folder is not None:
        return [folder_source(folder)]
    if source_name is not None:
        return [settings.source(source_name)]
    if not settings.sources:
        raise UserError("no sources configured: add [[sources]] to juncture.toml or pass --dir PATH")
    return list(settings.sources)


def _prior_state(store: LakeStore) -> dict[str, _Prior]:
    if not store.exists(DATASETS):
        return {}
    committed = set(batch_ids(store))
    rows = store.read_arrow(DATASETS, columns=["table_id", "source", "content_sha256", "source_updated_at",
                                               "batch_id"]).to_pylist()
    return {r["table_id"]: _Prior(r["source"] or "", r["content_sha256"], r["source_updated_at"],
                                  r["batch_id"] in committed) for r in rows}


class _LakeFiles:
    """`<lake>/files/<sha256>` and the crawl's small intent file, on the lake's filesystem."""

    def __init__(self, lake: str) -> None:
        import pyarrow.fs as pafs

        self.local = "://" not in lake
        if self.local:
            self.fs, self.root = pafs.LocalFileSystem(), os.path.abspath(lake)
        else:
            self.fs, self.root = pafs.FileSystem.from_uri(lake)
        self.root = self.root.rstrip("/")

    def keep(self, tmp: Path, sha: str) -> None:
        if len(sha) != 64 or not all(c in "0123456789abcdef" for c in sha):
            raise ValueError(f"not a sha256: {sha!r}")
        dest = f"{self.root}/{FILES}/{sha}"
        if self.fs.get_file_info(dest).type.name != "NotFound":
            tmp.unlink(missing_ok=True)
            return
        if self.local:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            os.replace(tmp, dest)
        else:
            import pyarrow.fs as pafs

            pafs.copy_files(str(tmp), dest, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=self.fs)
            tmp.unlink(missing_ok=True)

    def read_intent(self) -> dict[str, Any] | None:
        path = f"{self.root}/{_INTENT}"
        if self.fs.get_file_info(path).type.name == "NotFound":
            return None
        with self.fs.open_input_stream(path) as f:
            return json.loads(f.read().decode())

    def write_intent(self, doc: dict[str, Any]) -> None:
        path = f"{self.root}/{_INTENT}"
        self.fs.create_dir(f"{self.root}/_crawl", recursive=True)
        tmp = path + ".tmp"
        with self.fs.open_output_stream(tmp) as f:
            f.write(json.dumps(doc).encode())
        self.fs.move(tmp, path)


def _folder_uri(root: str, fs_path: str) -> str:
    """The URI of a listed entry: local paths stay paths; remote ones get the root's scheme back."""
    if "://" not in root:
        return fs_path
    return f"{root.split('://', 1)[0]}://{fs_path}"


def _copy_to_local(root: str, fs_path: str, tmp_dir: Path) -> Path:
    """Stream one file of a remote lake folder into `tmp_dir` (never the whole file in memory)."""
    fs, _ = folder_filesystem(root)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    dest = tmp_dir / f"remote-{hashlib.sha256(fs_path.encode()).hexdigest()[:16]}"
    with fs.open_input_stream(fs_path) as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
    return dest


def _file_sha256(path: str) -> tuple[str, int]:
    digest, n = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
            n += len(chunk)
    return digest.hexdigest(), n


def _list_source(source: SourceConfig, client: HttpClient, settings: Settings) -> list[ListedTable]:
    if source.kind == "socrata":
        from plugins.sources.socrata import SocrataHook

        return SocrataHook(source, client, page_size=settings.crawl.page_size).list_tables()
    if source.kind == "ckan":
        from plugins.sources.ckan import CkanHook

        return CkanHook(source, client, page_size=settings.crawl.page_size).list_tables()
    return list_source_folder(source.path, source.name, settings)


def _to_parsed(entry: ListedTable, content: Any, sha: str) -> ParsedTable:
    types = list(entry.portal_types) if len(entry.portal_types) == len(content.headers) else []
    return ParsedTable(table_id=entry.table_id, headers=content.headers, columns=content.columns,
                       source=entry.source, name=entry.name, title=entry.title, format=entry.format,
                       portal_types=types, content_sha256=sha, source_updated_at=entry.stamp)


def run_crawl(settings: Settings, *, source_name: str | None = None, folder: str | None = None,
              spark: SparkSession | None = None, progress: Progress | None = None, fault: Fault | None = None,
              client: HttpClient | None = None) -> CrawlReport:
    """Crawl the configured sources (or one, or a lake folder) and land one change batch.

    `fault` is called with a step name (`dataset:<table_id>` before each table, `land`, and
    `commit:<lake table>` before each Delta commit): the seam the resumability tests use to kill
    the crawl anywhere."""
    sources = _sources(settings, source_name, folder)
    store = LakeStore(settings.lake, spark, before_commit=(lambda t: fault(f"commit:{t}")) if fault else None)
    files = _LakeFiles(settings.lake)
    tmp_dir = Path(settings.home) / "crawl-tmp"
    limits = ParseLimits.from_settings(settings.crawl)
    report = CrawlReport()
    prior = _prior_state(store)
    committed = set(batch_ids(store))
    own_client = client is None
    client = client or HttpClient(settings.crawl)
    added: list[ParsedTable] = []
    refresh: dict[str, str] = {}
    listed_ids: set[str] = set()
    complete_sources: set[str] = set()
    try:
        listings: list[tuple[SourceConfig, list[ListedTable]]] = []
        for source in sources:
            try:
                entries = _list_source(source, client, settings)
            except (ListingError, BadIdError) as e:
                report.fail(f"source {source.name}", str(e))
                continue
            complete_sources.add(source.name)
            listings.append((source, entries))
        total = sum(len(e) for _, e in listings)
        done = 0
        for source, entries in listings:
            for entry in sorted(entries, key=lambda t: t.table_id):
                done += 1
                if progress:
                    progress(done, total, entry.table_id)
                report.listed += 1
                if entry.problem:
                    report.fail(entry.table_id if "<invalid>" not in entry.table_id else entry.name, entry.problem)
                    if "<invalid>" not in entry.table_id:
                        listed_ids.add(entry.table_id)
                    continue
                listed_ids.add(entry.table_id)
                if fault:
                    fault(f"dataset:{entry.table_id}")
                with log_context(dataset_id=entry.table_id):
                    _crawl_one(entry, source, prior.get(entry.table_id), client, files, tmp_dir, limits, report,
                               added, refresh)
        deleted = sorted(tid for tid, p in prior.items()
                         if p.source in complete_sources and tid not in listed_ids)
        intent = files.read_intent()
        batch_id: int | None = None
        if intent and intent.get("batch_id") not in committed:
            batch_id = int(intent["batch_id"])
            current = set(prior)
            for tid in intent.get("deleted", []):
                if tid not in listed_ids and tid not in current and tid not in deleted:
                    deleted.append(tid)
            deleted.sort()
        if refresh:
            _refresh_stamps(store, refresh)
        if fault:
            fault("land")
        if added or deleted:
            batch_id = batch_id or next_batch_id(store)
            files.write_intent({"batch_id": batch_id, "deleted": deleted})
            batch = land_batch(store, added, deleted, n_buckets=settings.index.cells_buckets, batch_id=batch_id)
            report.batch_id = batch.batch_id
            report.added = batch.added
            report.removed = batch.deleted
        report.deleted = len(deleted)
    finally:
        if own_client:
            client.close()
        shutil.rmtree(tmp_dir, ignore_errors=True)
    log.info("crawl done", extra={k: v for k, v in dataclasses.asdict(report).items()
                                  if isinstance(v, int) or v is None})
    return report


def _crawl_one(entry: ListedTable, source: SourceConfig, prev: _Prior | None, client: HttpClient,
               files: _LakeFiles, tmp_dir: Path, limits: ParseLimits, report: CrawlReport,
               added: list[ParsedTable], refresh: dict[str, str]) -> None:
    settled = prev is not None and prev.committed
    if settled and prev.stamp == entry.stamp and entry.stamp:
        report.unchanged += 1
        return
    tmp: Path | None = None
    try:
        if source.kind == "folder":
            path = entry.path
            if entry.format == "delta":
                sha, n = delta_content_sha256(_folder_uri(source.path, path)), 0
                path = _folder_uri(source.path, path)
            else:
                if "://" in source.path:  # a remote lake: parse a local copy, keep it like a download
                    tmp = _copy_to_local(source.path, path, tmp_dir)
                    path = str(tmp)
                sha, n = _file_sha256(path)
        else:
            dl = client.download(entry.url, tmp_dir, headers=entry.headers, policy=entry.policy)
            tmp, sha, n, path = dl.path, dl.sha256, dl.n_bytes, str(dl.path)
            report.bytes += n
        if settled and prev.sha == sha:
            report.unchanged += 1
            refresh[entry.table_id] = entry.stamp
            return
        content = parse_file(path, entry.format, limits)
        if not content.headers:
            raise ParseError("no columns")
        for p in content.problems:
            report.problems.append((entry.table_id, p))
        added.append(_to_parsed(entry, content, sha))
        if tmp is not None:
            files.keep(tmp, sha)
            tmp = None
        if prev is None:
            report.new += 1
        else:
            report.changed += 1
    except (FetchError, ParseError, OSError, MemoryError) as e:  # one dataset fails, the crawl goes on
        reason = e.reason if isinstance(e, (FetchError, ParseError)) else f"{type(e).__name__}: {e}".rstrip(": ")
        report.fail(entry.table_id, reason)
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def _refresh_stamps(store: LakeStore, stamps: dict[str, str]) -> None:
    """Record new portal stamps of tables whose content did not change (no change batch)."""
    import pyarrow as pa

    rows = store.read_arrow(DATASETS, where={"table_id": sorted(stamps)})
    if rows.num_rows == 0:
        return
    new = pa.array([stamps[t] for t in rows["table_id"].to_pylist()], pa.string())
    rows = rows.set_column(rows.schema.get_field_index("source_updated_at"), "source_updated_at", new)
    store.overwrite_where(DATASETS, rows, column="table_id", values=rows["table_id"].to_pylist())


def format_report(report: CrawlReport) -> str:
    lines = [f"listed {report.listed}, new {report.new}, changed {report.changed}, deleted {report.deleted}, "
             f"unchanged {report.unchanged}, failed {report.failed}, bytes {report.bytes:,}"
             + (f" — batch {report.batch_id}" if report.batch_id else " — nothing to index")]
    for dataset, reason in report.failures:
        lines.append(f"  FAILED {dataset}: {reason}")
    for dataset, problem in report.problems:
        lines.append(f"  note {dataset}: {problem}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="crawl_sources")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--source")
    which.add_argument("--dir")
    args = parser.parse_args(argv)
    report = run_crawl(load_settings(), source_name=args.source, folder=args.dir)
    print(format_report(report))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
