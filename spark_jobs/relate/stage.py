"""The relate stage: gold `joinable` lists, then the `unionable` lists that read them, as one unit.

Both lists and their change logs (which columns and tables each batch re-listed, what the catalog
publish replaces) are the `RELATE` unit, committed once per batch after both are written. A full
re-relate (`relate_all`, part of every rebuild) recomputes every list from the lake as of the last
batch the stage applied, in the same unit, so later batches continue incrementally from it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from catalog.core.settings import Settings
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.commit_point import UnitSpec, applied_batch, batch_store, begin, commit
from spark_jobs.lake.job_main import batch_job_main
from spark_jobs.lake.store import LakeStore
from spark_jobs.profile.tokens import COLUMN_TOKENS
from spark_jobs.relate import joinable, unionable
from spark_jobs.relate.union_features import UNIONABLE_FEATURES

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
    out: dict[str, Any] = {"joinable": _timed(joinable.update, spark, store, settings, batch, full=full)}
    if with_unionable:
        out["unionable"] = _timed(unionable.update, spark, store, settings, batch, full=full)
    commit(store, RELATE, base, batch_id=batch.batch_id, kind="full" if full else "update")
    return out


def _timed(part: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """A part's counts with its seconds: the stage's report says which of the two a batch paid for."""
    started = time.perf_counter()
    counts = part(*args, **kwargs)
    return {**counts, "seconds": round(time.perf_counter() - started, 3)}


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
    started = time.perf_counter()
    j = joinable.write_all(store, tokens, joinable.key_columns(spark, store), settings, version)
    joinable_seconds = round(time.perf_counter() - started, 3)
    everything = ChangeBatch(version, (), ())
    u = _timed(unionable.update, spark, store, settings, everything, full=True, record_changes=False)
    commit(store, RELATE, base, batch_id=version, kind="relate_all")
    counts = {
        "n_joinable_rows": j.n_rows_written,
        "n_unionable_rows": u["n_unionable_rows"],
        "index_version": version,
        "joinable_seconds": joinable_seconds,
        "unionable_seconds": u["seconds"],
    }
    log.info("relations recomputed in full", extra=counts)
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    return batch_job_main("relate", run, argv, full_flag=True)


if __name__ == "__main__":
    raise SystemExit(main())
