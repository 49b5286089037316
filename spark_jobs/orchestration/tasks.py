"""What the DAG tasks call: one function per task, each a single call into the jobs, no Airflow here.

The DAG files in `dags/` only wire these together, so every task body is testable without Airflow
and runs the same code `juncture crawl/index/rebuild` runs. Every function:

* finds the settings with `current_settings()` (the in-process runner binds them; a scheduler's
  worker loads them from the environment and `juncture.toml`),
* takes the lake lock while it writes lake tables (`spark_jobs.lake.lock`, the same lock the CLI
  takes: a second writer waits `settings.lock_wait_s`, then fails with a message naming the holder),
* returns batch ids or small counts — never rows — because the result goes to XCom,
* is idempotent: a task re-run after success finds its batch already applied and changes nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from catalog.core.errors import UserError
from catalog.core.logs import log_context
from catalog.core.settings import Settings, load_settings
from spark_jobs.lake.lock import LakeBusyError, lake_lock
from spark_jobs.orchestration import plan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

_BOUND: list[Settings] = []


class SourceUnavailableError(UserError):
    """A source's listing failed as a whole; the crawl task fails and is retried with backoff."""


# ---------------------------------------------------------------------------------------- settings
@contextlib.contextmanager
def bind_settings(settings: Settings) -> Iterator[Settings]:
    """Make `settings` the ones tasks of this process use (the embedded runner and the tests)."""
    _BOUND.append(settings)
    try:
        yield settings
    finally:
        _BOUND.pop()


def current_settings() -> Settings:
    return _BOUND[-1] if _BOUND else load_settings()


def spark_for(settings: Settings, app: str) -> SparkSession:
    from spark_jobs.lake.session import get_spark  # deferred: the DAG files import this module at parse time

    return get_spark(settings, app)


# ---------------------------------------------------------------------------------------- lake_crawl
def source_names(settings: Settings | None = None) -> list[str]:
    settings = settings or current_settings()
    return [s.name for s in settings.sources]


def crawl_source(name: str, *, settings: Settings | None = None) -> int | None:
    """Crawl one configured source and land its changes; the batch id, or None when nothing changed."""
    from spark_jobs.crawl.crawl import run_crawl  # deferred: the DAG files import this module at parse time

    settings = settings or current_settings()
    settings.source(name)  # an unknown name fails here, with the known ones listed
    with log_context(source=name):  # the crawl locks the lake for its landing only, not its downloads
        report = run_crawl(settings, source_name=name)
    if report.failed:
        log.warning(
            "crawl had failures",
            extra={"source": name, "failed": report.failed, "failures": [f"{d}: {r}" for d, r in report.failures][:20]},
        )
    if any(d == f"source {name}" for d, _ in report.failures):
        reason = next(r for d, r in report.failures if d == f"source {name}")
        # The whole listing failed (portal down, bad answer): fail so Airflow retries with backoff.
        raise SourceUnavailableError(f"source {name!r} could not be listed: {reason}")
    batch_id = report.batch_id
    log.info("source crawled", extra={"source": name, "batch_id": batch_id})
    return batch_id


# ---------------------------------------------------------------------------------------- lake_index
def land_manual(add: Sequence[str], delete: Sequence[str]) -> int | None:
    """Land a manual update (files/folders or source names to add, table ids to delete) as a batch."""
    if not add and not delete:
        return None
    from spark_jobs.crawl.manual import land_update  # deferred: the DAG files import this module at parse time
    from spark_jobs.lake.store import LakeStore  # deferred: the DAG files import this module at parse time

    settings = current_settings()
    batch = land_update(settings, LakeStore(settings.lake), add=list(add), delete=list(delete))  # locks itself
    return batch.batch_id or None


def pending_batch_ids() -> list[int]:
    """Change batches landed but not yet published, oldest first."""
    from spark_jobs.lake.store import LakeStore  # deferred: the DAG files import this module at parse time
    from spark_jobs.orchestration.pipeline import (
        pending_batches,  # deferred: the DAG files import this module at parse time
    )

    settings = current_settings()
    return [b.batch_id for b in pending_batches(LakeStore(settings.lake), settings)]


def stage_names() -> list[str]:
    return plan.stage_names()


def rebuild_step_names() -> list[str]:
    return plan.rebuild_step_names()


def run_stage(
    stage: str,
    batch_ids: Sequence[int],
    *,
    settings: Settings | None = None,
    spark: SparkSession | None = None,
    lock: bool = True,
) -> dict[str, Any]:
    """Run pipeline stage `stage` for each batch, oldest first (each stage is idempotent per batch)."""
    from spark_jobs.lake.batches import load_batch  # deferred: the DAG files import this module at parse time
    from spark_jobs.lake.store import LakeStore  # deferred: the DAG files import this module at parse time
    from spark_jobs.orchestration.pipeline import all_stages  # deferred: the DAG files import this module at parse time

    settings = settings or current_settings()
    jobs = dict(all_stages())
    if stage not in jobs:
        raise UserError(f"unknown pipeline stage {stage!r} (stages: {', '.join(jobs)})")
    if not batch_ids:
        return {}
    spark = spark or spark_for(settings, f"juncture.{stage}")
    results: dict[str, Any] = {}
    with lake_lock(settings, f"stage:{stage}") if lock else contextlib.nullcontext():
        store = LakeStore(settings.lake, spark)
        for batch_id in sorted(batch_ids):
            with log_context(batch_id=batch_id, stage=stage):
                t0 = time.perf_counter()
                out = jobs[stage](spark, settings, load_batch(store, batch_id))
                results[str(batch_id)] = _small(out)
                log.info("stage done", extra={"seconds": round(time.perf_counter() - t0, 3)})
    return results


def _small(out: Any) -> Any:
    """A stage's result as something JSON-sized for XCom and logs."""
    if hasattr(out, "summary"):
        return out.summary()
    if isinstance(out, dict):
        return {str(k): v for k, v in out.items() if isinstance(v, (int, float, str, bool, type(None)))}
    if hasattr(out, "__dataclass_fields__"):
        return {
            k: getattr(out, k)
            for k in out.__dataclass_fields__
            if isinstance(getattr(out, k), (int, float, str, bool, type(None)))
        }
    return None


def rebuild_needed() -> bool:
    """Whether some index family is due for a rebuild (lake_index then triggers lake_rebuild)."""
    # deferred: the DAG files import this module at parse time
    from spark_jobs.orchestration.rebuild import due_families

    settings = current_settings()
    due = due_families(None, settings)
    log.info("rebuild check", extra={"due": due})
    return bool(due)


def work_backlog() -> dict[str, Any]:
    """lake_index's last step: the backlog (`spark_jobs.orchestration.backlog`) under the lake lock,
    with a Spark session only when it has work."""
    from spark_jobs.orchestration import backlog  # deferred: the DAG files import this module at parse time

    settings = current_settings()
    with lake_lock(settings, "lake_index:backlog"):
        if not backlog.backlog_due(None, settings):
            return {}
        results = backlog.work_backlog(spark_for(settings, "juncture.backlog"), settings)
    counts = {k: v for part in results.values() if isinstance(part, dict) for k, v in part.items()}
    return _small({**counts, "seconds": results.get("seconds")}) or {}


# ---------------------------------------------------------------------------------------- lake_rebuild
def rebuild_step(step: str) -> dict[str, Any]:
    """Run one step of the rebuild (`spark_jobs.orchestration.rebuild`) under the lake lock."""
    from spark_jobs.orchestration.rebuild import run_step  # deferred: the DAG files import this module at parse time

    settings = current_settings()
    spark = spark_for(settings, f"juncture.{step}")
    with log_context(step=step), lake_lock(settings, f"lake_rebuild:{step}"):
        return _small(run_step(spark, settings, step)) or {}


# ---------------------------------------------------------------------------------------- settings files
@contextlib.contextmanager
def private_settings_file(folder: Path, name: str, text: str) -> Iterator[Path]:
    """`text` (settings holding secrets: catalog URL, portal keys) in `folder/name`, readable by
    this user only (file 0600, folder 0700) and removed when the block ends, however it ends.
    A file left by a killed run under the same name is replaced, never reused."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    path = folder / name
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        yield path
    finally:
        path.unlink(missing_ok=True)


def settings_toml(settings: Settings, **spark_overrides: str) -> str:
    """`settings` as a juncture.toml, so a spark-submitted job loads exactly the caller's settings."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(str(k))} = {value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, (tuple, list)):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(str(v))

    top = {
        "home": str(settings.home),
        "lake": settings.lake,
        "catalog_url": settings.catalog_url,
        "log_format": settings.log_format,
        "lock_wait_s": settings.lock_wait_s,
    }
    lines = [f"{k} = {value(v)}" for k, v in top.items()]
    for section in ("spark", "crawl", "index", "airflow"):
        obj = getattr(settings, section)
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name != "families"}
        if section == "spark":
            fields.update(spark_overrides)
        lines += ["", f"[{section}]"] + [f"{k} = {value(v)}" for k, v in fields.items()]
    for name, family in settings.index.families.items():  # [index.<family>] tables
        lines += ["", f"[index.{name}]"] + [
            f"{f.name} = {value(getattr(family, f.name))}" for f in dataclasses.fields(family)
        ]
    for src in settings.sources:
        lines += ["", "[[sources]]"] + [f"{f.name} = {value(getattr(src, f.name))}" for f in dataclasses.fields(src)]
    return "\n".join(lines) + "\n"


__all__ = [
    "LakeBusyError",
    "bind_settings",
    "crawl_source",
    "current_settings",
    "lake_lock",
    "land_manual",
    "pending_batch_ids",
    "private_settings_file",
    "rebuild_needed",
    "rebuild_step",
    "rebuild_step_names",
    "run_stage",
    "settings_toml",
    "source_names",
    "stage_names",
]
