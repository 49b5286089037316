"""Partitions of the lake's columns by Jensen-Shannon clustering, each under a memory budget
(PEXESO v2 §IV; digest research §2.10), and the partition-level filter that lets a search skip a
partition without loading it.

**Histograms.** A column is summarised as the probability histogram of its vectors over the cells of
a coarse level (`HISTOGRAM_LEVEL`) of the pivot-space grid: the grid's level-l key of each vector's
pivot mapping is its bin, so the bins live in the same fixed-bound space as the index and a column
added later is binned alike. The histograms are sparse (a column occupies few cells): parallel
arrays (row, bin, probability), sorted by row.

**Divergence.** The real Jensen-Shannon divergence `JSD(A, B) = ½ KL(A‖M) + ½ KL(B‖M)`, `M = (A+B)/2`,
in nats: symmetric, 0 only for equal histograms, at most ln 2 (disjoint supports), finite whatever the
empty bins. The paper's formula, `(KL(A‖B) + KL(B‖A))/2`, is the symmetrised KL, infinite as soon
as one histogram has a bin the other lacks, which is the rule between columns, not the exception.
All columns against all centres at once: the terms over each column's own bins, (nnz × k) arrays,
plus ½ ln 2 times the centre mass outside them.

**Clustering.** k-means with the divergence, as the paper: k = the partitions the budget needs
(`FILL` of it on average, so the capacity constraint has room and ADDs find room), k-means++ seeding
with the divergence as the squared distance (seeded), then `ITERATIONS` rounds of assigning each
column to its nearest centre *with room* and moving each centre to the mean of its members'
histograms. Room: a partition holds at most `capacity` vectors; a column larger than that is a
partition of its own; a column is never split (its count must be exact in one partition). The
assignment under capacity is vectorised: every column to its nearest allowed centre; in an overfull
partition the members least attached to it (smallest regret: second-best divergence minus this
one) are turned away until it fits and try their next centre; a column no centre can take starts a
new partition. Every turning-away forbids one (column, centre) pair for good, so it ends.

**Skipping a partition exactly (Lemma 4 at partition level).** A lake vector x within `radius` of a
query vector q has |q'ᵢ − x'ᵢ| ≤ radius on every pivot i (triangle inequality). x' lies in its
partition's box [low, high], so q'ᵢ ∈ [lowᵢ − radius, highᵢ + radius] for every i. A partition no
query vector lies that close to on every pivot holds no match. The box is widened by `EPS` (the
search's margin), so float rounding of a mapped coordinate cannot drop a match.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from catalog.search.pexeso.grid import leaf_keys

LN2 = math.log(2.0)
# The grid level whose cells are the histograms' bins: at level 2 every pivot is cut in 4, so 4^|P|
# cells (1,024 for 5 pivots); finer levels put two nearby columns in disjoint bins (JSD = ln 2),
# which tells nothing about how far apart they are.
HISTOGRAM_LEVEL = 2
ITERATIONS = 10  # the paper's t
FILL = 0.8  # the share of the budget partitions are sized for on average
EPS = 1e-7  # the search's pivot-space margin (search._EPS)
_CELLS = 1 << 22  # (nonzeros × centres) evaluated in one numpy pass
_MAX_ROUNDS = 200  # assignment rounds under capacity before the rest start partitions of their own


@dataclass(frozen=True)
class Histograms:
    """Sparse probability histograms, one per row: entry e puts `probs[e]` of row `rows[e]` in bin
    `bins[e]` (a grid-cell key); sorted by row, then bin; every row has at least one entry."""

    n_rows: int
    rows: np.ndarray
    bins: np.ndarray
    probs: np.ndarray

    def take(self, rows: np.ndarray) -> Histograms:
        """The histograms of `rows` (in that order), renumbered 0..len(rows)-1."""
        order = np.argsort(self.rows, kind="stable")
        starts = np.searchsorted(self.rows[order], np.arange(self.n_rows + 1))
        lo, hi = starts[rows], starts[rows + 1]
        counts = hi - lo
        owner = np.repeat(np.arange(len(rows)), counts)
        at = order[np.repeat(lo, counts) + np.arange(len(owner)) - np.repeat(np.cumsum(counts) - counts, counts)]
        return Histograms(len(rows), owner, self.bins[at], self.probs[at])


@dataclass(frozen=True)
class ColumnSummaries:
    """What partitioning needs of each column: its histogram, its vectors' box in pivot space and
    its size (vectors). Computed a chunk of columns at a time (`summarise`) and concatenated."""

    histograms: Histograms
    low: np.ndarray  # (n, |P|) float64
    high: np.ndarray
    sizes: np.ndarray  # (n,) int64

    @staticmethod
    def concat(parts: list[ColumnSummaries], n_pivots: int) -> ColumnSummaries:
        offsets = np.cumsum([0] + [p.histograms.n_rows for p in parts])
        rows = [p.histograms.rows + o for p, o in zip(parts, offsets, strict=False)]
        h = Histograms(
            int(offsets[-1]),
            np.concatenate(rows) if rows else np.zeros(0, np.int64),
            np.concatenate([p.histograms.bins for p in parts]) if parts else np.zeros(0, np.int64),
            np.concatenate([p.histograms.probs for p in parts]) if parts else np.zeros(0),
        )
        empty = np.zeros((0, n_pivots))
        return ColumnSummaries(
            h,
            np.concatenate([p.low for p in parts]) if parts else empty,
            np.concatenate([p.high for p in parts]) if parts else empty,
            np.concatenate([p.sizes for p in parts]) if parts else np.zeros(0, np.int64),
        )


def summarise(mapped: np.ndarray, column_of: np.ndarray, n_columns: int, level: int) -> ColumnSummaries:
    """Each column's histogram over the level-`level` grid cells, box and size, from its vectors'
    pivot mappings (`column_of` numbers the columns 0..n_columns-1; every column has a vector)."""
    keys = leaf_keys(mapped, level)
    order = np.lexsort((keys, column_of))
    col, key = column_of[order], keys[order]
    sizes = np.bincount(column_of, minlength=n_columns).astype(np.int64)
    if (sizes == 0).any():
        raise ValueError("every column summarised needs at least one vector")
    first = np.flatnonzero(np.diff(col, prepend=np.int64(-1)) | np.diff(key, prepend=np.int64(-1)))
    counts = np.diff(np.append(first, len(col)))
    h = Histograms(n_columns, col[first], key[first], counts / sizes[col[first]])
    starts = np.searchsorted(col, np.arange(n_columns))
    sorted_mapped = mapped[order]
    return ColumnSummaries(
        h,
        np.minimum.reduceat(sorted_mapped, starts, axis=0),
        np.maximum.reduceat(sorted_mapped, starts, axis=0),
        sizes,
    )


def jsd(histograms: Histograms, centres: np.ndarray, vocabulary: np.ndarray) -> np.ndarray:
    """(n_rows, k) Jensen-Shannon divergences (nats) of every histogram to every centre; `centres`
    are dense (k, len(vocabulary)) probability rows over the sorted bin keys `vocabulary`, which
    holds every bin of `histograms`.

    Over a row's own bins, with m = p + c, 2·JSD's terms p·ln(2p/m) + c·ln(2c/m) are
    m·(ln 2 − ln m) + p·ln p + c·ln c: one logarithm per (entry, centre), ln p per entry and ln c
    per centre bin computed once. Outside them only the centre has mass: ln 2 per unit of it."""
    k = len(centres)
    out = np.zeros((histograms.n_rows, k))
    inside = np.zeros((histograms.n_rows, k))  # each centre's mass on the row's own bins
    at = np.searchsorted(vocabulary, histograms.bins)
    with np.errstate(divide="ignore", invalid="ignore"):
        c_log_c = np.where(centres > 0, centres * np.log(centres), 0.0)
    p_log_p = histograms.probs * np.log(histograms.probs)
    step = max(1, _CELLS // max(1, k))
    for lo in range(0, len(at), step):
        p = histograms.probs[lo : lo + step, None]
        c = centres[:, at[lo : lo + step]].T
        m = p + c
        terms = m * (LN2 - np.log(m)) + p_log_p[lo : lo + step, None] + c_log_c[:, at[lo : lo + step]].T
        rows = histograms.rows[lo : lo + step]
        first = np.flatnonzero(np.diff(rows, prepend=np.int64(-1)))  # rows are sorted: one run each
        out[rows[first]] += np.add.reduceat(terms, first, axis=0)
        inside[rows[first]] += np.add.reduceat(c, first, axis=0)
    return np.clip(0.5 * out + 0.5 * LN2 * np.clip(1.0 - inside, 0.0, None), 0.0, LN2)


def dense(histograms: Histograms, vocabulary: np.ndarray) -> np.ndarray:
    """The histograms as dense (n_rows, len(vocabulary)) rows."""
    out = np.zeros((histograms.n_rows, len(vocabulary)))
    out[histograms.rows, np.searchsorted(vocabulary, histograms.bins)] = histograms.probs
    return out


def mean_histograms(histograms: Histograms, labels: np.ndarray, k: int, vocabulary: np.ndarray) -> np.ndarray:
    """(k, len(vocabulary)) mean histogram of each label's rows (label -1: none; a label with no row:
    a zero row)."""
    keep = labels[histograms.rows] >= 0
    at = np.searchsorted(vocabulary, histograms.bins[keep])
    owner = labels[histograms.rows[keep]]
    v = len(vocabulary)
    sums = np.bincount(owner * v + at, weights=histograms.probs[keep], minlength=k * v).reshape(k, v)
    members = np.bincount(labels[labels >= 0], minlength=k)
    return sums / np.maximum(members, 1)[:, None]


def assign_with_capacity(divergence: np.ndarray, sizes: np.ndarray, capacity: int, loads: np.ndarray) -> np.ndarray:
    """Each row's centre: the nearest (by `divergence`, (n, k)) whose partition keeps room for it
    (`loads` are the vectors each holds already, `capacity` the most it may hold); -1 where none
    has. Most attached members are kept first when a partition is over capacity."""
    n, k = divergence.shape
    labels = np.full(n, -1, np.int64)
    if not n or not k:
        return labels
    allowed = loads[None, :] + sizes[:, None] <= capacity
    rows = np.arange(n)
    for _ in range(_MAX_ROUNDS):
        masked = np.where(allowed, divergence, np.inf)
        best = masked.argmin(axis=1)
        best_value = masked[rows, best]
        labels = np.where(np.isfinite(best_value), best, -1)
        placed = labels >= 0
        load = loads + np.bincount(labels[placed], weights=sizes[placed], minlength=k)
        over = load > capacity
        if not over.any():
            return labels
        second = np.partition(masked, 1, axis=1)[:, 1] if k > 1 else np.full(n, np.inf)
        with np.errstate(invalid="ignore"):
            regret = np.nan_to_num(second - best_value, nan=np.inf, posinf=np.inf)
        members = np.flatnonzero(placed & over[np.maximum(labels, 0)])
        order = members[np.lexsort((-regret[members], labels[members]))]  # by centre, most attached first
        group = labels[order]
        cum = np.cumsum(sizes[order])
        first = np.flatnonzero(np.diff(group, prepend=np.int64(-1)))
        before = np.repeat(cum[first] - sizes[order][first], np.diff(np.append(first, len(order))))
        evict = loads[group] + cum - before > capacity
        allowed[order[evict], group[evict]] = False
    masked = np.where(allowed, divergence, np.inf)  # out of rounds: keep what fits, the rest go
    return _fit_greedily(np.where(np.isfinite(masked.min(axis=1)), masked.argmin(axis=1), -1), sizes, capacity, loads)


def _fit_greedily(labels: np.ndarray, sizes: np.ndarray, capacity: int, loads: np.ndarray) -> np.ndarray:
    """`labels` with the members past each partition's capacity (in row order) turned to -1."""
    out = labels.copy()
    placed = np.flatnonzero(out >= 0)
    order = placed[np.argsort(out[placed], kind="stable")]
    group = out[order]
    cum = np.cumsum(sizes[order])
    first = np.flatnonzero(np.diff(group, prepend=np.int64(-1)))
    before = np.repeat(cum[first] - sizes[order][first], np.diff(np.append(first, len(order))))
    out[order[loads[group] + cum - before > capacity]] = -1
    return out


def pack_in_order(sizes: np.ndarray, capacity: int) -> np.ndarray:
    """Group numbers 0.. for consecutive rows whose sizes fit `capacity` (a row larger than it alone)."""
    out = np.zeros(len(sizes), np.int64)
    cum = np.cumsum(sizes)
    start, group = 0, 0
    while start < len(sizes):
        base = cum[start - 1] if start else 0
        end = max(start + 1, int(np.searchsorted(cum, base + capacity, side="right")))
        out[start:end] = group
        start, group = end, group + 1
    return out


@dataclass(frozen=True)
class Partitioning:
    """Each column's partition, its divergence to its partition's centre, the centres (dense over
    `vocabulary`) and each partition's box of its columns' pivot mappings."""

    labels: np.ndarray
    divergence: np.ndarray
    centres: np.ndarray
    vocabulary: np.ndarray
    low: np.ndarray
    high: np.ndarray

    @property
    def quality(self) -> float:
        """1 − mean divergence / ln 2: 1 when every column is its centre's histogram, 0 when none
        shares a bin with it."""
        return quality(self.divergence)


def quality(divergence: np.ndarray) -> float:
    return 1.0 - float(divergence.mean()) / LN2 if len(divergence) else 1.0


def n_partitions_for(sizes: np.ndarray, capacity: int) -> int:
    """The centres the clustering starts from: the partitions the vectors need at `FILL` of the budget."""
    return max(1, min(len(sizes), math.ceil(int(sizes.sum()) / (FILL * capacity))))


def cluster(summaries: ColumnSummaries, capacity: int, *, seed: int = 0, iterations: int = ITERATIONS) -> Partitioning:
    """Partitions of the summarised columns, each holding at most `capacity` vectors unless it is
    one column larger than that (JSD k-means under capacity; see the module docstring)."""
    if capacity < 1:
        raise ValueError(f"capacity must be >= 1 vector, got {capacity}")
    h, sizes = summaries.histograms, summaries.sizes
    n = h.n_rows
    vocabulary = np.unique(h.bins)
    labels = np.full(n, -1, np.int64)
    small = np.flatnonzero(sizes <= capacity)
    centres = np.zeros((0, len(vocabulary)))
    if len(small):
        hs = h.take(small)
        k = n_partitions_for(sizes[small], capacity)
        centres = dense(hs.take(_seeds(hs, vocabulary, k, seed)), vocabulary)
        inner = np.full(len(small), -1, np.int64)
        for _ in range(iterations):
            d = jsd(hs, centres, vocabulary)
            fresh = assign_with_capacity(d, sizes[small], capacity, np.zeros(k, np.int64))
            moved = mean_histograms(hs, fresh, k, vocabulary)
            held = np.bincount(fresh[fresh >= 0], minlength=k) > 0
            centres = np.where(held[:, None], moved, centres)
            if np.array_equal(fresh, inner):
                break
            inner = fresh
        labels[small] = inner
    rest = np.flatnonzero(labels == -1)
    if len(rest):  # columns no centre had room for, and columns larger than the budget (alone each)
        groups = pack_in_order(sizes[rest], capacity)
        labels[rest] = len(centres) + groups
        extra = mean_histograms(h.take(rest), groups, int(groups.max()) + 1, vocabulary)
        centres = np.concatenate([centres, extra])
    labels, centres = _renumber(labels, centres)
    divergence = jsd(h, centres, vocabulary)[np.arange(n), labels] if n else np.zeros(0)
    low, high = boxes(summaries, labels, len(centres))
    return Partitioning(labels, divergence, centres, vocabulary, low, high)


def _renumber(labels: np.ndarray, centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Partitions without members dropped, the others numbered 0.. in order."""
    used, labels = np.unique(labels, return_inverse=True)
    return labels.astype(np.int64), centres[used]


def boxes(summaries: ColumnSummaries, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(k, |P|) low and high corners of each partition's columns' boxes (empty: +inf / -inf)."""
    p = summaries.low.shape[1]
    low, high = np.full((k, p), np.inf), np.full((k, p), -np.inf)
    np.minimum.at(low, labels, summaries.low)
    np.maximum.at(high, labels, summaries.high)
    return low, high


def _seeds(h: Histograms, vocabulary: np.ndarray, k: int, seed: int) -> np.ndarray:
    """k-means++ with the divergence as the squared distance: each next seed drawn with probability
    proportional to its divergence from the nearest seed so far."""
    rng = np.random.default_rng(seed)
    chosen = [int(rng.integers(h.n_rows))]
    nearest = jsd(h, dense(h.take(np.array(chosen)), vocabulary), vocabulary)[:, 0]
    while len(chosen) < k:
        total = float(nearest.sum())
        pick = int(rng.choice(h.n_rows, p=nearest / total)) if total > 0 else int(rng.integers(h.n_rows))
        chosen.append(pick)
        nearest = np.minimum(nearest, jsd(h, dense(h.take(np.array([pick])), vocabulary), vocabulary)[:, 0])
    return np.array(chosen, np.int64)


def reachable(q_mapped: np.ndarray, low: np.ndarray, high: np.ndarray, radius: float) -> np.ndarray:
    """(k,) whether some query vector (pivot mapping `q_mapped`) lies within `radius` of partition
    box [low, high] on every pivot: the partitions that may hold a match (the others cannot)."""
    wide = radius + EPS
    out = np.zeros(len(low), bool)
    step = max(1, _CELLS // max(1, len(low) * low.shape[1]))
    for lo in range(0, len(q_mapped), step):
        q = q_mapped[lo : lo + step, None, :]
        out |= ((q >= low[None] - wide) & (q <= high[None] + wide)).all(axis=2).any(axis=0)
    return out


def boxes_apart(low_a: np.ndarray, high_a: np.ndarray, low_b: np.ndarray, high_b: np.ndarray, radius: float) -> bool:
    """Whether some pivot keeps box a more than `radius` from box b (no pair of their vectors can
    be within `radius`: Lemma 4 between two sets of lake vectors)."""
    wide = radius + EPS
    return bool(np.any((low_b > high_a + wide) | (high_b < low_a - wide)))
