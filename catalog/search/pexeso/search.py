"""Joinable-column search in embedding space, exact (PEXESO v2 Def. 2; digest research §1–§2).

The problem, with every boundary fixed:

* a query value q *matches* a lake vector x iff `distance(q, x) <= 2·tau`, τ given as a fraction of
  the largest distance between unit vectors (2), and `distance` is `distance_rows`: the float64
  Euclidean norm of the difference of the two float32 vectors. Both methods decide every pair that
  is not clear by a wide margin with that one function, so "exactly at τ" means the same to both;
* |Q| counts the query's non-empty values *with duplicates* (two equal values may be two entities);
  a value with nothing to embed (empty, or only punctuation) is dropped before counting;
* a column's `n_matched` is the number of query values (duplicates counted) matching at least one of
  its vectors; it is joinable iff `n_matched >= need = ceil(T·|Q| − 1e-9)` (the tolerance keeps
  T = 0.6 of 5 values at 3, not 4, whatever the float rounding of 0.6·5).

`--method pexeso` maps the distinct query vectors with the index's pivots, builds their grid HG_Q,
blocks it against HG_RV level by level with Lemmas 4 and 6 (cell–cell filter and match), then
Lemmas 3 and 5 per query vector at the leaves, and verifies the candidate (query vector, leaf cell)
pairs through the inverted index: Lemma 1 drops a lake vector by its pivot coordinates, Lemma 2
accepts it, anything left gets its true distance. Query vectors are verified in chunks; after each,
Lemma 7 drops columns that could no longer reach `need` even if every remaining query value matched.
Columns that reach `need` are still verified to the end, so `n_matched` is exact. When blocking
leaves most pairs as candidates (`DENSE_SHARE`), verification computes every distance instead.
The filters are widened, and the matching lemmas narrowed, by `_EPS` — far above float64's rounding
of the pivot distances, far below any useful τ — so rounding can neither drop nor invent a match.
`--method brute` computes every pairwise distance, chunked, and needs no index structure at all.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from catalog.core.embedding import Embedder
from catalog.core.errors import EmbedderMismatchError, UserError
from catalog.search.pexeso.grid import EXTENT, Grid, expand, leaf_keys
from catalog.search.pexeso.index import EmbeddingSpec, PexesoIndex
from catalog.search.pexeso.pivots import map_to_pivots

Method = Literal["pexeso", "brute"]
_EPS = 1e-7  # pivot-space safety margin (float64 rounding of a distance on unit vectors is ~1e-16)
_BRUTE_MARGIN = 1e-3  # float32 matrix-product squared distances are off by < 1e-4 on unit vectors
_QUERY_CHUNK = 256  # distinct query vectors verified between two Lemma-7 prunings
_BRUTE_CELLS = 1 << 23  # query × lake distances computed in one numpy pass by brute force
_PAIRS_VERIFIED = 1 << 18  # candidate pairs verified in one numpy pass
N_EXAMPLES = 3
# Lake vectors a pivot keeps this much beyond τ from a matched query value cannot be its example: a
# float32 squared distance is off by < 1e-4, and (τ + 0.01)² − τ² >= 1e-4 at every τ.
_EXAMPLE_MARGIN = 0.01
_EXAMPLE_COMBINATIONS = 1 << 20  # (example, column vector) pairs weighed at once
# When blocking leaves more than this share of all (query, lake) pairs as candidates, verification
# computes every distance by matrix products instead (brute force's rule: the same answers). Pivots
# prune little when the vectors' intrinsic dimension is high: hashed character n-grams put nearly
# every value at distance ~sqrt(2) from every pivot (docs/algorithms/pexeso.md, "Performance").
DENSE_SHARE = 0.25


class EmptyQueryError(UserError):
    """A query with no value to embed: its joinability with anything would be 0/0."""

    def __init__(self) -> None:
        super().__init__("the query has no non-empty value to search with")


@dataclass(frozen=True)
class Query:
    """Distinct query values (non-empty, embeddable), their unit vectors and multiplicities."""

    values: tuple[str, ...]
    vectors: np.ndarray
    weights: np.ndarray
    spec: EmbeddingSpec

    @classmethod
    def embed(cls, values: Sequence[str | None] | pa.Array, embedder: Embedder) -> Query:
        """The query column `values` (duplicates kept as multiplicities; nulls and values with
        nothing to embed dropped) embedded by `embedder`."""
        array = values if isinstance(values, pa.Array) else pa.array(values, pa.string())
        counts = pc.value_counts(pc.drop_null(pc.cast(array, pa.string())))
        distinct = counts.field("values")
        vectors = embedder.embed(distinct)
        keep = np.flatnonzero(np.any(vectors != 0, axis=1))
        weights = counts.field("counts").to_numpy().astype(np.int64)[keep]
        if not len(keep):
            raise EmptyQueryError()
        return cls(tuple(distinct.take(pa.array(keep)).to_pylist()), vectors[keep], weights, EmbeddingSpec.of(embedder))

    @property
    def size(self) -> int:
        """|Q|: the query's values, duplicates counted."""
        return int(self.weights.sum())


@dataclass(frozen=True)
class Example:
    """A matched query value and the nearest value of the result column."""

    query_value: str
    lake_value: str
    distance: float


@dataclass(frozen=True)
class SemanticMatch:
    """One joinable column: `joinability` = n_matched / |Q|, exact for the embedding and thresholds."""

    table_id: str
    column: str
    column_id: str
    joinability: float
    n_matched: int
    examples: tuple[Example, ...] = field(default=())
    exact: bool = True

    def as_dict(self) -> dict[str, object]:
        return {
            "table_id": self.table_id,
            "column": self.column,
            "column_id": self.column_id,
            "joinability": self.joinability,
            "n_matched": self.n_matched,
            "examples": [
                {"query_value": e.query_value, "lake_value": e.lake_value, "distance": e.distance}
                for e in self.examples
            ],
            "exact": self.exact,
        }


def distance_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The distance of every row of `a` to the same row of `b`: the one definition both methods
    decide close pairs by (float64 difference, squared, summed along each contiguous row)."""
    diff = a.astype(np.float64) - b.astype(np.float64)
    out: np.ndarray = np.sqrt((diff * diff).sum(axis=1))
    return out


def need_count(threshold: float, size: int) -> int:
    """Query values a column must match to be joinable: ceil(T·|Q|), decimal fractions taken at their word."""
    return max(0, math.ceil(threshold * size - 1e-9))


def search(
    index: PexesoIndex,
    query: Query,
    *,
    tau: float = 0.06,
    threshold: float = 0.6,
    k: int | None = None,
    method: Method = "pexeso",
) -> list[SemanticMatch]:
    """The index's columns joinable with `query` (`threshold` is the paper's T), best first
    (joinability, then table and column id); at most `k` when given."""
    if query.spec != index.spec:
        raise EmbedderMismatchError(index.spec, query.spec)
    if not 0.0 <= tau <= 1.0:
        raise UserError(f"tau must be in [0, 1] (a fraction of the largest distance, 2), got {tau}")
    if not 0.0 < threshold <= 1.0:
        raise UserError(f"threshold T must be in (0, 1] (a fraction of the query's values), got {threshold}")
    if k is not None and k < 1:
        raise UserError(f"k must be >= 1, got {k}")
    if method not in ("pexeso", "brute"):
        raise UserError(f"method must be pexeso or brute, got {method!r}")
    need = need_count(threshold, query.size)
    radius = 2.0 * tau
    hits = _hits_pexeso(index, query, radius, need) if method == "pexeso" else _hits_brute(index, query, radius)
    return _results(index, query, hits, need, radius, k)


def search_partitions(
    parts: Iterable[PexesoIndex],
    query: Query,
    *,
    tau: float = 0.06,
    threshold: float = 0.6,
    k: int | None = None,
    method: Method = "pexeso",
) -> list[SemanticMatch]:
    """`search` over an index held as partitions that each hold whole columns (`source.partitions`),
    searched one after another: a column's count is complete in its own partition, so the merged
    answers, in `search`'s order, are the answers of the whole index."""
    found = [m for index in parts for m in search(index, query, tau=tau, threshold=threshold, k=k, method=method)]
    found.sort(key=lambda m: (-m.n_matched, m.table_id, m.column_id))
    return found if k is None else found[:k]


def _hits_brute(index: PexesoIndex, query: Query, radius: float) -> np.ndarray:
    """Unique (query vector, column) codes of every matching pair, from all pairwise distances."""
    n_columns = max(1, len(index.columns))
    codes = [
        np.unique(qs.astype(np.int64) * n_columns + index.column_of[xs])
        for qs, xs in close_pairs(query.vectors, index.vectors, radius)
    ]
    return np.unique(np.concatenate(codes)) if codes else np.zeros(0, np.int64)


def close_pairs(
    a: np.ndarray, b: np.ndarray, radius: float, *, cells: int = _BRUTE_CELLS
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every pair (i, j) with `distance(a[i], b[j]) <= radius`, as (rows of a, rows of b), one
    block of `b` at a time: brute force's rule (float32 matrix products decide the pairs clear by a
    wide margin, `distance_rows` the ones near τ), which the precomputed lists share.

    A pair within reach has a dot product of at least half of (the smallest squared norms of both
    sides less r² and the margin): one comparison over the block keeps those, and the squared
    distances are formed for them alone (at small τ, a tiny share of the block), as the same
    float32 expression, so the decisions are those of the whole-block arithmetic."""
    a32 = a.astype(np.float32)
    a_sq = (a32 * a32).sum(1)
    if not len(a_sq):
        return
    r2 = radius * radius
    step = max(1, cells // len(a32))
    for start in range(0, len(b), step):
        x = b[start : start + step]
        x_sq = (x * x).sum(1)
        g = a32 @ x.T
        reach = 0.5 * (float(a_sq.min()) + float(x_sq.min()) - r2 - _BRUTE_MARGIN) - _BRUTE_MARGIN
        ia, ib = np.nonzero(g >= reach)
        sq = a_sq[ia] + x_sq[ib] - 2.0 * g[ia, ib]
        keep = _within(sq, radius, a32, ia, x, ib)
        yield ia[keep], ib[keep] + start


def close_pairs_of(a: np.ndarray, b: np.ndarray, ia: np.ndarray, ib: np.ndarray, radius: float) -> np.ndarray:
    """Whether each pair (a[ia[i]], b[ib[i]]) is within `radius`, decided as brute force decides (a
    float32 squared distance clear of r² by a wide margin, else `distance_rows`), a chunk of pairs at
    a time: the verification of a filter's candidate pairs."""
    out = np.zeros(len(ia), bool)
    a32, b32 = a.astype(np.float32, copy=False), b.astype(np.float32, copy=False)
    for start in range(0, len(ia), _PAIRS_VERIFIED):
        pa, pb = ia[start : start + _PAIRS_VERIFIED], ib[start : start + _PAIRS_VERIFIED]
        va, vb = a32[pa], b32[pb]
        sq = np.einsum("ij,ij->i", va, va) + np.einsum("ij,ij->i", vb, vb) - 2.0 * np.einsum("ij,ij->i", va, vb)
        out[start : start + len(pa)] = _within(sq, radius, a32, pa, b32, pb)
    return out


def _within(sq: np.ndarray, radius: float, a: np.ndarray, ia: np.ndarray, b: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """Brute force's rule for the pairs (a[ia[i]], b[ib[i]]), from their float32 squared distances
    `sq`: a pair clear of r² by a wide margin is decided by it, one too close to tell by its float64
    distance (`distance_rows`, computed for those pairs alone)."""
    r2 = radius * radius
    out: np.ndarray = sq <= r2 - _BRUTE_MARGIN
    near = np.flatnonzero(~out & (np.abs(sq - r2) <= _BRUTE_MARGIN))
    out[near] = distance_rows(a[ia[near]], b[ib[near]]) <= radius
    return out


def _close_pairs(
    q: np.ndarray, x: np.ndarray, x_sq: np.ndarray, pq: np.ndarray, px: np.ndarray, radius: float
) -> np.ndarray:
    """Whether each pair (q[pq[i]], x[px[i]]) is within `radius`, decided as brute force decides
    (`x_sq`: the squared norms of the rows of `x`).

    `pq` must be sorted (the verification loop keeps its pairs in query order). Each query vector's
    lake vectors are gathered once and multiplied by it (a matrix-vector product): a lake vector
    is a candidate of about one query vector, so a product of every query vector with every
    candidate (a matrix product) would compute ~|Q| times the dot products that are needed. The
    float32 squared distances decide the pairs clear by a wide margin and `distance_rows` the ones
    near τ, as in `close_pairs`."""
    if not len(pq):
        return np.zeros(0, bool)
    q32 = q.astype(np.float32)
    bounds = np.flatnonzero(np.diff(pq, prepend=pq[0] - 1, append=pq[-1] + 1))
    sq = np.empty(len(pq), np.float32)
    for lo, hi in itertools.pairwise(bounds.tolist()):
        xv = x[px[lo:hi]]
        qv = q32[pq[lo]]
        sq[lo:hi] = x_sq[px[lo:hi]] + float(qv @ qv) - 2.0 * (xv @ qv)
    return _within(sq, radius, q, pq, x, px)


def _hits_pexeso(index: PexesoIndex, query: Query, radius: float, need: int) -> np.ndarray:
    """Unique (query vector, column) codes of the matching pairs of every column that can still be
    joinable (a column Lemma 7 pruned may have some of its pairs missing: it is no answer anyway)."""
    n_columns = max(1, len(index.columns))
    if not len(index):
        return np.zeros(0, np.int64)
    q_mapped = map_to_pivots(query.vectors, index.pivots)
    dense = DENSE_SHARE * len(query.vectors) * len(index)
    blocked = _block(index.grid, q_mapped, radius, dense)
    starts = index.grid.starts[index.shape.levels]
    if blocked is None or (starts[blocked[4] + 1] - starts[blocked[4]]).sum() > dense:
        return _hits_brute(index, query, radius)  # blocking prunes too little: matrix products are cheaper
    sure_q, sure_lo, sure_hi, cand_q, cand_leaf = blocked
    postings = index.leaf_postings
    sure_owner, sure_post = expand(postings[sure_lo], postings[sure_hi])
    sure_q = sure_q[sure_owner]
    sure_col = index.posting_column[sure_post]
    cand_owner, cand_vec = expand(starts[cand_leaf], starts[cand_leaf + 1])
    cand_q = cand_q[cand_owner]
    # verify query vector by query vector, in chunks, so that Lemma 7 can drop columns on the way
    sure_order, cand_order = np.argsort(sure_q, kind="stable"), np.argsort(cand_q, kind="stable")
    sure_q, sure_col = sure_q[sure_order], sure_col[sure_order]
    cand_q, cand_vec = cand_q[cand_order], cand_vec[cand_order]
    matched = np.zeros(n_columns, np.int64)
    alive = np.ones(n_columns, bool)
    remaining = query.size
    codes: list[np.ndarray] = []
    for first in range(0, len(query.vectors), _QUERY_CHUNK):
        last = min(first + _QUERY_CHUNK, len(query.vectors))
        s_lo, s_hi = np.searchsorted(sure_q, [first, last])
        c_lo, c_hi = np.searchsorted(cand_q, [first, last])
        hit_q = [sure_q[s_lo:s_hi]]
        hit_col = [sure_col[s_lo:s_hi]]
        vq, vv = cand_q[c_lo:c_hi], cand_vec[c_lo:c_hi]
        if not alive.all():
            live = alive[index.column_of[vv]]
            vq, vv = vq[live], vv[live]
        vq, vv, via_pivot = _pivot_lemmas(index.mapped_by_pivot, q_mapped, vq, vv, radius)
        hit_q.append(vq[via_pivot])
        hit_col.append(index.column_of[vv[via_pivot]])
        vq, vv = vq[~via_pivot], vv[~via_pivot]
        close = _close_pairs(query.vectors, index.vectors, index.squared_norms, vq, vv, radius)
        hit_q.append(vq[close])
        hit_col.append(index.column_of[vv[close]])
        pairs = np.unique(np.concatenate(hit_q).astype(np.int64) * n_columns + np.concatenate(hit_col))
        pairs = pairs[alive[pairs % n_columns]]
        codes.append(pairs)
        matched += np.bincount(
            pairs % n_columns, weights=query.weights[pairs // n_columns], minlength=n_columns
        ).astype(np.int64)
        remaining -= int(query.weights[first:last].sum())
        alive &= matched + remaining >= need  # Lemma 7: the column can no longer reach `need`
    return np.concatenate(codes) if codes else np.zeros(0, np.int64)


def _pivot_lemmas(
    by_pivot: np.ndarray, q_mapped: np.ndarray, vq: np.ndarray, vv: np.ndarray, radius: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lemmas 1 and 2 on candidate pairs (query vector `vq[i]`, lake vector `vv[i]`): the pairs
    no pivot keeps more than `radius` apart (Lemma 1 drops the others), and of those, whether some
    pivot lies within `radius` of both (Lemma 2: a match with no distance computed).

    One pivot at a time over the shrinking set of pairs, reading that pivot's contiguous row of
    coordinates (a reduction over the 5 pivots of each pair is several times slower in numpy)."""
    via_pivot = np.zeros(len(vv), bool)
    for axis, coordinates in enumerate(by_pivot):
        x_at, q_at = coordinates[vv], q_mapped[vq, axis]
        keep = np.abs(x_at - q_at) <= radius + _EPS
        vq, vv = vq[keep], vv[keep]
        via_pivot = via_pivot[keep] | (x_at[keep] + q_at[keep] <= radius - _EPS)
    return vq, vv, via_pivot


def _block(
    grid: Grid, q_mapped: np.ndarray, radius: float, dense: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Algorithm 1, breadth first: the query grid HG_Q and the lake's HG_RV descended together.

    Returns the matching pairs as (query vector, [lo, hi) of leaf cells whose every vector matches
    it) and the candidate pairs as (query vector, leaf cell); or None as soon as it is clear that
    more than `dense` (query vector, lake vector) pairs stay candidates, so that brute force is
    cheaper than blocking on.

    "Clear" is judged once the cells are no wider than twice the search window (4·radius): from
    there a level can only trim the edges of the region left, so when more than `dense` pairs are
    still under the cells kept, about that many reach the leaves. On hashed n-grams 99% of the pairs
    were left at that level and 75% at the leaves, where blocking had cost more than brute force; on
    the bench's clustered lake, 2%, and 0.2% at the leaves."""
    levels = grid.levels
    q_keys = leaf_keys(q_mapped, levels)
    q_order = np.argsort(q_keys, kind="stable")
    q_grid = Grid.over(q_keys[q_order], q_mapped[q_order], levels)
    wide, narrow = radius + _EPS, radius - _EPS
    sure: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    pair_q, pair_t = np.zeros(1, np.int64), np.zeros(1, np.int64)  # the two roots
    for level in range(levels):
        q_lo, q_hi = q_grid.children(level, pair_q)
        owner, child_q = expand(q_lo, q_hi)
        t_lo, t_hi = grid.children(level, pair_t[owner])
        owner, child_t = expand(t_lo, t_hi)
        child_q = child_q[owner]
        below = level + 1
        if below < levels:
            t_low, t_high = grid.low[below][child_t], grid.high[below][child_t]
            q_low, q_high = q_grid.low[below][child_q], q_grid.high[below][child_q]
            # Lemma 4: some pivot keeps the lake cell more than τ away from every query vector's
            filtered = np.any((t_low > q_high + wide) | (t_high < q_low - wide), axis=1)
            # Lemma 6: some pivot puts the whole lake cell inside every query vector's RQR
            matching = np.any(t_high + q_high <= narrow, axis=1) & ~filtered
            if matching.any():
                m_q, m_t = child_q[matching], child_t[matching]
                owner, qv = expand(q_grid.starts[below][m_q], q_grid.starts[below][m_q + 1])
                leaf_lo, leaf_hi = grid.leaves(below, m_t[owner])
                sure.append((q_order[qv], leaf_lo, leaf_hi))
            keep = ~filtered & ~matching
            pair_q, pair_t = child_q[keep], child_t[keep]
            if EXTENT / (1 << below) <= 4 * radius and _pairs_under(q_grid, grid, below, pair_q, pair_t) > dense:
                return None
        else:  # the leaves: Lemmas 5 and 3 query vector by query vector
            owner, qv = expand(q_grid.starts[below][child_q], q_grid.starts[below][child_q + 1])
            leaf = child_t[owner]
            point = q_mapped[q_order[qv]]
            t_low, t_high = grid.low[below][leaf], grid.high[below][leaf]
            filtered = np.any((t_low > point + wide) | (t_high < point - wide), axis=1)  # Lemma 3
            matching = np.any(t_high + point <= narrow, axis=1) & ~filtered  # Lemma 5
            sure.append((q_order[qv[matching]], leaf[matching], leaf[matching] + 1))
            candidate = ~filtered & ~matching
            cand_q, cand_leaf = q_order[qv[candidate]], leaf[candidate]
            s_q, s_lo, s_hi = (np.concatenate(parts) for parts in zip(*sure, strict=True))
            return s_q, s_lo, s_hi, cand_q, cand_leaf
    raise AssertionError("a grid has at least one level")


def _pairs_under(q_grid: Grid, grid: Grid, level: int, q_cells: np.ndarray, t_cells: np.ndarray) -> int:
    """(query vector, lake vector) pairs under the cell pairs (q_cells[i], t_cells[i]) of `level`."""
    q_size = q_grid.starts[level][q_cells + 1] - q_grid.starts[level][q_cells]
    t_size = grid.starts[level][t_cells + 1] - grid.starts[level][t_cells]
    return int((q_size * t_size).sum())


def _results(
    index: PexesoIndex, query: Query, hits: np.ndarray, need: int, radius: float, k: int | None
) -> list[SemanticMatch]:
    """Joinable columns with exact counts, best first, each with a few example pairs."""
    n_columns = max(1, len(index.columns))
    hit_col, hit_q = hits % n_columns, hits // n_columns
    matched = np.bincount(hit_col, weights=query.weights[hit_q], minlength=n_columns).astype(np.int64)
    joinable = np.flatnonzero(matched >= need) if len(index.columns) else np.zeros(0, np.int64)
    order = sorted(
        joinable.tolist(),
        key=lambda c: (-matched[c], index.columns[c].table_id, index.columns[c].column_id),
    )
    if k is not None:
        order = order[:k]
    n_q = len(query.vectors)
    by_column = np.sort(hit_col * n_q + hit_q)  # each column's matched query rows, ascending
    cols = np.asarray(order, np.int64)
    first = np.searchsorted(by_column, cols * n_q)
    n_examples = np.minimum(np.searchsorted(by_column, (cols + 1) * n_q) - first, N_EXAMPLES)
    _, rows = expand(first, first + n_examples)
    example_q = by_column[rows] % n_q  # the first (at most) N_EXAMPLES matched query rows of each column
    nearest, dist = _nearest_members(index, query, np.repeat(cols, n_examples), example_q, radius)
    found = list(zip(example_q.tolist(), nearest.tolist(), dist.tolist(), strict=True))
    out, done = [], 0
    for c, n in zip(order, n_examples.tolist(), strict=True):
        ref = index.columns[c]
        examples = tuple(Example(query.values[qv], str(index.values[x]), d) for qv, x, d in found[done : done + n])
        done += n
        out.append(
            SemanticMatch(
                ref.table_id, ref.column, ref.column_id, float(matched[c] / query.size), int(matched[c]), examples
            )
        )
    return out


def _nearest_members(
    index: PexesoIndex, query: Query, columns: np.ndarray, query_rows: np.ndarray, radius: float
) -> tuple[np.ndarray, np.ndarray]:
    """For each pair (columns[i], query_rows[i]) of a column and a query value it matched: the row of
    the column's nearest vector (float32 squared distance; ties: the first row) and its distance by
    `distance_rows`.

    A matched value's nearest lies within `radius`, so the column's vectors that a pivot keeps
    farther than `radius` + `_EXAMPLE_MARGIN` from it (Lemma 1) are left out before any vector is
    read: far enough that float32 rounding could not have made one of them the nearest. All pairs
    are done at once, a bounded number of (pair, member) combinations at a time."""
    order, starts = index.column_rows
    sizes = starts[columns + 1] - starts[columns]
    nearest = np.zeros(len(columns), np.int64)
    q_mapped = map_to_pivots(query.vectors, index.pivots)
    step = max(1, _EXAMPLE_COMBINATIONS // max(1, int(sizes.max(initial=1))))
    for lo in range(0, len(columns), step):
        pair, pos = expand(starts[columns[lo : lo + step]], starts[columns[lo : lo + step] + 1])
        member, q = order[pos], query_rows[lo + pair]
        for axis, coordinates in enumerate(index.mapped_by_pivot):  # the pivots one by one, on fewer each time
            near = np.abs(coordinates[member] - q_mapped[q, axis]) <= radius + _EXAMPLE_MARGIN
            pair, member, q = pair[near], member[near], q[near]
        x, qv = index.vectors[member], query.vectors[q].astype(np.float32)
        sq = index.squared_norms[member] - 2.0 * np.einsum("ij,ij->i", x, qv)
        best = np.lexsort((member, sq, pair))
        firsts = best[np.flatnonzero(np.diff(pair[best], prepend=-1))]
        nearest[lo + pair[firsts]] = member[firsts]
    return nearest, distance_rows(query.vectors[query_rows], index.vectors[nearest])
