"""An exact range join for the precomputed semantic lists: every pair (a, x) of two sets of vectors
within `radius`, decided by brute force's rule (`search.close_pairs`), without computing every
distance.

Why: the lists join every embedded value of the lake with every other. On the 2,300-table seed
that is 500,000 values, 2.5·10¹¹ distances by brute force — half an hour of matrix products —
while only a few vectors lie within the lists' 2τ = 0.12 of any other. Two exact filters find those
few (docs/algorithms/pexeso.md, "Semantic lists"):

1. **Shared prefix keys.** A pair within r loses at most r² of a's squared mass on the dimensions
   where x is zero (they add a_d² to ‖a − x‖²), and the same of x's. Fix one order of the
   dimensions (rarest first: keys on rare dimensions are shared by few vectors). A vector's
   *prefix* is its shortest run of non-zero dimensions, in that order, whose squared mass less its
   `H − 1` largest entries exceeds r²: a vector that is zero on all but H − 1 of them is farther
   than r from it. So of two matching vectors, the one whose prefix ends first has at least H of its
   prefix dimensions non-zero in the other, and all of them lie in the other's prefix too (they come
   before the end of its prefix). Every vector is keyed by each H-subset of its prefix; only pairs
   sharing a key can match. A vector with no such prefix (the zero vector, a one- or two-character
   value) is compared with every vector by brute force.
2. **Projection bound.** Projecting onto orthonormal directions never lengthens a difference, so a
   keyed pair whose projections onto the sample's `PROJECTED` principal directions lie farther apart
   than r (plus a float32 margin) is farther apart than r.

What is left is decided by brute force's rule, pair by pair. When the keys would pair more vectors
than brute force's matrix products cost (dense vectors from a model spread their mass over every
dimension, so every prefix is long), the join is brute force: never much slower than it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from catalog.search.pexeso.grid import expand
from catalog.search.pexeso.search import close_pairs, close_pairs_of

H = 4  # prefix dimensions a matching pair shares, at least (the key's size)
PROJECTED = 16  # principal directions of the projection bound
_SCAN = 24  # a vector's prefix is looked for among its first non-zero dimensions in the order
_MASS_MARGIN = 1e-6  # a prefix's mass must exceed r² by this much (float64 sums of float32 squares)
_PROJECTION_MARGIN = 1e-3  # on the projected squared distance (float32 products are off by < 1e-5)
_PAIR_COST = 10  # a keyed pair costs about this many brute-force distances (gathered, not multiplied)
_PAIRS_PER_PASS = 1 << 22  # keyed pairs filtered per numpy pass
_SAMPLE = 20_000  # vectors the principal directions are taken from
_BRUTE_ROWS = 2_048  # rows of a compared per brute-force pass


@dataclass(frozen=True)
class PrefixKeys:
    """A set of vectors keyed for the join: each key entry's row, sorted by key, and the rows with no
    prefix (compared with everything by brute force)."""

    keys: np.ndarray  # int64, sorted
    rows: np.ndarray  # int64, the row of each key entry
    unkeyed: np.ndarray  # int64 rows
    n: int  # vectors keyed

    def subset(self, rows: np.ndarray) -> PrefixKeys:
        """The keys of the vectors `rows` (increasing) alone, numbered as the rows of `vectors[rows]`."""
        position = np.full(self.n, -1, np.int64)
        position[rows] = np.arange(len(rows))
        kept = position[self.rows] >= 0
        unkeyed = position[self.unkeyed]
        return PrefixKeys(self.keys[kept], position[self.rows[kept]], unkeyed[unkeyed >= 0], len(rows))


@dataclass(frozen=True)
class RangeJoin:
    """One dimension order and one projection for every set joined in a refresh: the two sides of a
    join must be keyed and projected alike (any order and any orthonormal basis keep it exact)."""

    radius: float
    order: np.ndarray  # dimensions, rarest first
    basis: np.ndarray  # (dimension, PROJECTED) float32, orthonormal columns

    @classmethod
    def fit(cls, sample: np.ndarray, radius: float, *, seed: int = 0) -> RangeJoin:
        """The order and the directions of `sample` (some of the vectors to be joined)."""
        if radius < 0:
            raise ValueError(f"radius must be >= 0, got {radius}")
        rng = np.random.default_rng(seed)
        if len(sample) > _SAMPLE:
            sample = sample[rng.choice(len(sample), _SAMPLE, replace=False)]
        order = np.argsort(np.count_nonzero(sample, axis=0), kind="stable")
        k = min(PROJECTED, sample.shape[1], len(sample))
        if k == 0:
            basis = np.zeros((sample.shape[1], 0), np.float32)
        else:
            basis = np.linalg.svd(sample.astype(np.float64), full_matrices=False)[2][:k].T.astype(np.float32)
        return cls(radius, order, basis)

    def keys(self, vectors: np.ndarray) -> PrefixKeys:
        """Each vector's H-subsets of its prefix, as keys; the vectors with no prefix apart."""
        n, dimension = vectors.shape
        rows_out: list[np.ndarray] = [np.zeros(0, np.int64)]
        keys_out: list[np.ndarray] = [np.zeros(0, np.int64)]
        sizes = np.zeros(n, np.int64)
        firsts = np.zeros((n, _SCAN), np.int64)
        for start in range(0, n, 1 << 16):
            part = vectors[start : start + (1 << 16)][:, self.order]
            sizes[start : start + len(part)], firsts[start : start + len(part)] = _prefixes(
                part, self.radius**2 + _MASS_MARGIN
            )
        for size in np.unique(sizes[sizes > 0]).tolist():
            rows = np.flatnonzero(sizes == size)
            combos = np.array(list(itertools.combinations(range(size), H)), np.int64)
            chosen = firsts[rows][:, combos]  # positions in the order, increasing along each key
            key = np.zeros(chosen.shape[:2], np.int64)
            for j in range(H):
                key = key * dimension + chosen[:, :, j]
            rows_out.append(np.repeat(rows, len(combos)))
            keys_out.append(key.ravel())
        keys, rows = np.concatenate(keys_out), np.concatenate(rows_out)
        by_key = np.argsort(keys, kind="stable")
        return PrefixKeys(keys[by_key], rows[by_key], np.flatnonzero(sizes == 0), n)

    def cost(self, a: PrefixKeys, x: PrefixKeys) -> int:
        """The join's work in brute-force distances: its keyed pairs (each `_PAIR_COST`) and the
        unkeyed rows' distances, or brute force's |a|·|x| when that is less."""
        return _cost(a, x, *_matching(a, x))

    def pairs(
        self, a: np.ndarray, a_keys: PrefixKeys, x: np.ndarray, x_keys: PrefixKeys
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every pair (rows of a, rows of x) within the radius, as `close_pairs(a, x, radius)` gives
        them (each pair once), `a_keys` and `x_keys` being `keys(a)` and `keys(x)`."""
        lo, hi = _matching(a_keys, x_keys)
        if _cost(a_keys, x_keys, lo, hi) >= len(a) * len(x):
            yield from _brute(a, np.arange(len(a)), x, np.arange(len(x)), self.radius)
            return
        yield from _brute(a, a_keys.unkeyed, x, np.arange(len(x)), self.radius)
        keyed_a = np.setdiff1d(np.arange(len(a)), a_keys.unkeyed)
        yield from _brute(a, keyed_a, x, x_keys.unkeyed, self.radius)
        yield self._keyed_pairs(a, a_keys, x, x_keys, lo, hi)

    def _keyed_pairs(
        self, a: np.ndarray, a_keys: PrefixKeys, x: np.ndarray, x_keys: PrefixKeys, lo: np.ndarray, hi: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The keyed pairs within the radius: each key entry of a against x's entries [lo, hi) of the
        same key, through the projection bound, then brute force's rule."""
        a_projected, x_projected = a @ self.basis, x @ self.basis
        limit = self.radius**2 + _PROJECTION_MARGIN
        ends = np.cumsum(hi - lo)
        cuts = np.searchsorted(ends, np.arange(_PAIRS_PER_PASS, int(ends[-1]) if len(ends) else 0, _PAIRS_PER_PASS))
        codes: list[np.ndarray] = [np.zeros(0, np.int64)]
        for first, last in itertools.pairwise([0, *cuts.tolist(), len(lo)]):
            owner, xi = expand(lo[first:last], hi[first:last])
            ia, ix = a_keys.rows[first:last][owner], x_keys.rows[xi]
            d = a_projected[ia] - x_projected[ix]
            near = np.einsum("ij,ij->i", d, d) <= limit
            codes.append(np.unique(ia[near] * len(x) + ix[near]))
        unique = np.unique(np.concatenate(codes))  # a pair sharing several keys once
        ia, ix = unique // max(1, len(x)), unique % max(1, len(x))
        keep = close_pairs_of(a, x, ia, ix, self.radius)
        return ia[keep], ix[keep]


def _matching(a: PrefixKeys, x: PrefixKeys) -> tuple[np.ndarray, np.ndarray]:
    """For each key entry of a, the range [lo, hi) of x's entries with the same key."""
    return np.searchsorted(x.keys, a.keys, "left"), np.searchsorted(x.keys, a.keys, "right")


def _cost(a: PrefixKeys, x: PrefixKeys, lo: np.ndarray, hi: np.ndarray) -> int:
    keyed = int((hi - lo).sum())
    unkeyed = len(a.unkeyed) * x.n + (a.n - len(a.unkeyed)) * len(x.unkeyed)
    return min(keyed * _PAIR_COST + unkeyed, a.n * x.n)


def _prefixes(ordered: np.ndarray, bound: float) -> tuple[np.ndarray, np.ndarray]:
    """For vectors with their dimensions in the join's order: each one's prefix size (0: none within
    its first `_SCAN` non-zero dimensions) and those dimensions' positions."""
    n = len(ordered)
    nonzero = ordered != 0
    firsts = np.argsort(~nonzero, axis=1, kind="stable")[:, :_SCAN]  # first non-zero positions, in order
    count = np.minimum(nonzero.sum(1), _SCAN)
    mass = np.take_along_axis(ordered, firsts, 1).astype(np.float64) ** 2
    mass[np.arange(firsts.shape[1])[None, :] >= count[:, None]] = 0.0
    total = np.zeros(n)
    largest = np.zeros((n, H - 1))  # the H - 1 largest entries so far, descending
    size = np.zeros(n, np.int64)
    for k in range(firsts.shape[1]):
        total += mass[:, k]
        largest = -np.sort(-np.concatenate([largest, mass[:, k : k + 1]], axis=1), axis=1)[:, : H - 1]
        done = (size == 0) & (k + 1 >= H) & (k < count) & (total - largest.sum(1) > bound)
        size[done] = k + 1
        if not (size == 0).any():
            break
    return size, np.pad(firsts, ((0, 0), (0, _SCAN - firsts.shape[1])))


def _brute(
    a: np.ndarray, a_rows: np.ndarray, x: np.ndarray, x_rows: np.ndarray, radius: float
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Brute force's pairs between `a[a_rows]` and `x[x_rows]`, in a's and x's row numbers."""
    if not len(a_rows) or not len(x_rows):
        return
    others = x[x_rows]
    for start in range(0, len(a_rows), _BRUTE_ROWS):
        rows = a_rows[start : start + _BRUTE_ROWS]
        for ia, ix in close_pairs(a[rows], others, radius):
            yield rows[ia], x_rows[ix]
