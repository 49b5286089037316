"""MATE as an index family (`catalog.core.registry`): its lake unit, the stage that applies a change
batch, the re-hash after a spec change, the pending lists' backlog and the catalog publisher."""

from __future__ import annotations

from spark_jobs.family import IndexFamily
from spark_jobs.mate import update
from spark_jobs.mate.publish import backlog_due, publish_mate, work_backlog
from spark_jobs.mate.tables import MATE

FAMILY = IndexFamily(
    name="mate",
    unit=MATE,
    update=update.run,
    publish=publish_mate,
    rebuild=update.rebuild,
    rebuild_due=update.rebuild_due,
    backlog=work_backlog,
    backlog_due=backlog_due,
)
