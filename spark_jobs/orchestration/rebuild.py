"""The rebuild: one sequence of steps shared by `juncture rebuild`, `juncture index --full` and the
`lake_rebuild` DAG (one task per step), so the three can never disagree.

1. `catch_up`: apply every pending change batch, so the rebuild starts from everything landed;
2. `rebuild_groups`: JOSIE's duplicate-group rebuild (one commit point, like an update);
3. `relate_all`: every joinable and unionable list recomputed;
4. `publish_all`: the rebuilt index and every list published in one catalog transaction.

Each step is idempotent and crash-safe on its own, so a rebuild killed anywhere is completed by
running it again, or by the next `juncture index`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from catalog.core.settings import Settings
from spark_jobs.josie import rebuild as rebuild_josie
from spark_jobs.josie.publish import publish_current
from spark_jobs.orchestration.pipeline import index_pending
from spark_jobs.relate.stage import relate_all

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

Step = Callable[["SparkSession", Settings], dict[str, Any]]


def _catch_up(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    return {"n_batches": len(index_pending(spark, settings))}


def _publish_all(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    return publish_current(settings, spark, relations=True)


STEPS: dict[str, Step] = {
    "catch_up": _catch_up,
    "rebuild_groups": rebuild_josie.run,
    "relate_all": relate_all,
    "publish_all": _publish_all,
}


def run_step(spark: SparkSession, settings: Settings, step: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    out = STEPS[step](spark, settings)
    log.info("rebuild step done", extra={"step": step, "seconds": round(time.perf_counter() - t0, 3)})
    return out


def rebuild_all(spark: SparkSession, settings: Settings, *, if_due: bool = False) -> dict[str, dict[str, Any]]:
    """Every step in order (with `if_due`, nothing after catching up unless JOSIE's dirty share
    passes `index.josie_dirty_threshold`). The caller holds the lake lock."""
    results = {"catch_up": run_step(spark, settings, "catch_up")}
    if if_due and not rebuild_josie.due(spark, settings):
        results["rebuild_groups"] = {"mode": "not_due"}
        return results
    for step in list(STEPS)[1:]:
        results[step] = run_step(spark, settings, step)
    return results
