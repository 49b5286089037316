"""Size partitions of LSH Ensemble: contiguous ranges of set sizes, each searched with its own threshold.

A partition with upper bound u translates the containment threshold t* into the Jaccard threshold
s* = t* / (u/|Q| + 1 - t*) (thesis §2.4.1-2.4.2; research/zhu-thesis.md §1.4). That Jaccard value
falls as the set size grows, so s* is a safe (lower) threshold for every member *only if u is at least
every member's size*: a member above its bound is a silent false negative (digest §8 item 2). Hence
partitions are described by their ascending upper bounds alone: partition i holds sizes in
(uppers[i-1], uppers[i]] (with uppers[-1] = 0 for i = 0), so there are no gaps, and a size above the
last bound belongs to no partition until `raised` lifts that bound.

The bounds themselves trade false positives: a member much smaller than its bound passes at a lower
effective threshold. Proposition 2.4.2 bounds the false positives of a partition by
Σ_x N_x (1 - x/u), query-independent when max|X| >> |Q|; `cost` sums it and `optimal_uppers` minimises
it by the dynamic programme of §2.4.6 (digest §1.6). `equi_depth_uppers` is the cut the VLDB 2016
paper shows near-optimal for power-law sizes, and is cheaper still.

Sizes are distinct-value counts (integers >= 1); a histogram is (distinct sizes ascending, counts).
"""

from __future__ import annotations

import numpy as np

_MAX_SIZES = 4096  # distinct sizes above which `optimal_uppers` bins them (see there)
_BLOCK_CELLS = 1 << 18  # cells of one (b, j) block of the DP: 2 MB of float64, cache-sized and tightly bounded below


def histogram(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct sizes ascending and how many sets have each, both int64.

    Raises:
        ValueError: a size is below 1 or not an integer.
    """
    values = _as_sizes("sizes", sizes)
    distinct, counts = np.unique(values, return_counts=True)
    return distinct.astype(np.int64), counts.astype(np.int64)


def partition_of(sizes: np.ndarray, uppers: np.ndarray) -> np.ndarray:
    """The partition of each size: the first i with sizes <= uppers[i]; len(uppers) when above every bound.

    A size equal to a bound belongs to that bound's partition (bounds are inclusive).
    """
    return np.searchsorted(np.asarray(uppers), np.asarray(sizes), side="left")


def cost(sizes: np.ndarray, counts: np.ndarray, uppers: np.ndarray) -> float:
    """The false-positive bound Σ_i Σ_{x in partition i} N_x (1 - x/u_i) of thesis Prop. 2.4.2.

    `sizes` need not be distinct or sorted; `counts` are their N_x.

    Raises:
        ValueError: a size is above the last bound (it would be a false negative, not a cost), or the
            arrays do not match.
    """
    values = _as_sizes("sizes", sizes)
    weights = np.asarray(counts, dtype=np.float64)
    bounds = _as_uppers(uppers)
    if weights.shape != values.shape:
        raise ValueError(f"counts must match sizes in shape, got {weights.shape} and {values.shape}")
    if len(values) == 0:
        return 0.0
    parts = partition_of(values, bounds)
    if np.any(parts == len(bounds)):
        last = int(bounds[-1]) if len(bounds) else 0
        raise ValueError(f"size {int(values.max())} is above the last partition bound {last}")
    return float(np.sum(weights * (1.0 - values / bounds[parts])))


def optimal_uppers(
    sizes: np.ndarray, counts: np.ndarray, n_partitions: int, *, max_sizes: int = _MAX_SIZES
) -> np.ndarray:
    """Upper bounds of at most `n_partitions` contiguous partitions minimising `cost` (thesis §2.4.6).

    The bounds are distinct sizes present in the histogram, strictly ascending, the last one the largest
    size; fewer than `n_partitions` only when there are fewer distinct sizes (splitting a partition never
    raises the cost, so the optimum uses them all).

    The dynamic programme is OPT_p(b) = min_a OPT_{p-1}(a-1) + Cost(a..b) over distinct sizes 1..b.
    With prefix sums C (counts) and S (counts x sizes), Cost(a..b) = (C[b]-C[a-1]) - (S[b]-S[a-1])/size_b
    is O(1), so the inner minimum is one vectorised numpy expression over a, evaluated for blocks of b
    at once (the reference implementations materialise an |N| x |N| cost matrix instead: 1.5 GB at the
    thesis's 14K distinct sizes; digest §1.6). Cost satisfies the quadrangle inequality, so the best a
    never decreases with b and each block searches only from the previous block's best a.

    Above `max_sizes` distinct sizes the O(|N|^2 n) work is bounded by binning first: sizes are grouped
    by floor(k·log size), with k the finest resolution giving at most `max_sizes` groups, and a bound may
    only sit at a group's largest size (so it stays >= every member). Costs stay exact, since the prefix
    sums are over the real sizes; the result is optimal among bounds at group ends, i.e. among bounds
    within a factor e^(1/k) of the best ones. Without binning the result is exactly optimal.

    Returns:
        int64 bounds; empty for an empty histogram.

    Raises:
        ValueError: `n_partitions` or `max_sizes` below 1, sizes not strictly ascending or below 1,
            counts below 1 or not matching sizes.
    """
    if n_partitions < 1:
        raise ValueError(f"n_partitions must be >= 1, got {n_partitions}")
    if max_sizes < 1:
        raise ValueError(f"max_sizes must be >= 1, got {max_sizes}")
    values, weights = _as_histogram(sizes, counts)
    if len(values) == 0:
        return np.empty(0, dtype=np.int64)
    ends = _group_ends(values, max_sizes)  # index of each candidate bound in `values`
    cum_counts = np.concatenate(([0.0], np.cumsum(weights.astype(np.float64))[ends]))
    cum_mass = np.concatenate(([0.0], np.cumsum(weights * values.astype(np.float64))[ends]))
    bounds = values[ends].astype(np.float64)
    chosen = _dp_bounds(cum_counts, cum_mass, bounds, min(n_partitions, len(ends)))
    return values[ends[chosen]].astype(np.int64)


def equi_depth_uppers(sizes: np.ndarray, counts: np.ndarray, n_partitions: int) -> np.ndarray:
    """Upper bounds giving about the same number of sets to each of at most `n_partitions` partitions.

    Bound i is the first distinct size at which the cumulative count reaches (i+1)/n of the total; a
    size holding more than a share collapses bounds, so heavy sizes give fewer partitions. Bounds are
    distinct sizes present, strictly ascending, the last one the largest size.

    Raises:
        ValueError: as `optimal_uppers`.
    """
    if n_partitions < 1:
        raise ValueError(f"n_partitions must be >= 1, got {n_partitions}")
    values, weights = _as_histogram(sizes, counts)
    if len(values) == 0:
        return np.empty(0, dtype=np.int64)
    cumulative = np.cumsum(weights)
    targets = cumulative[-1] * np.arange(1, n_partitions + 1) / n_partitions
    cuts = np.searchsorted(cumulative, targets, side="left")
    cuts = np.unique(np.minimum(cuts, len(values) - 1))
    cuts[-1] = len(values) - 1
    return np.unique(values[cuts]).astype(np.int64)


def raised(uppers: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """A copy of `uppers` whose last bound is at least the largest of `sizes`.

    The maintenance rule of digest §2 item 2: an insert above every partition raises the last
    partition's bound before it becomes searchable, never leaving a member above its bound. Sizes in
    between bounds need nothing (partitions are contiguous). With no bounds yet the result is the one
    bound max(sizes); with no sizes, an unchanged copy.
    """
    bounds = _as_uppers(uppers).copy()
    values = _as_sizes("sizes", sizes)
    if len(values) == 0:
        return bounds
    top = int(values.max())
    if len(bounds) == 0:
        return np.array([top], dtype=np.int64)
    bounds[-1] = max(int(bounds[-1]), top)
    return bounds


def _dp_bounds(cum_counts: np.ndarray, cum_mass: np.ndarray, bounds: np.ndarray, n_parts: int) -> np.ndarray:
    """Indices into `bounds` of the optimal `n_parts` partitions' upper bounds.

    Candidates 1..m (1-based) have prefix sums cum_counts[b], cum_mass[b] (index 0 is the empty
    prefix). OPT_p(b) = C[b] - S[b]/u_b + min_{j in [p-1, b-1]} (OPT_{p-1}(j) - C[j] + S[j]/u_b): the
    part that depends on j is a line in 1/u_b, evaluated for a block of b against every j at once.
    """
    m = len(bounds)
    inv = 1.0 / bounds
    own = cum_counts[1:] - cum_mass[1:] * inv  # Cost(1..b) for b = 1..m, and the b-only term of every layer
    opt = np.full(m + 1, np.inf)
    opt[1:] = own
    back = np.zeros((n_parts, m + 1), dtype=np.int64)
    for p in range(2, n_parts + 1):
        line0 = opt - cum_counts  # inf below j = p-1, where OPT_{p-1} is undefined
        new = np.full(m + 1, np.inf)
        # b must leave room for the remaining n_parts - p partitions; the last layer only needs b = m.
        first, last = (m, m) if p == n_parts else (p, m - (n_parts - p))
        block = max(1, _BLOCK_CELLS // last)
        for b0 in range(first, last + 1, block):
            b = np.arange(b0, min(b0 + block, last + 1))
            # j in [low, b-1]: Cost satisfies the quadrangle inequality (a larger u_b only raises
            # 1 - x/u_b), so the leftmost best j never decreases with b and starts at the last b's.
            low, width = (int(back[p - 1, b0 - 1]) if b0 > first else 0), int(b[-1])
            vals = line0[None, low:width] + inv[b - 1, None] * cum_mass[None, low:width]
            vals[np.arange(low, width)[None, :] >= b[:, None]] = np.inf
            arg = np.argmin(vals, axis=1)
            new[b] = vals[np.arange(len(b)), arg] + own[b - 1]
            back[p - 1, b] = arg + low
        opt = new
    chosen = np.empty(n_parts, dtype=np.int64)
    last_of = m  # the 1-based candidate closing partition p, walked back from the last
    for p in range(n_parts, 0, -1):
        chosen[p - 1] = last_of - 1
        last_of = int(back[p - 1, last_of])
    return chosen


def _group_ends(values: np.ndarray, max_sizes: int) -> np.ndarray:
    """Positions in `values` (distinct, ascending) that may carry a bound: all of them, or the last of
    each group floor(k·log size) for the largest k (found by bisection) giving at most `max_sizes` groups."""
    every = np.arange(len(values))
    if len(values) <= max_sizes:
        return every
    logs = np.log(values.astype(np.float64))

    def ends(resolution: float) -> np.ndarray:
        keys = np.floor(logs * resolution)
        return np.flatnonzero(np.append(keys[1:] != keys[:-1], True))

    low, high = 0.0, 1.0 / float(np.min(np.diff(logs))) + 1.0  # one group; every size its own group
    for _ in range(50):
        middle = (low + high) / 2
        if len(ends(middle)) <= max_sizes:
            low = middle
        else:
            high = middle
    return ends(low) if low > 0 else every[-1:]


def _as_sizes(name: str, sizes: np.ndarray) -> np.ndarray:
    values = np.asarray(sizes)
    if values.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {values.shape}")
    if len(values) == 0:
        return values.astype(np.int64)
    integral = np.issubdtype(values.dtype, np.integer)
    if not integral and (not np.all(np.isfinite(values)) or np.any(values != np.floor(values))):
        raise ValueError(f"{name} must be integers")
    values = values.astype(np.int64)
    if values.min() < 1:
        raise ValueError(f"{name} must be >= 1, got {int(values.min())}")
    return values


def _as_uppers(uppers: np.ndarray) -> np.ndarray:
    bounds = _as_sizes("uppers", uppers)
    if np.any(np.diff(bounds) <= 0):
        raise ValueError("uppers must be strictly ascending")
    return bounds


def _as_histogram(sizes: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values = _as_sizes("sizes", sizes)
    weights = _as_sizes("counts", counts)
    if weights.shape != values.shape:
        raise ValueError(f"counts must match sizes in shape, got {weights.shape} and {values.shape}")
    if np.any(np.diff(values) <= 0):
        raise ValueError("sizes must be distinct and ascending (see histogram)")
    return values, weights
