"""The index pipeline for change batches, in-process: what `juncture index` runs and what the
`lake_index` DAG runs task by task.

Stages run in order for each pending batch; each stage is idempotent for a batch (its unit's
manifest records the last batch it applied; the publish records a run in the catalog), so a
pipeline killed anywhere is completed by simply running it again. A batch is pending until the
publish has committed it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from catalog.core.logs import log_context
from catalog.core.settings import Settings
from spark_jobs.family import Stage, pipeline_families
from spark_jobs.lake.batches import ChangeBatch, batch_ids, load_batch
from spark_jobs.lake.store import LakeStore
from spark_jobs.profile import keys as detect_keys
from spark_jobs.profile import profiles as profile_columns
from spark_jobs.profile import tokens as column_tokens
from spark_jobs.publish import catalog as publish_catalog
from spark_jobs.relate import stage as relate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def all_stages() -> list[tuple[str, Stage]]:
    """(name, job) in execution order: silver, then each index family's update, relate, publish
    (the names are `plan.stage_names()`)."""
    return [
        ("tokens", column_tokens.run),
        ("profile", profile_columns.run),
        ("keys", detect_keys.run),
        *((family.name, family.update) for family in pipeline_families()),
        ("relate", relate.run),
        ("publish", publish_catalog.run),
    ]


@dataclass
class BatchReport:
    """What each stage of one batch cost: wall seconds and Spark jobs launched (the fixed cost of a
    job, tens to hundreds of milliseconds on one machine, is what small batches mostly pay)."""

    batch_id: int
    n_added: int
    n_deleted: int
    seconds: dict[str, float] = field(default_factory=dict)
    spark_jobs: dict[str, int] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)


@contextmanager
def spark_job_group(spark: SparkSession | None, group: str) -> Iterator[Callable[[], int]]:
    """Tag the Spark jobs run inside with `group`; yields a function that counts them (0 without
    Spark: a stage that needs no session, such as the publish, may get None)."""
    if spark is None:
        yield lambda: 0
        return
    context = spark.sparkContext
    context.setJobGroup(group, group)
    try:
        yield lambda: len(context.statusTracker().getJobIdsForGroup(group))
    finally:
        for key in ("spark.jobGroup.id", "spark.job.description"):  # setJobGroup's two properties
            context.setLocalProperty(key, None)  # type: ignore[arg-type]  # None removes a property


def pending_batches(store: LakeStore, settings: Settings) -> list[ChangeBatch]:
    published = publish_catalog.published_batch_ids(settings)
    return [load_batch(store, b) for b in batch_ids(store) if b not in published]


def run_batch(
    spark: SparkSession, settings: Settings, batch: ChangeBatch, stages: Sequence[tuple[str, Stage]] | None = None
) -> BatchReport:
    """Run every stage (or `stages`) for `batch`, in order, timing each."""
    report = BatchReport(batch.batch_id, len(batch.added), len(batch.deleted))
    with log_context(batch_id=batch.batch_id):
        for name, stage in stages or all_stages():
            t0 = time.perf_counter()
            with spark_job_group(spark, f"juncture.batch{batch.batch_id}.{name}") as jobs:
                report.results[name] = stage(spark, settings, batch)
            report.seconds[name] = round(time.perf_counter() - t0, 3)
            report.spark_jobs[name] = jobs()
            log.info(
                "stage done",
                extra={"stage": name, "seconds": report.seconds[name], "spark_jobs": report.spark_jobs[name]},
            )
    return report


def index_pending(spark: SparkSession, settings: Settings) -> list[BatchReport]:
    """Apply every pending change batch, oldest first."""
    store = LakeStore(settings.lake, spark)
    return [run_batch(spark, settings, batch) for batch in pending_batches(store, settings)]
