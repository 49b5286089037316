"""The PEXESO index as the catalog database holds it, loaded for online search (no Spark).

A load reads every embedded column's vectors and the facts, and maps the vectors with the recorded
pivots into the grid (`PexesoIndex`); a long-running process (the API) keeps the loaded index
between requests (`hold`) and loads again when a new index version is published. The query is
embedded by the embedder the index records (`embedder_for`): the configured sentence-transformers
model, or this build's n-gram embedder, refused when its name, version or dimension differ
(`EmbedderMismatchError`). With a memory budget (`partitions`), the columns are loaded a budget's
worth at a time instead, partition by partition, for a lake whose vectors do not fit; a query skips
the partitions out of its reach.
"""

from __future__ import annotations

import base64
import itertools
import json
import weakref
from dataclasses import dataclass

import numpy as np
from sqlalchemy import ColumnElement, Connection, Engine, select

from catalog.core.embedding import Embedder
from catalog.core.errors import EmbedderMismatchError, UserError
from catalog.core.sentence_embedding import NAME_PREFIX
from catalog.search.family import published_facts
from catalog.search.pexeso.index import ColumnRef, EmbeddingSpec, IndexShape, PexesoIndex, pexeso_embedder
from catalog.search.pexeso.models import PexesoColumn, PexesoMeta, PexesoPartition
from catalog.search.pexeso.partitioning import pack_in_order, reachable
from catalog.search.pexeso.pivots import map_to_pivots
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
    frame = IndexFrame.of(meta)
    loaded = LoadedIndex(meta["index_version"], _load_columns(conn, frame))
    if hold:
        _HELD[conn.engine] = loaded
    return loaded


# What one loaded lake vector costs beyond its float32 vector: the sorted copy of the vector, its
# pivot coordinates (float64) and their sorted copy, its leaf key, column and value (a Python str).
_VECTOR_OVERHEAD = 160


def budget_vectors(memory_budget_mb: float, spec: EmbeddingSpec, shape: IndexShape) -> int:
    """The lake vectors a budget of `memory_budget_mb` holds once loaded, mapped and gridded."""
    if not memory_budget_mb > 0:
        raise UserError(f"the memory budget must be a positive number of MB, got {memory_budget_mb}")
    per_vector = 8 * spec.dimension + 16 * shape.n_pivots + _VECTOR_OVERHEAD
    return max(1, int(memory_budget_mb * 2**20) // per_vector)


@dataclass(frozen=True)
class Load:
    """Whole columns loaded together: for each partition it touches, the column_ref range of its
    columns in the load (None: a catalog not partitioned yet, cut by column_ref alone)."""

    ranges: tuple[tuple[int | None, int, int], ...]  # (partition, first ref, last ref)


@dataclass(frozen=True)
class SearchPlan:
    """What a query loads: the loads (each within the budget), and how many partitions it skips
    because no query vector comes within τ of their box (`partitioning.reachable`)."""

    loads: list[Load]
    n_partitions: int
    n_skipped: int


@dataclass(frozen=True)
class Partitions:
    """The published index as its partitions (JSD clustering, `partitioning`), loaded a budget's
    worth of whole columns at a time: a lake whose vectors do not fit in memory is searched
    partition by partition (PEXESO v2 §IV, where each partition has pivots of its own; here they
    share the published ones, so an added column is mapped as before). A query skips the partitions
    its vectors cannot reach, loads the others in `(partition, column_ref)` order packed into
    loads of at most `capacity` vectors (a partition larger than that is cut, never a column).
    Every column is searched in one load, so its count there is exact."""

    version: str
    capacity: int  # vectors a load may hold
    refs: np.ndarray  # every column's column_ref, in (partition, column_ref) order
    partition_of: np.ndarray  # its partition (-1: none recorded)
    sizes: np.ndarray  # its vectors
    low: np.ndarray  # (partitions, |P|) box of each partition's pivot mappings, by partition id
    high: np.ndarray
    conn: Connection
    frame: IndexFrame

    @property
    def spec(self) -> EmbeddingSpec:
        return self.frame.spec

    def plan(self, query_vectors: np.ndarray, tau: float) -> SearchPlan:
        """The loads a query needs at `tau` (partitions out of its reach skipped)."""
        q_mapped = map_to_pivots(query_vectors, self.frame.pivots)
        live = reachable(q_mapped, self.low, self.high, 2.0 * tau) if len(self.low) else np.zeros(0, bool)
        known = self.partition_of >= 0
        keep = ~known
        keep[known] = live[self.partition_of[known]]
        present = np.unique(self.partition_of[known])
        return SearchPlan(self._pack(keep), len(present), int((~live[present]).sum()))

    def with_capacity(self, capacity: int) -> list[Load]:
        """Every column in loads of at most `capacity` vectors (no partition skipped)."""
        return self._pack(np.ones(len(self.refs), bool), capacity)

    def _pack(self, keep: np.ndarray, capacity: int | None = None) -> list[Load]:
        """The kept columns in loads of at most `capacity` vectors: whole partitions packed in
        order while they fit, a partition larger than a load cut into column ranges of its own."""
        capacity = self.capacity if capacity is None else capacity
        refs, parts, sizes = self.refs[keep], self.partition_of[keep], self.sizes[keep]
        if not len(refs):  # no column (a lake with nothing textual), or every partition skipped
            return []
        starts = np.flatnonzero(np.diff(parts, prepend=np.int64(-2)))
        units: list[tuple[int | None, int, int]] = []  # (partition, first ref, last ref): a unit
        unit_sizes: list[int] = []
        for lo, hi in zip(starts.tolist(), np.append(starts[1:], len(parts)).tolist(), strict=True):
            partition = None if parts[lo] < 0 else int(parts[lo])
            pieces = pack_in_order(sizes[lo:hi], capacity)
            cuts = np.flatnonzero(np.diff(pieces, prepend=np.int64(-1))) + lo
            for first, end in zip(cuts.tolist(), np.append(cuts[1:], hi).tolist(), strict=True):
                units.append((partition, int(refs[first]), int(refs[end - 1])))
                unit_sizes.append(int(sizes[first:end].sum()))
        groups = pack_in_order(np.array(unit_sizes, np.int64), capacity)
        bounds = [*np.flatnonzero(np.diff(groups, prepend=np.int64(-1))).tolist(), len(units)]
        return [Load(tuple(units[lo:hi])) for lo, hi in itertools.pairwise(bounds)]

    def load(self, load: Load) -> PexesoIndex:
        """The index over one load's columns, mapped with the published pivots."""
        return _load_columns(self.conn, self.frame, load)


def fits(conn: Connection, memory_budget_mb: float) -> bool:
    """Whether the whole published index, loaded, fits `memory_budget_mb`."""
    meta = published_facts(conn, PexesoMeta, "PEXESO")
    frame = IndexFrame.of(meta)
    return int(meta.get("n_vectors", "0")) <= budget_vectors(memory_budget_mb, frame.spec, frame.shape)


def partitions(conn: Connection, memory_budget_mb: float) -> Partitions:
    """The published index's partitions, to be loaded at most `memory_budget_mb` of vectors at a
    time (estimated per vector; a column larger than the budget is loaded alone: a column is never
    split, its count must be exact)."""
    meta = published_facts(conn, PexesoMeta, "PEXESO")
    frame = IndexFrame.of(meta)
    capacity = budget_vectors(memory_budget_mb, frame.spec, frame.shape)
    rows = conn.execute(select(PexesoColumn.column_ref, PexesoColumn.partition, PexesoColumn.n_values)).all()
    table = np.array([(r[0], -1 if r[1] is None else r[1], r[2]) for r in rows], np.int64).reshape(-1, 3)
    order = np.lexsort((table[:, 0], table[:, 1]))
    low, high = partition_boxes(conn, frame.shape.n_pivots)
    return Partitions(
        meta["index_version"],
        capacity,
        table[order, 0],
        table[order, 1],
        table[order, 2],
        low,
        high,
        conn,
        frame,
    )


def partition_boxes(conn: Connection, n_pivots: int) -> tuple[np.ndarray, np.ndarray]:
    """(partitions, |P|) low and high corners of every published partition's box, by partition id
    (an id with no row: an empty box, never reachable)."""
    rows = conn.execute(select(PexesoPartition.partition, PexesoPartition.low, PexesoPartition.high)).all()
    k = max((r[0] for r in rows), default=-1) + 1
    low, high = np.full((k, n_pivots), np.inf), np.full((k, n_pivots), -np.inf)
    for p, lo, hi in rows:
        low[p], high[p] = np.frombuffer(lo, "<f8"), np.frombuffer(hi, "<f8")
    return low, high


@dataclass(frozen=True)
class IndexFrame:
    """What every load of the index shares: the embedding, the grid's shape and the pivots."""

    spec: EmbeddingSpec
    shape: IndexShape
    pivots: np.ndarray

    @classmethod
    def of(cls, meta: dict[str, str]) -> IndexFrame:
        spec = EmbeddingSpec(**json.loads(meta["spec"]))
        shape = IndexShape(**json.loads(meta["shape"]))
        pivots = np.frombuffer(base64.b64decode(meta["pivots"]), "<f4").reshape(shape.n_pivots, spec.dimension)
        return cls(spec, shape, pivots)


def _load_columns(conn: Connection, frame: IndexFrame, load: Load | None = None) -> PexesoIndex:
    """The index over the published columns (those of `load`, when given), mapped with the
    recorded pivots."""
    statement = select(
        PexesoColumn.column_id,
        PexesoColumn.table_id,
        PexesoColumn.header,
        PexesoColumn.value_list,
        PexesoColumn.vectors,
    ).order_by(PexesoColumn.column_ref)
    if load is None:
        rows = conn.execute(statement).all()
    else:  # one SELECT a range: each an index range scan, none sorting blobs to merge them
        rows = [row for r in load.ranges for row in conn.execute(statement.where(range_condition(*r)))]
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


def range_condition(partition: int | None, first: int, last: int) -> ColumnElement[bool]:
    """The columns of one (partition, first ref, last ref) range of a `Load`."""
    where = PexesoColumn.column_ref.between(first, last)
    return where & (PexesoColumn.partition.is_(None) if partition is None else PexesoColumn.partition == partition)
