"""PEXESO as an index family (`catalog.core.registry`): its lake unit, the stage that applies a
change batch, the pivot re-selection and the catalog publisher."""

from __future__ import annotations

from spark_jobs.family import IndexFamily
from spark_jobs.pexeso import update
from spark_jobs.pexeso.publish import publish_pexeso
from spark_jobs.pexeso.tables import PEXESO

FAMILY = IndexFamily(
    name="pexeso",
    unit=PEXESO,
    update=update.run,
    publish=publish_pexeso,
    rebuild=update.rebuild,
    rebuild_due=update.rebuild_due,
)
