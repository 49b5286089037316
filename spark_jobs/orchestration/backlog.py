"""The backlog: work that earlier runs left for later to stay within their budgets, done once every
landed batch is published.

A run bounds the precomputed lists it makes: MATE's n-ary lists by (key tuple, lake item) pairs, the
transformation lists by pairs learned. A lake's first build leaves the others pending; a lookup
says so and points to the online search. A change batch makes only the lists its own changes call
for, so a small change is published in seconds instead of waiting behind a first build's leftovers;
the backlog runs after it (`juncture index`, and the `backlog` task of lake_index), one budget's
worth per run, and publishes what it made in one transaction of its own.

Kill-safety: a family's backlog commits at its commit point; the publish is one catalog
transaction. A kill between them leaves the catalog behind the lake, which the family's
`backlog_due` reports, so the next run publishes it. The backlog never runs while a batch waits
for its publish: a backlog publish would show that batch's indexes before its tables.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from catalog.core.settings import Settings
from catalog.db.engine import open_catalog
from catalog.search.autojoin.lists import lists_pending
from spark_jobs.family import IndexFamily, pipeline_families
from spark_jobs.lake.store import LakeStore
from spark_jobs.orchestration.pipeline import pending_batches, spark_job_group
from spark_jobs.publish.catalog import publish_backlog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def backlog_due(spark: SparkSession | None, settings: Settings) -> bool:
    """Whether a backlog run has work (without Spark: a task checks before it starts a session)."""
    families, transform_lists = _due(spark, settings)
    return bool(families) or transform_lists


def work_backlog(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    """One run of the backlog: each family's that is due, then the publish; {} when there is
    nothing to do. The caller holds the lake lock."""
    families, transform_lists = _due(spark, settings)
    if not families and not transform_lists:
        return {}
    t0 = time.perf_counter()
    with spark_job_group(spark, "juncture.backlog"):
        results: dict[str, Any] = {f.name: f.backlog(spark, settings) for f in families if f.backlog is not None}
        results["publish"] = publish_backlog(settings, spark, transform_lists=transform_lists)
    results["seconds"] = round(time.perf_counter() - t0, 3)
    log.info("backlog done", extra={"seconds": results["seconds"]})
    return results


def _due(spark: SparkSession | None, settings: Settings) -> tuple[list[IndexFamily], bool]:
    """The families whose backlog has work, and whether transformation lists wait; neither while a
    batch waits for its publish."""
    if pending_batches(LakeStore(settings.lake, spark), settings):
        log.info("backlog waits: a batch is not published yet")
        return [], False
    families = [f for f in pipeline_families() if f.backlog_due is not None and f.backlog_due(spark, settings)]
    with open_catalog(settings.catalog_url).connect() as conn:
        return families, lists_pending(conn)
