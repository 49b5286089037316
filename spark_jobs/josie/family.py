"""JOSIE as an index family (`catalog.core.registry`): its lake unit, the pipeline stage that applies a
change batch, the duplicate-group rebuild and the catalog publisher."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from catalog.core.settings import Settings
from spark_jobs.family import IndexFamily
from spark_jobs.josie import rebuild, update
from spark_jobs.josie.publish import publish_josie
from spark_jobs.josie.tables import JOSIE

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _rebuild(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    return rebuild.run(spark, settings).summary()


FAMILY = IndexFamily(
    name="josie", unit=JOSIE, update=update.run, publish=publish_josie, rebuild=_rebuild, rebuild_due=rebuild.due
)
