"""The pipeline half of an index family (see `catalog.core.registry`): what the pipeline, the
publish, the rebuild and the DAGs need from it.

* `unit`: the family's lake tables, one commit point (`spark_jobs.lake.commit_point`);
* `update(spark, settings, batch)`: the pipeline stage that applies one change batch (a first
  build when the index does not exist yet); idempotent per batch;
* `rebuild(spark, settings)`: what a rebuild does for it (JOSIE regroups duplicate lists, LSH
  Ensemble repartitions, PEXESO re-pivots); None when an update leaves nothing to tidy;
* `rebuild_due(spark, settings)`: whether incremental updates degraded it enough to rebuild now;
* `publish(session, store, batch)`: brings the family's catalog tables to the lake state `store`
  reads (a batch's, inside that batch's publish transaction; `batch` None after a rebuild or the
  backlog);
* `backlog(spark, settings)` and `backlog_due(spark, settings)`: work an earlier run left for later
  within its budget (MATE's pending n-ary lists), done after the batches are published
  (`spark_jobs.orchestration.backlog`) so that a small batch is not held up by it; None when a
  family leaves none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from catalog.core.registry import families, load
from catalog.core.settings import Settings
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.commit_point import UnitSpec
from spark_jobs.lake.store import LakeStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlalchemy.orm import Session

Stage = Callable[["SparkSession", Settings, ChangeBatch], Any]
# A batch's publisher; a family's also runs after a rebuild, with no batch (`FamilyPublisher`).
Publisher = Callable[["Session", LakeStore, ChangeBatch], dict[str, int]]
FamilyPublisher = Callable[["Session", LakeStore, "ChangeBatch | None"], dict[str, int]]


@dataclass(frozen=True)
class IndexFamily:
    name: str
    unit: UnitSpec
    update: Stage
    publish: FamilyPublisher
    rebuild: Callable[[SparkSession, Settings], dict[str, Any]] | None = None
    rebuild_due: Callable[[SparkSession | None, Settings], bool] | None = None
    backlog: Callable[[SparkSession, Settings], dict[str, Any]] | None = None
    backlog_due: Callable[[SparkSession | None, Settings], bool] | None = None


def pipeline_families() -> list[IndexFamily]:
    """The pipeline half of every registered family that has an index, in registry order."""
    return [load(entry.pipeline) for entry in families() if entry.pipeline is not None]


def rebuild_step_name(family: str) -> str:
    return f"rebuild_{family}"
