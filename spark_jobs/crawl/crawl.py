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

Resumable and concurrent: listing, downloads and parsing hold no lock and write nothing the lake
reads. Only the landing takes the lake lock; under it the decisions are taken again against bronze
as committed *now* (another crawl may have landed the same tables meanwhile), and `land_batch`
lands everything as one bronze commit. A crawl killed anywhere leaves bronze as it was, so a
rerun equals one uninterrupted crawl; two crawls at once get two batches and lose nothing.

Original downloads are kept content-addressed under `<lake>/files/<sha256>`; portal ids never
become paths (they are checked in the hooks and only ever appear inside table ids and URLs).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from catalog.core.errors import UserError
from catalog.core.filesystems import filesystem_of
from catalog.core.logs import log_context
from catalog.core.settings import Settings, SourceConfig, load_settings
from plugins.sources.ckan import CkanHook
from plugins.sources.folder import list_source_folder
from plugins.sources.http_client import FetchError, HttpClient
from plugins.sources.listing import BadIdError, ListedTable, ListingError
from plugins.sources.parsing import ParseError, ParseLimits, delta_content_sha256, parse_file
from plugins.sources.socrata import SocrataHook
from spark_jobs.crawl.land import CellStaging, ParsedTable, land_batch
from spark_jobs.crawl.record import record_crawl
from spark_jobs.lake.bronze import DATASETS
from spark_jobs.lake.lock import lake_lock
from spark_jobs.lake.store import LakeStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

FILES = "files"
TMP = "crawl-tmp"  # under the home: each crawl's downloads and staged cells, in a folder of its own

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
    """What committed bronze holds per table: source, content hash and portal stamp."""
    if not store.exists(DATASETS):
        return {}
    rows = store.read_arrow(DATASETS, columns=["table_id", "source", "content_sha256", "source_updated_at"])
    return {
        r["table_id"]: _Prior(r["source"] or "", r["content_sha256"], r["source_updated_at"]) for r in rows.to_pylist()
    }


class _LakeFiles:
    """`<lake>/files/<sha256>`, the kept downloads, on the lake's filesystem."""

    def __init__(self, lake: str) -> None:

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
            pafs.copy_files(str(tmp), dest, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=self.fs)
            tmp.unlink(missing_ok=True)


def remove_abandoned(tmp_root: Path) -> None:
    """Delete the temp folders of crawls that died (killed, or their host rebooted): a folder is
    named after its crawl's process id, and one whose process is gone is removed. A killed crawl's
    staged cells can be gigabytes; nothing else would ever remove them."""
    if not tmp_root.is_dir():
        return
    for entry in tmp_root.iterdir():
        pid, _, rest = entry.name.partition("-")
        if not (entry.is_dir() and pid.isdigit() and rest) or _alive(int(pid)):
            continue
        shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _folder_uri(root: str, fs_path: str) -> str:
    """The URI of a listed entry: local paths stay paths; remote ones get the root's scheme back."""
    if "://" not in root:
        return fs_path
    return f"{root.split('://', 1)[0]}://{fs_path}"


def _copy_to_local(root: str, fs_path: str, tmp_dir: Path) -> Path:
    """Stream one file of a remote lake folder into `tmp_dir` (never the whole file in memory)."""
    fs, _ = filesystem_of(root)
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
        return SocrataHook(source, client, page_size=settings.crawl.page_size).list_tables()
    if source.kind == "ckan":
        return CkanHook(source, client, page_size=settings.crawl.page_size).list_tables()
    return list_source_folder(source.path, source.name, settings)


def _to_parsed(entry: ListedTable, content: Any, sha: str) -> ParsedTable:
    types = list(entry.portal_types) if len(entry.portal_types) == len(content.headers) else []
    return ParsedTable(
        table_id=entry.table_id,
        headers=content.headers,
        columns=content.columns,
        source=entry.source,
        name=entry.name,
        title=entry.title,
        format=entry.format,
        portal_types=types,
        content_sha256=sha,
        source_updated_at=entry.stamp,
    )


def run_crawl(
    settings: Settings,
    *,
    source_name: str | None = None,
    folder: str | None = None,
    spark: SparkSession | None = None,
    progress: Progress | None = None,
    fault: Fault | None = None,
    client: HttpClient | None = None,
) -> CrawlReport:
    """Crawl the configured sources (or one, or a lake folder) and land one change batch.

    `fault` is called with a step name (`dataset:<table_id>` before each table, `land` before the
    landing): a seam the resumability tests use to stop the crawl anywhere (the landing's own
    commits have `spark_jobs.lake.faults` checkpoints)."""
    sources = _sources(settings, source_name, folder)
    files = _LakeFiles(settings.lake)
    tmp_root = Path(settings.home) / TMP
    remove_abandoned(tmp_root)
    tmp_dir = tmp_root / f"{os.getpid()}-{uuid.uuid4().hex}"  # its own: crawls may run at once
    limits = ParseLimits.from_settings(settings.crawl)
    report = CrawlReport()
    prior = _prior_state(LakeStore(settings.lake, spark))
    own_client = client is None
    client = client or HttpClient(settings.crawl)
    found = _Found(staging=CellStaging(tmp_dir, settings.index.cells_buckets))
    try:
        listings: list[tuple[SourceConfig, list[ListedTable]]] = []
        for source in sources:
            try:
                entries = _list_source(source, client, settings)
            except (ListingError, BadIdError) as e:
                report.fail(f"source {source.name}", str(e))
                continue
            found.complete_sources.add(source.name)
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
                        found.listed_ids.add(entry.table_id)
                    continue
                found.listed_ids.add(entry.table_id)
                if fault:
                    fault(f"dataset:{entry.table_id}")
                with log_context(dataset_id=entry.table_id):
                    _crawl_one(
                        entry,
                        source,
                        prior.get(entry.table_id),
                        client,
                        files,
                        tmp_dir,
                        limits,
                        report,
                        found,
                    )
        if fault:
            fault("land")
        _land(settings, spark, found, report)
        counts = {k: getattr(report, k) for k in ("listed", "new", "changed", "deleted", "unchanged", "failed")}
        record_crawl(settings, [s.name for s in sources], counts, report.batch_id, report.failures)
    finally:
        if own_client:
            client.close()
        shutil.rmtree(tmp_dir, ignore_errors=True)
    log.info(
        "crawl done", extra={k: v for k, v in dataclasses.asdict(report).items() if isinstance(v, int) or v is None}
    )
    return report


@dataclass
class _Found:
    """What a crawl found before landing: parsed new/changed tables (descriptions; their cells are
    staged on disk), fresh stamps of unchanged ones, the ids each source listed and the sources
    listed completely."""

    staging: CellStaging
    added: list[ParsedTable] = field(default_factory=list)
    refresh: dict[str, str] = field(default_factory=dict)
    listed_ids: set[str] = field(default_factory=set)
    complete_sources: set[str] = field(default_factory=set)


def _land(settings: Settings, spark: SparkSession | None, found: _Found, report: CrawlReport) -> None:
    """Under the lake lock, decide again against bronze as committed now, and land one batch."""
    with lake_lock(settings, "crawl"):
        store = LakeStore(settings.lake, spark)
        now = _prior_state(store)
        added = [t for t in found.added if now.get(t.table_id) is None or now[t.table_id].sha != t.content_sha256]
        deleted = sorted(
            tid for tid, p in now.items() if p.source in found.complete_sources and tid not in found.listed_ids
        )
        stamps = {
            tid: stamp
            for tid, stamp in found.refresh.items()
            if tid in now and now[tid].stamp != stamp and tid not in {t.table_id for t in added}
        }
        batch = land_batch(
            store, added, deleted, n_buckets=settings.index.cells_buckets, stamps=stamps, staging=found.staging
        )
    if batch.batch_id:
        report.batch_id = batch.batch_id
        report.added = batch.added
        report.removed = batch.deleted
    report.deleted = len(deleted)


def _crawl_one(
    entry: ListedTable,
    source: SourceConfig,
    prev: _Prior | None,
    client: HttpClient,
    files: _LakeFiles,
    tmp_dir: Path,
    limits: ParseLimits,
    report: CrawlReport,
    found: _Found,
) -> None:
    if prev is not None and prev.stamp == entry.stamp and entry.stamp:
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
        report.bytes += n  # downloaded, or read from the folder
        if prev is not None and prev.sha == sha:
            report.unchanged += 1
            found.refresh[entry.table_id] = entry.stamp
            return
        content = parse_file(path, entry.format, limits)
        if not content.headers:
            raise ParseError("no columns")
        for p in content.problems:
            report.problems.append((entry.table_id, p))
        found.added.append(found.staging.add(_to_parsed(entry, content, sha)))
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


def format_report(report: CrawlReport) -> str:
    lines = [
        f"listed {report.listed}, new {report.new}, changed {report.changed}, deleted {report.deleted}, "
        f"unchanged {report.unchanged}, failed {report.failed}, bytes {report.bytes:,}"
        + (f" — batch {report.batch_id}" if report.batch_id else " — nothing to index")
    ]
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
