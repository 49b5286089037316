"""The rebuild: one sequence of steps shared by `juncture rebuild`, `juncture index --full` and the
`lake_rebuild` DAG (one task per step), so the three can never disagree.

1. `catch_up`: apply every pending change batch, so the rebuild starts from everything landed;
2. `rebuild_<family>`: each index family's rebuild (JOSIE regroups its duplicate lists), with one
   commit point like an update;
3. `relate_all`: every joinable and unionable list recomputed;
4. `publish_all`: the rebuilt indexes and every list published in one catalog transaction.

Each step is idempotent and crash-safe on its own, so a rebuild killed anywhere is completed by
running it again, or by the next `juncture index`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from catalog.core.settings import Settings
from spark_jobs.family import IndexFamily, pipeline_families
from spark_jobs.orchestration.pipeline import index_pending
from spark_jobs.orchestration.plan import rebuild_step_names
from spark_jobs.publish.catalog import publish_rebuilt
from spark_jobs.relate.stage import relate_all

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

Step = Callable[["SparkSession", Settings], dict[str, Any]]


def _catch_up(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    return {"n_batches": len(index_pending(spark, settings))}


def _rebuild(family: IndexFamily) -> Step:
    def step(spark: SparkSession, settings: Settings) -> dict[str, Any]:
        return family.rebuild(spark, settings) if family.rebuild else {"mode": "no_rebuild"}

    return step


def steps() -> dict[str, Step]:
    """Every step by name, in order (the names are `plan.rebuild_step_names()`)."""
    out: dict[str, Step] = {"catch_up": _catch_up}
    out.update({f"rebuild_{family.name}": _rebuild(family) for family in pipeline_families()})
    out["relate_all"] = relate_all
    out["publish_all"] = lambda spark, settings: publish_rebuilt(settings, spark)
    assert list(out) == rebuild_step_names(), "plan.rebuild_step_names() disagrees with the registry"
    return out


def run_step(spark: SparkSession, settings: Settings, step: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    out = steps()[step](spark, settings)
    log.info("rebuild step done", extra={"step": step, "seconds": round(time.perf_counter() - t0, 3)})
    return out


def due_families(spark: SparkSession | None, settings: Settings) -> list[str]:
    """The index families whose incremental updates have degraded them enough to rebuild now."""
    return [f.name for f in pipeline_families() if f.rebuild_due is not None and f.rebuild_due(spark, settings)]


def rebuild_all(spark: SparkSession, settings: Settings, *, if_due: bool = False) -> dict[str, dict[str, Any]]:
    """Every step in order (with `if_due`, nothing after catching up unless some family is due).
    The caller holds the lake lock."""
    results = {"catch_up": run_step(spark, settings, "catch_up")}
    if if_due and not due_families(spark, settings):
        results["not_due"] = {}
        return results
    for step in list(steps())[1:]:
        results[step] = run_step(spark, settings, step)
    return results
