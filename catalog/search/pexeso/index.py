"""The PEXESO index (v2 §III, digest research §3): every lake vector with its column, its value and
its pivot mapping, sorted by leaf cell of the hierarchical grid and, inside a cell, by column, so that

* a grid cell's vectors are one contiguous run (the grid stores no vectors, only where runs start);
* the inverted index over leaf cells is the run of distinct columns inside each leaf ("postings"),
  and a (leaf, column) posting's vectors are again one run.

The index is independent of τ and T. It is immutable: `add` maps new columns' vectors with the
existing pivots into the same fixed-bound grid (v2's append), `delete` drops columns' vectors, and
both return a new index; `rebuild` re-selects the pivots from the vectors now held. Answers are exact
whatever the pivots; stale pivots only prune less.

Columns are sets of distinct non-empty values: only whether some lake vector lies within τ of a query
vector matters, so duplicates in a lake column change no answer (digest §1.3) and are dropped, and a
column with nothing to embed is not indexed (it can match nothing).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from catalog.core.embedding import CharNgramEmbedder, Embedder
from catalog.search.pexeso.grid import Grid, check_shape, leaf_keys
from catalog.search.pexeso.pivots import PivotMethod, map_to_pivots, select_pivots


def pexeso_embedder(dimension: int = 256) -> CharNgramEmbedder:
    """PEXESO's embedder: character 2-, 3- and 4-grams of the value's canonical form (case,
    punctuation, accents, date formats, doubled letters, common abbreviations and word order
    dropped: `catalog.core.canonical_text`), the paper's "expand abbreviations first, then embed".
    A configured instance of the shared model-free embedder under its own name, so union search's
    trigram vectors are untouched. Version 2 added the canonical form (version 1 only normalised
    case and punctuation): an index embedded by version 1 is re-embedded by the next update."""
    return CharNgramEmbedder(
        dimension=dimension, grams=(2, 3, 4), normalise=True, canonical=True, name="char-ngram-2-4", version=2
    )


PEXESO_EMBEDDER = pexeso_embedder()


@dataclass(frozen=True)
class EmbeddingSpec:
    """What made the vectors: an index and a query must agree on all three to be compared."""

    name: str
    version: int
    dimension: int

    @classmethod
    def of(cls, embedder: Embedder) -> EmbeddingSpec:
        return cls(embedder.name, embedder.version, embedder.dimension)

    def __str__(self) -> str:
        return f"{self.name} v{self.version} ({self.dimension} dims)"


@dataclass(frozen=True)
class ColumnRef:
    """A lake column as search results name it."""

    column_id: str
    table_id: str
    column: str


@dataclass(frozen=True)
class ColumnVectors:
    """One column's distinct values and their unit vectors (rows in the same order)."""

    ref: ColumnRef
    values: Sequence[str]
    vectors: np.ndarray


def embed_column(ref: ColumnRef, values: Sequence[str | None] | pa.Array, embedder: Embedder) -> ColumnVectors:
    """A column's distinct non-empty values, embedded (values with nothing to embed are dropped)."""
    array = values if isinstance(values, pa.Array) else pa.array(values, pa.string())
    distinct = pc.unique(pc.drop_null(pc.cast(array, pa.string())))
    vectors = embedder.embed(distinct)
    keep = np.flatnonzero(np.any(vectors != 0, axis=1))
    return ColumnVectors(ref, distinct.take(pa.array(keep)).to_pylist(), vectors[keep])


@dataclass(frozen=True)
class IndexShape:
    """The index's parameters: pivots wanted, grid levels (m), how pivots are chosen, the seed, and
    the memory budget (MB) its columns are partitioned under (`partitioning`; one index in memory
    does not use it)."""

    n_pivots: int = 5
    levels: int = 6
    pivot_method: PivotMethod = "pca"
    seed: int = 0
    memory_budget_mb: float = 4096.0

    def __post_init__(self) -> None:
        check_shape(self.n_pivots, self.levels)
        if self.n_pivots < 1:
            raise ValueError(f"n_pivots must be >= 1, got {self.n_pivots}")


class PexesoIndex:
    """Lake vectors, pivots, the hierarchical grid HG_RV and the inverted index over its leaf cells."""

    def __init__(
        self,
        *,
        spec: EmbeddingSpec,
        shape: IndexShape,
        pivots: np.ndarray,
        columns: Sequence[ColumnRef],
        vectors: np.ndarray,
        column_of: np.ndarray,
        values: np.ndarray,
        mapped: np.ndarray | None = None,
    ) -> None:
        if vectors.ndim != 2 or vectors.shape[1] != spec.dimension:
            raise ValueError(f"vectors must be (n, {spec.dimension}), got {vectors.shape}")
        if pivots.shape != (shape.n_pivots, spec.dimension):
            raise ValueError(f"pivots must be ({shape.n_pivots}, {spec.dimension}), got {pivots.shape}")
        self.spec, self.shape, self.pivots = spec, shape, pivots.astype(np.float32)
        self.columns = tuple(columns)
        mapped = map_to_pivots(vectors, self.pivots) if mapped is None else mapped
        keys = leaf_keys(mapped, shape.levels)
        order = np.lexsort((column_of, keys))
        self.vectors = np.ascontiguousarray(vectors[order], dtype=np.float32)
        self.column_of = column_of[order].astype(np.int64)
        self.values = values[order]
        self.mapped = mapped[order]
        self.keys = keys[order]
        self.grid = Grid.over(self.keys, self.mapped, shape.levels)
        # The inverted index: postings are the (leaf, column) runs; `leaf_postings[i]` is where leaf
        # cell i's postings begin, `posting_start[j]` where posting j's vectors begin.
        if len(self.keys):
            change = np.flatnonzero(
                np.diff(self.keys, prepend=np.int64(-1)) | np.diff(self.column_of, prepend=np.int64(-1))
            )
        else:
            change = np.zeros(0, np.int64)
        self.posting_column = self.column_of[change]
        self.posting_start = np.append(change, len(self.keys)).astype(np.int64)
        self.leaf_postings = np.searchsorted(change, self.grid.starts[shape.levels])

    @classmethod
    def build(
        cls, columns: Sequence[ColumnVectors], spec: EmbeddingSpec, shape: IndexShape = IndexShape()
    ) -> PexesoIndex:
        """The index of `columns`, pivots selected from their vectors."""
        refs, vectors, column_of, values = _stack(columns, spec, start=0)
        if not len(vectors):
            raise ValueError("an index needs at least one column with a value to embed")
        pivots = select_pivots(vectors, shape.n_pivots, method=shape.pivot_method, seed=shape.seed)
        return cls(
            spec=spec, shape=shape, pivots=pivots, columns=refs, vectors=vectors, column_of=column_of, values=values
        )

    def __len__(self) -> int:
        return len(self.vectors)

    @functools.cached_property
    def column_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(vector rows ordered by column, where each column's rows begin; one more: the end)."""
        order = np.argsort(self.column_of, kind="stable")
        return order, np.searchsorted(self.column_of[order], np.arange(len(self.columns) + 1))

    @functools.cached_property
    def squared_norms(self) -> np.ndarray:
        """Each vector's squared norm in float32 (as a float32 product computes it), for distances
        from dot products: computed once, not on every verification's gathered rows."""
        return np.einsum("ij,ij->i", self.vectors, self.vectors)

    @functools.cached_property
    def mapped_by_pivot(self) -> np.ndarray:
        """The pivot coordinates as one contiguous row per pivot: a filter that tests one pivot at a
        time reads one array, not a stride of the (vectors, pivots) matrix."""
        return np.ascontiguousarray(self.mapped.T)

    def add(self, columns: Sequence[ColumnVectors]) -> PexesoIndex:
        """This index with `columns` added, mapped with the existing pivots (an id already held is
        refused: delete it first)."""
        held = {c.column_id for c in self.columns}
        clash = sorted(c.ref.column_id for c in columns if c.ref.column_id in held)
        if clash:
            raise ValueError(f"columns already indexed: {clash[:5]}")
        refs, vectors, column_of, values = _stack(columns, self.spec, start=len(self.columns))
        return PexesoIndex(
            spec=self.spec,
            shape=self.shape,
            pivots=self.pivots,
            columns=self.columns + tuple(refs),
            vectors=np.concatenate([self.vectors, vectors]),
            column_of=np.concatenate([self.column_of, column_of]),
            values=np.concatenate([self.values, values]),
            mapped=np.concatenate([self.mapped, map_to_pivots(vectors, self.pivots)]),
        )

    def delete(self, column_ids: Sequence[str]) -> PexesoIndex:
        """This index without the columns named (ids it does not hold are ignored)."""
        gone = set(column_ids)
        keep_column = np.array([c.column_id not in gone for c in self.columns], bool)
        renumber = np.cumsum(keep_column) - 1
        keep = keep_column[self.column_of] if len(self.column_of) else np.zeros(0, bool)
        return PexesoIndex(
            spec=self.spec,
            shape=self.shape,
            pivots=self.pivots,
            columns=[c for c, k in zip(self.columns, keep_column, strict=True) if k],
            vectors=self.vectors[keep],
            column_of=renumber[self.column_of[keep]],
            values=self.values[keep],
            mapped=self.mapped[keep],
        )

    def rebuild(self, shape: IndexShape | None = None) -> PexesoIndex:
        """The same vectors under pivots selected afresh (and `shape`'s grid, when given)."""
        shape = shape or self.shape
        if not len(self.vectors):
            raise ValueError("an index needs at least one column with a value to embed")
        pivots = select_pivots(self.vectors, shape.n_pivots, method=shape.pivot_method, seed=shape.seed)
        return PexesoIndex(
            spec=self.spec,
            shape=shape,
            pivots=pivots,
            columns=self.columns,
            vectors=self.vectors,
            column_of=self.column_of,
            values=self.values,
        )


def _stack(
    columns: Sequence[ColumnVectors], spec: EmbeddingSpec, *, start: int
) -> tuple[list[ColumnRef], np.ndarray, np.ndarray, np.ndarray]:
    """The non-empty columns' refs and their vectors, column numbers (from `start`) and values."""
    refs: list[ColumnRef] = []
    blocks: list[np.ndarray] = []
    owners: list[np.ndarray] = []
    values: list[str] = []
    for col in columns:
        if col.vectors.ndim != 2 or col.vectors.shape[1] != spec.dimension or len(col.vectors) != len(col.values):
            raise ValueError(
                f"column {col.ref.column_id}: {len(col.values)} values need ({len(col.values)}, "
                f"{spec.dimension}) vectors, got {col.vectors.shape}"
            )
        if not len(col.vectors):
            continue
        blocks.append(col.vectors.astype(np.float32))
        owners.append(np.full(len(col.vectors), start + len(refs), np.int64))
        values.extend(col.values)
        refs.append(col.ref)
    if not blocks:
        return refs, np.zeros((0, spec.dimension), np.float32), np.zeros(0, np.int64), np.zeros(0, object)
    out_values = np.empty(len(values), object)
    out_values[:] = values
    return refs, np.concatenate(blocks), np.concatenate(owners), out_values
