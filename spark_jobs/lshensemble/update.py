"""The LSH Ensemble index in the lake: build, incremental ADD/DELETE per change batch, repartition.

* **Signatures** come from silver `column_tokens` in Spark: each column's distinct tokens are
  collected into one list and signed in Arrow batches of many columns by `catalog.core.minhash`
  (the same function a query is signed with), so no Python runs per token.
* **A batch** rewrites the signatures of its tables (a changed column is a delete plus an insert:
  a MinHash cannot forget a value). A column larger than every partition's upper bound raises the
  last bound in the same commit, before it can be searched: a member above its partition's bound
  would get a Jaccard threshold above its own and could be missed (thesis §2 of the digest). Small
  columns need nothing: partitions are contiguous from size 1.
* **The repartition** (the family's rebuild) cuts fresh bounds from the size histogram (the
  thesis's optimal partitioning, or equi-depth) and commits them: signatures are not touched,
  since a column's partition follows from its size. It is due when the false-positive cost of
  today's bounds exceeds that of fresh ones by `rebuild_cost_ratio`.
* **A spec change** (`num_perm`, `seed`) makes every signature incomparable with new ones: the next
  update or rebuild re-signs the whole lake rather than mix the two.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.pandas.types import from_arrow_schema

from catalog.core.identity import table_bucket
from catalog.core.minhash import MinHashSpec, murmur3_32, signatures, to_bytes
from catalog.core.settings import Settings
from catalog.search.lshensemble import partitions
from catalog.search.lshensemble.settings import LshEnsembleSettings, lshensemble_settings
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.commit_point import applied_batch, batch_store, begin, commit
from spark_jobs.lake.store import LakeStore
from spark_jobs.lshensemble.tables import LSHE, LSHE_SIGNATURES, LSHE_STATE, SIGNATURES_SCHEMA, LsheState
from spark_jobs.profile.tokens import COLUMN_TOKENS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------- signatures
def spec_of(settings: LshEnsembleSettings) -> MinHashSpec:
    return MinHashSpec(num_perm=settings.num_perm, seed=settings.seed)


def column_signatures(tokens: DataFrame, spec: MinHashSpec) -> DataFrame:
    """(table_id, column_id, token) rows, distinct per column -> one row per column with its size
    and signature (SIGNATURES_SCHEMA)."""
    lists = tokens.groupBy("column_id", "table_id").agg(F.collect_list("token").alias("tokens"))
    return lists.mapInArrow(functools.partial(sign_batches, spec), schema=from_arrow_schema(SIGNATURES_SCHEMA))


def sign_batches(spec: MinHashSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: each batch's token lists -> sizes and signatures, one numpy pass per batch."""
    for batch in batches:
        lists = batch.column("tokens")
        offsets = lists.offsets.to_numpy()
        sizes = np.diff(offsets)
        tokens = lists.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        owners = np.repeat(np.arange(len(batch)), sizes)
        sigs = signatures(spec, murmur3_32(tokens), owners, len(batch))
        yield pa.RecordBatch.from_arrays(
            [
                batch.column("column_id"),
                batch.column("table_id"),
                pa.array(sizes, pa.int64()),
                pa.array(to_bytes(sigs), pa.binary()),
            ],
            schema=SIGNATURES_SCHEMA,
        )


def _tokens(store: LakeStore, settings: Settings, table_ids: list[str] | None) -> DataFrame:
    columns = ["table_id", "column_id", "token"]
    if table_ids is None:
        return store.read(COLUMN_TOKENS, columns=columns)
    buckets = sorted({table_bucket(t, settings.index.cells_buckets) for t in table_ids})
    return store.read(COLUMN_TOKENS, columns=columns, where={"bucket": buckets, "table_id": table_ids})


# ---------------------------------------------------------------------- state
def read_state(store: LakeStore) -> LsheState | None:
    row = store.one_row(LSHE_STATE)
    return LsheState.from_row(row) if row else None


def fresh_uppers(sizes: np.ndarray, counts: np.ndarray, family: LshEnsembleSettings) -> np.ndarray:
    """Bounds cut from the size histogram as the settings ask."""
    if family.partitioning == "equi_depth":
        return partitions.equi_depth_uppers(sizes, counts, family.n_partitions)
    return partitions.optimal_uppers(sizes, counts, family.n_partitions)


def _state(
    store: LakeStore,
    family: LshEnsembleSettings,
    *,
    base: LsheState | None,
    uppers: np.ndarray | None,
    full: bool,
    rebuild_batch: int,
) -> LsheState:
    """The state after a write of `lshe_signatures`: `uppers` kept (raised over any new size), or
    fresh bounds when None."""
    sizes, counts = partitions.histogram(store.read_arrow(LSHE_SIGNATURES, columns=["size"])["size"].to_numpy())
    optimal = fresh_uppers(sizes, counts, family) if len(sizes) else np.empty(0, np.int64)
    if uppers is None:
        kept, n_raised = optimal, 0
    else:
        kept = partitions.raised(uppers, sizes) if len(sizes) else uppers
        n_raised = (base.n_raised if base else 0) + int(len(uppers) > 0 and len(sizes) > 0 and kept[-1] != uppers[-1])
    version = base.index_version if base else 0
    return LsheState(
        index_version=version + 1,
        base_version=version,
        full=full,
        spec=spec_of(family),
        partitioning=family.partitioning,
        tuning=json.dumps({"max_r": family.max_r, "fp_weight": family.fp_weight, "fn_weight": family.fn_weight}),
        uppers=tuple(int(u) for u in kept),
        n_columns=int(counts.sum()),
        cost=partitions.cost(sizes, counts, kept) if len(sizes) else 0.0,
        optimal_cost=partitions.cost(sizes, counts, optimal) if len(sizes) else 0.0,
        n_raised=n_raised,
        last_rebuild_batch=rebuild_batch if uppers is None else (base.last_rebuild_batch if base else 0),
    )


def is_due(state: LsheState | None, family: LshEnsembleSettings) -> bool:
    """A repartition is due when today's bounds cost `rebuild_cost_ratio` times fresh ones, or the
    spec or partitioning changed."""
    if state is None:
        return False
    if state.spec != spec_of(family) or state.partitioning != family.partitioning:
        return True
    return state.cost > family.rebuild_cost_ratio * state.optimal_cost + 1e-9


# ---------------------------------------------------------------------- the stage
def run(spark: SparkSession, settings: Settings, batch: ChangeBatch) -> dict[str, Any]:
    """Apply `batch` (a first build when there is no index, or a re-sign after a spec change)."""
    store = batch_store(settings.lake, spark, batch.batch_id)
    if applied_batch(store, LSHE) >= batch.batch_id:
        return {"mode": "skipped"}
    family = lshensemble_settings(settings)
    spec = spec_of(family)
    base_manifest = begin(store, LSHE)
    base = read_state(store)
    if not store.exists(COLUMN_TOKENS):
        return {"mode": "empty"}
    if base is None or base.spec != spec:
        if base is not None:
            log.warning("lshensemble spec changed: re-signing every column", extra={"was": base.spec.as_dict()})
        store.overwrite(LSHE_SIGNATURES, column_signatures(_tokens(store, settings, None), spec))
        state = _state(store, family, base=base, uppers=None, full=True, rebuild_batch=batch.batch_id)
        mode = "build"
    else:
        if batch.touched:
            fresh = (
                column_signatures(_tokens(store, settings, list(batch.added)), spec)
                if batch.added
                else SIGNATURES_SCHEMA.empty_table()
            )
            store.overwrite_where(LSHE_SIGNATURES, fresh, column="table_id", values=list(batch.touched))
        state = _state(store, family, base=base, uppers=np.asarray(base.uppers, np.int64), full=False, rebuild_batch=0)
        mode = "update"
    store.overwrite(LSHE_STATE, state.table())
    commit(store, LSHE, base_manifest, batch_id=batch.batch_id, kind=mode)
    log.info("lshensemble committed", extra={"mode": mode, **state.summary()})
    return {"mode": mode, **state.summary(), "rebuild_due": is_due(state, family)}


def rebuild(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    """The repartition: fresh bounds over the same signatures (a re-sign if the spec changed)."""
    store = LakeStore(settings.lake, spark)
    family = lshensemble_settings(settings)
    base_manifest = begin(store, LSHE)
    base = read_state(store)
    if base is None:
        return {"mode": "absent"}
    full = base.spec != spec_of(family)
    if full:
        store.overwrite(LSHE_SIGNATURES, column_signatures(_tokens(store, settings, None), spec_of(family)))
    state = _state(store, family, base=base, uppers=None, full=full, rebuild_batch=base_manifest.batch_id)
    store.overwrite(LSHE_STATE, state.table())
    commit(store, LSHE, base_manifest, batch_id=base_manifest.batch_id, kind="rebuild")
    log.info("lshensemble repartitioned", extra={"from_cost": round(base.cost, 3), **state.summary()})
    return {"mode": "rebuild", **state.summary()}


def rebuild_due(spark: SparkSession | None, settings: Settings) -> bool:
    return is_due(read_state(LakeStore(settings.lake, spark)), lshensemble_settings(settings))
