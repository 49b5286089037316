"""The PEXESO index in the lake: embedding, pivots, and incremental ADD/DELETE per change batch.

The textual columns (`column_profiles.inferred_type` in `[index.pexeso] types`) of a batch's added
tables are embedded from silver `column_tokens`: the tokens are grouped by column (one shuffle) and
each column is embedded in one vectorised numpy pass on an executor (`embed_column_tokens`,
`applyInArrow`), its vectors packed as the catalog stores them. A column whose tokens have nothing
to embed is left out (it can match nothing). A column is held in as many rows as it takes to keep
each under `ROW_BYTES` of vectors: Spark reads, shuffles and writes a row whole, and the parquet
writer checks its buffer only every hundred rows, so the single rows of the seed's 50,000-value
columns (50 MB each) ran a 15% batch's rewrite out of a 4 GB heap. Readers take a column's rows
together (`column_rows` in the publisher).

Pivots are selected on the driver from a sample of the embedded columns when the index is built
(or the embedder changes), and kept by every later update: a batch's new vectors are mapped with
the existing pivots into the existing fixed-bound grid when the index is loaded, and answers stay
exact whatever the pivots. The state counts the vectors added or deleted since the selection; once
they reach `repivot_share` of the vectors then held, `rebuild_due` says so and `rebuild` re-selects
the pivots (the vectors are not touched), through the one commit point.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.pandas.types import from_arrow_schema
from sqlalchemy import inspect

from catalog.core.embedding import Embedder
from catalog.core.identity import table_bucket
from catalog.core.settings import Settings
from catalog.db.engine import open_catalog
from catalog.search.pexeso.index import EmbeddingSpec, IndexShape
from catalog.search.pexeso.models import PexesoMeta
from catalog.search.pexeso.pivots import select_pivots
from catalog.search.pexeso.repartition import partition_fact, repartition_due
from catalog.search.pexeso.settings import pexeso_settings
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.commit_point import applied_batch, batch_store, begin, commit
from spark_jobs.lake.store import LakeStore
from spark_jobs.pexeso.tables import PEXESO, PEXESO_STATE, PEXESO_VECTORS, VECTORS_SCHEMA, PexesoState
from spark_jobs.profile.profiles import COLUMN_PROFILES
from spark_jobs.profile.tokens import COLUMN_TOKENS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

_PIVOT_SAMPLE_COLUMNS = 512  # rows (columns or parts of one) whose vectors the driver selects pivots from
# Packed vectors per row of pexeso_vectors, at most (a single value's may exceed it). Spark's Parquet
# reader fills a batch of up to 4,096 rows: at 1 MiB rows a second 15% batch on the seed ran the
# 4 GB driver out of heap reading them; 64 KiB bounds such a batch to 256 MB.
ROW_BYTES = 1 << 16


def values_per_row(dimension: int) -> int:
    """How many values' vectors one row of `pexeso_vectors` holds (`ROW_BYTES` of float32)."""
    return max(1, ROW_BYTES // (4 * dimension))


def embed_column_tokens(embedder: Embedder, tokens: pa.Table, per_row: int) -> pa.Table:
    """One column's token rows (table_id, bucket, column_id, header, token) -> its VECTORS_SCHEMA
    rows: the distinct tokens with something to embed and their vectors packed, `per_row` values
    to a row (none: no row)."""
    values = pc.unique(pc.drop_null(tokens.column("token").combine_chunks()))
    vectors = embedder.embed(values)
    keep = np.flatnonzero(np.any(vectors != 0, axis=1))
    if not len(keep):
        return VECTORS_SCHEMA.empty_table()
    kept, packed = values.take(pa.array(keep)), vectors[keep].astype("<f4")
    starts = np.arange(0, len(keep), per_row)
    first = tokens.slice(0, 1)
    return pa.table(
        {
            **{c: pa.repeat(first.column(c)[0], len(starts)) for c in ("table_id", "bucket", "column_id", "header")},
            "n_values": pa.array(np.diff(np.append(starts, len(keep))), pa.int64()),
            "values": pa.ListArray.from_arrays(pa.array(np.append(starts, len(keep)), pa.int32()), kept),
            "vectors": pa.array([packed[s : s + per_row].tobytes() for s in starts], pa.binary()),
        },
        schema=VECTORS_SCHEMA,
    )


def _embedder_fn(embedder: Embedder, per_row: int) -> Callable[[pa.Table], pa.Table]:
    """`embed_column_tokens` bound to the embedder, with the type hints applyInArrow reads."""

    def embed(tokens: pa.Table) -> pa.Table:
        return embed_column_tokens(embedder, tokens, per_row)

    return embed


def vector_frame(store: LakeStore, settings: Settings, table_ids: list[str] | None) -> DataFrame:
    """VECTORS_SCHEMA rows of the textual columns of these tables (all when None)."""
    conf = pexeso_settings(settings)
    where: dict[str, list[Any]] | None = None
    if table_ids is not None:
        buckets = sorted({table_bucket(t, settings.index.cells_buckets) for t in table_ids})
        where = {"bucket": buckets, "table_id": table_ids}
    profiles = store.read(COLUMN_PROFILES, columns=["table_id", "column_id", "header", "inferred_type"], where=where)
    textual = profiles.where(F.col("inferred_type").isin(*conf.types)).select("table_id", "column_id", "header")
    tokens = store.read(COLUMN_TOKENS, columns=["table_id", "bucket", "column_id", "token"], where=where)
    joined = tokens.join(textual, ["table_id", "column_id"]).select(
        "table_id", "bucket", "column_id", "header", "token"
    )
    embed = _embedder_fn(conf.embedder, values_per_row(conf.embedder.dimension))
    return joined.groupBy("column_id").applyInArrow(embed, from_arrow_schema(VECTORS_SCHEMA))


def read_state(store: LakeStore) -> PexesoState | None:
    row = store.one_row(PEXESO_STATE)
    return PexesoState.from_row(row) if row else None


def _pivots(store: LakeStore, spec: EmbeddingSpec, shape: IndexShape) -> np.ndarray:
    """Pivots selected from a sample of the embedded columns (random unit vectors for an empty lake)."""
    frame = store.read(PEXESO_VECTORS, columns=["vectors"])
    n = frame.count()
    if n:
        sample = frame.sample(fraction=min(1.0, 2.0 * _PIVOT_SAMPLE_COLUMNS / n), seed=shape.seed)
        blobs = [r["vectors"] for r in sample.limit(_PIVOT_SAMPLE_COLUMNS).collect()] or [
            r["vectors"] for r in frame.limit(1).collect()
        ]
        vectors = np.frombuffer(b"".join(blobs), "<f4").reshape(-1, spec.dimension)
        return select_pivots(vectors, shape.n_pivots, method=shape.pivot_method, seed=shape.seed)
    rng = np.random.default_rng(shape.seed)
    m = rng.standard_normal((shape.n_pivots, spec.dimension))
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def _counts(store: LakeStore, where: dict[str, list[Any]] | None = None) -> tuple[int, int]:
    """(columns, vectors) held (in the tables `where` names)."""
    if not store.exists(PEXESO_VECTORS):
        return 0, 0
    t = store.read_arrow(PEXESO_VECTORS, columns=["column_id", "n_values"], where=where)
    return pc.count_distinct(t.column("column_id")).as_py(), int(pc.sum(t.column("n_values")).as_py() or 0)


def _write_all(store: LakeStore, settings: Settings) -> None:
    store.overwrite(PEXESO_VECTORS, vector_frame(store, settings, None), partition_by=["bucket"])


def _write_batch(store: LakeStore, settings: Settings, batch: ChangeBatch) -> int:
    """Replace the touched tables' rows by the added tables'; returns the vectors deleted plus added."""
    touched = sorted(batch.touched)
    buckets = sorted({table_bucket(t, settings.index.cells_buckets) for t in touched})
    _, before = _counts(store, {"bucket": buckets, "table_id": touched})
    frame = vector_frame(store, settings, sorted(batch.added)) if batch.added else VECTORS_SCHEMA.empty_table()
    store.overwrite_where(
        PEXESO_VECTORS,
        frame,
        column="table_id",
        values=touched,
        partitions={"bucket": buckets},
        partition_by=["bucket"],
    )
    _, after = _counts(store, {"bucket": buckets, "table_id": touched})
    return before + after


def _commit_state(
    store: LakeStore,
    base: PexesoState | None,
    spec: EmbeddingSpec,
    shape: IndexShape,
    pivots: np.ndarray,
    *,
    full: bool,
    changed: int | None,
) -> PexesoState:
    """The next state; `changed` None: the pivots were just selected."""
    version = base.index_version if base else 0
    n_columns, n_vectors = _counts(store)
    state = PexesoState(
        index_version=version + 1,
        base_version=version,
        full=full,
        spec=spec,
        shape=shape,
        pivots=pivots,
        n_columns=n_columns,
        n_vectors=n_vectors,
        n_vectors_at_pivots=n_vectors if changed is None or base is None else base.n_vectors_at_pivots,
        n_changed=0 if changed is None or base is None else base.n_changed + changed,
    )
    store.overwrite(PEXESO_STATE, state.table())
    return state


# ---------------------------------------------------------------------- the stage
def run(spark: SparkSession, settings: Settings, batch: ChangeBatch) -> dict[str, Any]:
    """Apply `batch` (a first build when there is no index, a re-embedding after an embedder change)."""
    store = batch_store(settings.lake, spark, batch.batch_id)
    if applied_batch(store, PEXESO) >= batch.batch_id:
        return {"mode": "skipped"}
    conf = pexeso_settings(settings)
    spec, shape = EmbeddingSpec.of(conf.embedder), conf.shape
    base_manifest = begin(store, PEXESO)
    base = read_state(store)
    if not store.exists(COLUMN_TOKENS) or not store.exists(COLUMN_PROFILES):
        return {"mode": "empty"}
    if base is None or base.spec != spec:
        if base is not None:
            log.warning("pexeso embedder changed: re-embedding every column", extra={"was": str(base.spec)})
        _write_all(store, settings)
        state = _commit_state(store, base, spec, shape, _pivots(store, spec, shape), full=True, changed=None)
        mode = "build"
    else:
        changed = _write_batch(store, settings, batch) if batch.touched else 0
        state = _commit_state(store, base, spec, base.shape, base.pivots, full=False, changed=changed)
        mode = "update"
    commit(store, PEXESO, base_manifest, batch_id=batch.batch_id, kind=mode)
    log.info("pexeso committed", extra={"mode": mode, **state.summary()})
    return {"mode": mode, **state.summary()}


def rebuild(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    """Re-select the pivots (and take the configured shape) from the vectors now held."""
    store = LakeStore(settings.lake, spark)
    conf = pexeso_settings(settings)
    base_manifest = begin(store, PEXESO)
    base = read_state(store)
    if base is None:
        return {"mode": "absent"}
    spec = EmbeddingSpec.of(conf.embedder)
    if base.spec != spec:
        _write_all(store, settings)
    pivots = _pivots(store, spec, conf.shape)
    state = _commit_state(store, base, spec, conf.shape, pivots, full=base.spec != spec, changed=None)
    commit(store, PEXESO, base_manifest, batch_id=base_manifest.batch_id, kind="rebuild")
    return {"mode": "rebuild", **state.summary()}


def rebuild_due(spark: SparkSession | None, settings: Settings) -> bool:
    """The embedder or shape (with the memory budget) changed, enough vectors changed since the
    pivots were selected, or the published partitions' quality fell by `repartition_share` since
    they were clustered (the publisher records it in the catalog; a rebuild re-partitions)."""
    state = read_state(LakeStore(settings.lake, spark))
    if state is None:
        return False
    conf = pexeso_settings(settings)
    if state.spec != EmbeddingSpec.of(conf.embedder) or state.shape != conf.shape:
        return True
    if state.n_changed >= conf.repivot_share * max(1, state.n_vectors_at_pivots):
        return True
    return repartition_due(_published_partitions(settings), conf.repartition_share)


def _published_partitions(settings: Settings) -> dict[str, Any]:
    """The catalog's record of its PEXESO partitions (empty when it has none)."""
    engine = open_catalog(settings.catalog_url)
    try:
        with engine.connect() as conn:
            return partition_fact(conn) if inspect(conn).has_table(PexesoMeta.__tablename__) else {}
    finally:
        engine.dispose()
