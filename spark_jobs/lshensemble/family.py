"""LSH Ensemble as an index family (`catalog.core.registry`): its lake unit, the stage that applies
a change batch, the repartition and the catalog publisher."""

from __future__ import annotations

from spark_jobs.family import IndexFamily
from spark_jobs.lshensemble import update
from spark_jobs.lshensemble.publish import publish_lshensemble
from spark_jobs.lshensemble.tables import LSHE

FAMILY = IndexFamily(
    name="lshensemble",
    unit=LSHE,
    update=update.run,
    publish=publish_lshensemble,
    rebuild=update.rebuild,
    rebuild_due=update.rebuild_due,
)
