"""The relate stage: gold `joinable` lists, then the `unionable` lists that read them, as one unit.

Both lists and their change logs (which columns and tables each batch re-listed, what the catalog
publish replaces) are the `RELATE` unit, committed once per batch after both are written. A full
re-relate (`relate_all`, part of every rebuild) recomputes every list from the lake as of the last
batch the stage applied, in the same unit, so later batches continue incrementally from it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from catalog.core.settings import Settings
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.commit_point import UnitSpec, applied_batch, batch_store, begin, commit
from spark_jobs.lake.job_main import batch_job_main
from spark_jobs.lake.store import LakeStore
from spark_jobs.profile.tokens import COLUMN_TOKENS
from spark_jobs.relate import joinable, unionable
from spark_jobs.relate.union_features import UNIONABLE_FEATURES
from spark_jobs.timing import PartTimes

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

RELATE = UnitSpec(
    "relate",
    (
        joinable.JOINABLE,
        joinable.JOINABLE_CHANGES,
        joinable.JOINABLE_FREQUENT,
        unionable.UNIONABLE,
        unionable.UNIONABLE_CHANGES,
        unionable.UNIONABLE_CANDIDATES,
        unionable.UNIONABLE_HEADERS,
        UNIONABLE_FEATURES,
    ),
)


def run(
    spark: SparkSession, settings: Settings, batch: ChangeBatch, *, full: bool = False, with_unionable: bool = True
) -> dict[str, Any]:
    """The pipeline's "relate" stage for `batch` (`full`: recompute every list)."""
    store = batch_store(settings.lake, spark, batch.batch_id)
    if applied_batch(store, RELATE) >= batch.batch_id:
        return {"skipped": True}
    base = begin(store, RELATE)
    times = PartTimes()  # the stage's report says which of the two parts a batch paid for
    out: dict[str, Any] = {}
    with times.part("joinable"):
        out["joinable"] = joinable.update(spark, store, settings, batch, full=full)
    if with_unionable:
        with times.part("unionable"):
            out["unionable"] = unionable.update(spark, store, settings, batch, full=full)
    commit(store, RELATE, base, batch_id=batch.batch_id, kind="full" if full else "update")
    return {**out, "seconds": times.seconds}


def relate_all(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    """Full re-relate: every joinable and unionable list recomputed, replacing gold `joinable` and
    `unionable`; `publish.relations.publish_all_relations` then replaces the catalog's lists."""
    current = LakeStore(settings.lake, spark)
    version = applied_batch(current, RELATE)
    store = batch_store(settings.lake, spark, version)
    if not version or not store.exists(COLUMN_TOKENS):
        return {"skipped": True}
    base = begin(store, RELATE)
    tokens = store.read(COLUMN_TOKENS, columns=["table_id", "column_id", "token", "n"])
    times = PartTimes()
    with times.part("joinable"):
        j = joinable.write_all(store, tokens, joinable.key_columns(spark, store), settings, version)
    everything = ChangeBatch(version, (), ())
    with times.part("unionable"):
        u = unionable.update(spark, store, settings, everything, full=True, record_changes=False)
    commit(store, RELATE, base, batch_id=version, kind="relate_all")
    counts = {
        "n_joinable_rows": j.n_rows_written,
        "n_unionable_rows": u["n_unionable_rows"],
        "index_version": version,
        "seconds": times.seconds,
    }
    log.info("relations recomputed in full", extra=counts)
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    return batch_job_main("relate", run, argv, full_flag=True)


if __name__ == "__main__":
    raise SystemExit(main())
