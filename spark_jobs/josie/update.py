"""JOSIE index, incremental ADD/DELETE of (token, set) pairs for one change batch; the "josie" stage.

JOSIE (SIGMOD 2019) App. 7.1.5, with the case the paper misses (docs/algorithms/josie.md, erratum
A7). The batch's touched tables are diffed against what the index holds for them: a column that
survives keeps its set id and gets a pair diff, a new column gets a new set id (never reused), a
column gone or now empty loses its set. Every case follows from recomputing each *affected* set (one
with any pair change) as a whole: its tokens re-sorted by token id give 0-based positions and the
size, and every posting list that holds one of its tokens (before or after) is rebuilt from its
unaffected entries plus the set's new entries. That covers case 2 (existing token, new set), case 3
(new token, existing set: new tokens sort last), case 4, DELETE (later positions shift down), and
the missed case of an existing token added to an existing set (later positions shift up).

Existing token ids never change; new tokens get ids from `next_token_id` on, in (batch frequency,
token) order. A list whose set-id membership changed (entries added or removed, new or vanished
token) leaves its duplicate group: it gets the singleton group DIRTY_GROUP_BASE + token_id. Lists
that only see positions/sizes move keep their group (their set ids are unchanged, so the group is
still a run of identical lists). The dirty share (dirty lists / lists) goes into `josie_state`, and
the result says whether a rebuild is due (share > josie_settings(settings).dirty_threshold).

The same update runs on the driver with Arrow and numpy (`update_josie_arrow`) while the index is
small enough for it (`use_driver`): identical results, without a dozen Spark jobs over the whole
index for a batch that changes a few thousand lists.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyspark.sql import functions as F  # noqa: N812

from catalog.core.identity import table_bucket
from catalog.core.settings import Settings
from catalog.search.josie.settings import josie_settings
from spark_jobs.josie import build as josie_index
from spark_jobs.josie import update_arrow as update_josie_arrow
from spark_jobs.josie.build import (
    COLUMN_TOKENS,
    commit_update,
    conform,
    dense_index,
    integer_sets,
    posting_entries,
    posting_lists,
    read_state,
)
from spark_jobs.josie.tables import (
    CHANGE_SET,
    CHANGE_TOKEN,
    DIRTY_GROUP_BASE,
    JOSIE,
    JOSIE_POSTINGS,
    JOSIE_SETS,
    JOSIE_STATE,
    JOSIE_TOKENS,
    JosieResult,
    JosieState,
)
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.commit_point import applied_batch, batch_store, begin, commit
from spark_jobs.lake.frames import local_frame
from spark_jobs.lake.job_main import batch_job_main
from spark_jobs.lake.store import LakeStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


def rebuild_due(state: JosieState, settings: Settings) -> bool:
    return state.dirty_share > josie_settings(settings).dirty_threshold


def _empty_column_tokens(spark: SparkSession) -> DataFrame:
    return local_frame(spark, [], "table_id string, column_id string, token string")


def use_driver(state: JosieState, settings: Settings) -> bool:
    """Whether the batch is applied on the driver (`update_josie_arrow`) rather than by Spark:
    `index.josie.update_engine` "arrow" or "spark" decides, "auto" picks the driver while the index
    has at most `index.josie.driver_max_lists` posting lists (its tables then fit in its memory)."""
    engine = josie_settings(settings).update_engine
    if engine == "auto":
        return state.n_lists <= josie_settings(settings).driver_max_lists
    return engine == "arrow"


def update(spark: SparkSession, store: LakeStore, batch: ChangeBatch, *, n_buckets: int) -> JosieResult:
    """Apply `batch` to an existing index with Spark; commits tokens, sets, postings, changes, then
    state."""

    base = begin(store, JOSIE)
    versions = {n: store.version(n) for n in (JOSIE_TOKENS, JOSIE_SETS, JOSIE_POSTINGS, JOSIE_STATE)}
    state = read_state(store, versions[JOSIE_STATE])
    old_tokens = store.read(JOSIE_TOKENS, version=versions[JOSIE_TOKENS])
    old_sets = store.read(JOSIE_SETS, version=versions[JOSIE_SETS])
    old_post = store.read(JOSIE_POSTINGS, version=versions[JOSIE_POSTINGS])
    touched, added = list(batch.touched), list(batch.added)
    persisted: list[DataFrame] = []

    def keep(df: DataFrame) -> DataFrame:
        persisted.append(df.persist())
        return df

    aff_old = keep(old_sets.where(F.col("table_id").isin(touched)).select("set_id", "column_id", "tokens"))
    if added:
        buckets = sorted({table_bucket(t, n_buckets) for t in added})
        new_ct = store.read(
            COLUMN_TOKENS, columns=["table_id", "column_id", "token"], where={"bucket": buckets, "table_id": added}
        )
    else:
        new_ct = _empty_column_tokens(spark)
    new_ct = keep(new_ct)

    # Set ids: surviving columns keep theirs; new columns get fresh ones (column metadata is small).
    cols = (
        new_ct.select("table_id", "column_id")
        .distinct()
        .join(aff_old.select("column_id", "set_id"), "column_id", "left")
    )
    col_rows = cols.collect()
    next_set_id = state.next_set_id
    mapping = []
    for r in sorted(col_rows, key=lambda r: r["column_id"]):
        sid = r["set_id"]
        if sid is None:
            sid, next_set_id = next_set_id, next_set_id + 1
        mapping.append((int(sid), r["table_id"], r["column_id"]))
    col_map = local_frame(spark, mapping, "set_id long, table_id string, column_id string")

    # Token ids: known tokens keep theirs; new ones are appended to the order.
    pairs = new_ct.join(F.broadcast(col_map), ["table_id", "column_id"]).select("set_id", "token")
    # Only the dictionary rows of the batch's tokens are joined (broadcast): no shuffle of the index.
    batch_tokens = pairs.select("token").distinct()
    known_ids = old_tokens.select("token", "token_id").join(F.broadcast(batch_tokens), "token", "left_semi")
    known = keep(pairs.join(known_ids, "token", "left"))
    fresh = known.where(F.col("token_id").isNull()).groupBy("token").agg(F.count(F.lit(1)).alias("batch_freq"))
    fresh = keep(
        dense_index(fresh, ["batch_freq", "token"], "token_id", start=state.next_token_id).select("token", "token_id")
    )
    new_int = keep(
        known.where(F.col("token_id").isNotNull())
        .select("set_id", "token_id")
        .unionByName(pairs.join(fresh, "token").select("set_id", "token_id"))
    )
    new_sets = keep(integer_sets(new_int))
    old_int = keep(
        aff_old.select("set_id", F.explode("tokens").alias("token_id")).withColumn(
            "token_id", F.col("token_id").cast("long")
        )
    )

    # Lists whose membership changed (dirty) and lists to rewrite (any entry of an affected set).
    dirty = keep(
        old_int.join(new_int, ["set_id", "token_id"], "left_anti")
        .select("token_id")
        .unionByName(new_int.join(old_int, ["set_id", "token_id"], "left_anti").select("token_id"))
        .distinct()
    )
    rewrite = keep(old_int.select("token_id").unionByName(new_int.select("token_id")).distinct())
    aff_ids = aff_old.select("set_id")

    kept_entries = (
        old_post.join(F.broadcast(rewrite), "token_id", "left_semi")
        .select("token_id", F.explode(F.arrays_zip("set_ids", "positions", "sizes")).alias("e"))
        .select(
            "token_id",
            F.col("e.set_ids").cast("long").alias("set_id"),
            F.col("e.positions").alias("position"),
            F.col("e.sizes").alias("size"),
        )
        .join(F.broadcast(aff_ids), "set_id", "left_anti")
    )
    new_entries = posting_entries(new_sets).select("token_id", "set_id", "position", "size")
    lists_upd = keep(
        posting_lists(kept_entries.unionByName(new_entries.withColumn("token_id", F.col("token_id").cast("long"))))
    )

    names = old_tokens.select("token", "token_id").join(F.broadcast(dirty), "token_id", "left_semi").unionByName(fresh)
    tokens_upd = (
        lists_upd.join(dirty, "token_id", "left_semi")
        .select("token_id", F.size("set_ids").alias("frequency"))
        .join(names, "token_id")
        .withColumn("group_id", F.lit(DIRTY_GROUP_BASE) + F.col("token_id"))
    )
    tokens_new = old_tokens.join(F.broadcast(dirty), "token_id", "left_anti").unionByName(
        tokens_upd.select("token", "token_id", "frequency", "group_id")
    )
    sets_new = old_sets.join(F.broadcast(aff_ids), "set_id", "left_anti").unionByName(
        conform(new_sets.join(F.broadcast(col_map), "set_id"), JOSIE_SETS)
    )
    postings_new = old_post.join(F.broadcast(rewrite), "token_id", "left_anti").unionByName(lists_upd)

    version = state.index_version + 1
    changes = (
        rewrite.select(F.lit(CHANGE_TOKEN).alias("kind"), F.col("token_id").alias("key"))
        .unionByName(
            aff_ids.unionByName(col_map.select("set_id"))
            .distinct()
            .select(F.lit(CHANGE_SET).alias("kind"), F.col("set_id").alias("key"))
        )
        .withColumn("index_version", F.lit(version))
        .withColumn("base_version", F.lit(version - 1))
    )
    try:
        return commit_update(
            store,
            base,
            batch.batch_id,
            tokens=tokens_new,
            sets=sets_new,
            postings=postings_new,
            changes=changes,
            state=state,
            version=version,
            next_set_id=next_set_id,
        )
    finally:
        for df in persisted:
            df.unpersist()
        spark.catalog.clearCache()


def run(spark: SparkSession, settings: Settings, batch: ChangeBatch) -> JosieResult:
    """The pipeline stage: a full build if there is no index yet, else an incremental update."""
    store = batch_store(settings.lake, spark, batch.batch_id)
    if josie_index.index_exists(store):
        state = read_state(store)
        if applied_batch(store, JOSIE) >= batch.batch_id:
            return JosieResult("skipped", state, rebuild_due=rebuild_due(state, settings))
        if batch.empty:  # nothing to change: record the batch as applied
            commit(store, JOSIE, begin(store, JOSIE), batch_id=batch.batch_id, kind="empty")
            return JosieResult("empty", state, rebuild_due=rebuild_due(state, settings))
        if use_driver(state, settings):
            result = update_josie_arrow.update(store, batch, n_buckets=settings.index.cells_buckets)
        else:
            result = update(spark, store, batch, n_buckets=settings.index.cells_buckets)
    else:
        result = josie_index.build(spark, store, batch_id=batch.batch_id)
    assert result.state is not None
    result = dataclasses.replace(result, rebuild_due=rebuild_due(result.state, settings))
    log.info("josie index updated", extra=result.summary())
    return result


def main(argv: Sequence[str] | None = None) -> int:
    return batch_job_main("update_josie", run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
