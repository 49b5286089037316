"""The PEXESO index as the catalog database holds it, loaded for online search (no Spark).

A load reads every embedded column's vectors and the facts, and maps the vectors with the recorded
pivots into the grid (`PexesoIndex`); a long-running process (the API) keeps the loaded index
between requests (`hold`) and loads again when a new index version is published. The query is
embedded by the embedder the index records (`embedder_for`): the configured sentence-transformers
model, or this build's n-gram embedder, refused when its name, version or dimension differ
(`EmbedderMismatchError`). With a memory budget (`partitions`), the columns are loaded a budget's
worth at a time instead, for a lake whose vectors do not fit.
"""

from __future__ import annotations

import base64
import json
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection, Engine, select

from catalog.core.embedding import Embedder
from catalog.core.errors import EmbedderMismatchError, UserError
from catalog.core.sentence_embedding import NAME_PREFIX
from catalog.search.family import published_facts
from catalog.search.pexeso.index import ColumnRef, EmbeddingSpec, IndexShape, PexesoIndex, pexeso_embedder
from catalog.search.pexeso.models import PexesoColumn, PexesoMeta
from catalog.search.pexeso.settings import PexesoSettings


@dataclass(frozen=True)
class LoadedIndex:
    version: str
    index: PexesoIndex


_HELD: weakref.WeakKeyDictionary[Engine, LoadedIndex] = weakref.WeakKeyDictionary()


def embedder_for(spec: EmbeddingSpec, conf: PexesoSettings) -> Embedder:
    """The embedder a query against an index of `spec` is embedded with: the configured model when
    `[index.pexeso] model_path` is set (or the index was built by a model), else this build's n-gram
    embedder at the index's dimension. Refused unless it makes vectors of `spec`: an index built with
    n-grams queried with a model configured, or the other way round, or a model changed since."""
    model = conf.model_path or spec.name.startswith(NAME_PREFIX)
    embedder = conf.embedder if model else pexeso_embedder(spec.dimension)
    if EmbeddingSpec.of(embedder) != spec:
        raise EmbedderMismatchError(spec, EmbeddingSpec.of(embedder))
    return embedder


def load_index(conn: Connection, *, hold: bool = False) -> LoadedIndex:
    """The catalog's PEXESO index (the process's copy when `hold` and still current). Its vectors
    are compared only with each other or with a query embedded by `embedder_for(index.spec, ...)`."""
    meta = published_facts(conn, PexesoMeta, "PEXESO")
    held = _HELD.get(conn.engine) if hold else None
    if held is not None and held.version == meta["index_version"]:
        return held
    frame = _Frame.of(meta)
    loaded = LoadedIndex(meta["index_version"], _load_columns(conn, frame))
    if hold:
        _HELD[conn.engine] = loaded
    return loaded


# What one loaded lake vector costs beyond its float32 vector: the sorted copy of the vector, its
# pivot coordinates (float64) and their sorted copy, its leaf key, column and value (a Python str).
_VECTOR_OVERHEAD = 160


@dataclass(frozen=True)
class Partitions:
    """The index in column-ref ranges that each fit a memory budget, loaded one at a time: a lake
    whose vectors do not fit in memory is searched partition by partition (PEXESO v2 §IV, where
    each partition has pivots of its own; here they share the published ones, so nothing is
    selected at search time). Every column lives in one partition, so a partition's counts are the
    column's exact counts."""

    version: str
    ranges: list[tuple[int, int]]  # first and last column_ref of each partition
    conn: Connection
    frame: _Frame

    @property
    def spec(self) -> EmbeddingSpec:
        return self.frame.spec

    def __iter__(self) -> Iterator[PexesoIndex]:
        for first, last in self.ranges:
            yield _load_columns(self.conn, self.frame, (first, last))


def partitions(conn: Connection, memory_budget_mb: float) -> Partitions:
    """The published index cut into consecutive column ranges of at most `memory_budget_mb` of
    loaded vectors each (estimated per vector); a column larger than the budget is a partition of
    its own (a column is never split: its count must be exact)."""
    if not memory_budget_mb > 0:
        raise UserError(f"the memory budget must be a positive number of MB, got {memory_budget_mb}")
    meta = published_facts(conn, PexesoMeta, "PEXESO")
    frame = _Frame.of(meta)
    per_vector = 8 * frame.spec.dimension + 16 * frame.shape.n_pivots + _VECTOR_OVERHEAD
    budget = max(1, int(memory_budget_mb * 2**20) // per_vector)  # vectors a partition may hold
    sizes = conn.execute(select(PexesoColumn.column_ref, PexesoColumn.n_values).order_by(PexesoColumn.column_ref))
    ranges: list[tuple[int, int]] = []
    held = 0
    for ref, n in sizes.tuples():
        if ranges and held + n <= budget:
            ranges[-1] = (ranges[-1][0], ref)
            held += n
        else:
            ranges.append((ref, ref))
            held = n
    return Partitions(meta["index_version"], ranges, conn, frame)


@dataclass(frozen=True)
class _Frame:
    """What every load of the index shares: the embedding, the grid's shape and the pivots."""

    spec: EmbeddingSpec
    shape: IndexShape
    pivots: np.ndarray

    @classmethod
    def of(cls, meta: dict[str, str]) -> _Frame:
        spec = EmbeddingSpec(**json.loads(meta["spec"]))
        shape = IndexShape(**json.loads(meta["shape"]))
        pivots = np.frombuffer(base64.b64decode(meta["pivots"]), "<f4").reshape(shape.n_pivots, spec.dimension)
        return cls(spec, shape, pivots)


def _load_columns(conn: Connection, frame: _Frame, refs: tuple[int, int] | None = None) -> PexesoIndex:
    """The index over the published columns (those with column_ref in `refs`, inclusive, when
    given), mapped with the recorded pivots."""
    statement = select(
        PexesoColumn.column_id,
        PexesoColumn.table_id,
        PexesoColumn.header,
        PexesoColumn.value_list,
        PexesoColumn.vectors,
    ).order_by(PexesoColumn.column_ref)
    if refs is not None:
        statement = statement.where(PexesoColumn.column_ref.between(*refs))
    rows = conn.execute(statement).all()
    dimension = frame.spec.dimension
    values: list[str] = []
    sizes = []
    for r in rows:
        column_values = json.loads(r[3])
        values.extend(column_values)
        sizes.append(len(column_values))
    blob = b"".join(r[4] for r in rows)
    vectors = np.frombuffer(blob, "<f4").reshape(-1, dimension) if blob else np.zeros((0, dimension), np.float32)
    if len(vectors) != len(values):
        raise UserError(f"the catalog's PEXESO index is inconsistent: {len(vectors)} vectors, {len(values)} values")
    value_array = np.empty(len(values), object)
    value_array[:] = values
    return PexesoIndex(
        spec=frame.spec,
        shape=frame.shape,
        pivots=frame.pivots,
        columns=[ColumnRef(r[0], r[1], r[2]) for r in rows],
        vectors=vectors,
        column_of=np.repeat(np.arange(len(rows), dtype=np.int64), sizes),
        values=value_array,
    )
