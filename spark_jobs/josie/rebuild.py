"""JOSIE duplicate-group rebuild: re-sort and regroup the whole index, keeping set ids.

Incremental updates leave new tokens at the end of the order and changed lists in singleton groups
(JOSIE, SIGMOD 2019, App. 7.1.5); this job rebuilds the dictionary, the integer sets and
the posting lists from the index's own (token, set) pairs exactly as a fresh build would, except
that set ids (and `next_set_id`) are kept. It runs when the dirty share passes
josie_settings(settings).dirty_threshold (the update stage reports `rebuild_due`), on schedule, and
from `juncture rebuild`.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyspark.sql import functions as F  # noqa: N812

from catalog.core.settings import Settings, load_settings
from catalog.search.josie.settings import josie_settings
from spark_jobs.josie.build import build_index, index_exists, read_state, write_full
from spark_jobs.josie.tables import JOSIE, JOSIE_SETS, JOSIE_TOKENS, JosieResult, JosieState
from spark_jobs.lake.commit_point import begin
from spark_jobs.lake.session import get_spark
from spark_jobs.lake.store import LakeStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def rebuild(spark: SparkSession, store: LakeStore, *, hash_modulus: int = 0) -> JosieResult:
    """Rebuild the index in place (mode "absent" when there is no index)."""
    base = begin(store, JOSIE)  # a rebuild killed half-way is rolled back here
    if not index_exists(store):
        return JosieResult("absent")
    current = read_state(store)
    version = current.index_version + 1
    tokens = store.read(JOSIE_TOKENS)
    sets = store.read(JOSIE_SETS)
    pairs = (
        sets.select("set_id", F.explode("tokens").alias("token_id"))
        .withColumn("token_id", F.col("token_id").cast("long"))
        .join(tokens.select("token_id", "token"), "token_id")
        .select("token", "set_id")
        .persist()
    )
    try:
        frames = build_index(pairs, hash_modulus=hash_modulus)
        frames.tokens = frames.tokens.persist()
        n_tokens = frames.tokens.count()
        state = JosieState(
            index_version=version,
            next_set_id=current.next_set_id,
            next_token_id=n_tokens,
            last_rebuild_batch=base.batch_id,
        )
        state = write_full(
            store,
            frames,
            sets.select("set_id", "table_id", "column_id"),
            base=base,
            batch_id=base.batch_id,
            kind="rebuild",
            state=state,
        )
    finally:
        spark.catalog.clearCache()
    log.info("josie index rebuilt", extra={"index_version": version, "n_lists": state.n_lists})
    return JosieResult("rebuild", state)


def run(spark: SparkSession, settings: Settings) -> JosieResult:
    """Rebuild now (the family's rebuild step)."""
    return rebuild(spark, LakeStore(settings.lake, spark))


def due(spark: SparkSession | None, settings: Settings) -> bool:
    """Whether the committed index's dirty share passes the threshold."""
    store = LakeStore(settings.lake, spark)
    return index_exists(store) and read_state(store).dirty_share > josie_settings(settings).dirty_threshold


def run_if_due(spark: SparkSession, settings: Settings) -> JosieResult:
    """Rebuild only when the dirty share passes the threshold."""
    store = LakeStore(settings.lake, spark)
    if not index_exists(store):
        return JosieResult("absent")
    if not due(spark, settings):
        return JosieResult("not_due", read_state(store))
    return rebuild(spark, store)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rebuild_josie")
    parser.add_argument("--if-due", action="store_true", help="only when the dirty share passes the threshold")
    args = parser.parse_args(argv)

    settings = load_settings()
    spark = get_spark(settings, "juncture.rebuild_josie")
    if args.if_due:
        run_if_due(spark, settings)
    else:
        run(spark, settings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
