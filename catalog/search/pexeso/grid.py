"""The hierarchical grid over the pivot space (PEXESO v2 §III-B), stored sparsely.

Every pivot coordinate of a unit vector lies in [0, 2] (the largest L2 distance between unit
vectors), so the grid's bounds are fixed: vectors added later always fall inside it and nothing is
re-gridded. Level l halves every dimension l times; a cell is named by a level-major Z-order key
(level 1's bit of every dimension first, then level 2's, ...), so a level-l cell's key is its
leaf's key shifted right by |P|·(m − l) bits and the children of a cell are one contiguous run of
the next level's sorted keys. Only non-empty cells exist: each level is the sorted unique keys of
the items (vectors) it holds, with where each cell's items start in the items' key order.

Departure from the paper, for tighter and exactly-bounded filters: each stored cell also keeps the
bounding box (per-dimension min and max) of the mapped items inside it, and the lemmas test those
boxes rather than the cell's nominal edges. A box lies inside its cell, so every lemma stays sound;
and it makes a coordinate rounded to just above 2 harmless.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EXTENT = 2.0  # pivot coordinates of unit vectors lie in [0, EXTENT]
MAX_KEY_BITS = 62  # |P| · m bits name a leaf cell in an int64


def check_shape(n_pivots: int, levels: int) -> None:
    """Refuse a grid whose leaf keys would not fit in an int64."""
    if levels < 1:
        raise ValueError(f"levels must be >= 1, got {levels}")
    if n_pivots * levels > MAX_KEY_BITS:
        raise ValueError(f"n_pivots * levels must be <= {MAX_KEY_BITS}, got {n_pivots} * {levels}")


def leaf_keys(mapped: np.ndarray, levels: int) -> np.ndarray:
    """(n,) int64 level-major Z-order keys of the leaf cells holding the mapped points."""
    n, p = mapped.shape
    check_shape(p, levels)
    side = 1 << levels
    coords = np.clip(np.floor(mapped * (side / EXTENT)), 0, side - 1).astype(np.int64)
    keys = np.zeros(n, np.int64)
    for level in range(levels):
        shift = levels - 1 - level
        for j in range(p):
            keys = (keys << 1) | ((coords[:, j] >> shift) & 1)
    return keys


@dataclass(frozen=True)
class Grid:
    """Non-empty cells at levels 0 (the root) .. m over items sorted by leaf key.

    `keys[l]` are level l's cell keys (sorted), `starts[l]` where each cell's items begin (one more
    entry: the end), `low[l]` / `high[l]` each cell's items' bounding box in the pivot space."""

    n_dims: int
    levels: int
    keys: tuple[np.ndarray, ...]
    starts: tuple[np.ndarray, ...]
    low: tuple[np.ndarray, ...]
    high: tuple[np.ndarray, ...]

    @classmethod
    def over(cls, sorted_keys: np.ndarray, sorted_mapped: np.ndarray, levels: int) -> Grid:
        """The grid of items whose leaf keys (`sorted_keys`, ascending) and mapped points are given."""
        p = sorted_mapped.shape[1]
        keys, starts, low, high = [], [], [], []
        for level in range(levels + 1):
            at_level = sorted_keys >> (p * (levels - level))
            first = np.flatnonzero(np.diff(at_level, prepend=np.int64(-1))) if len(at_level) else np.zeros(0, np.int64)
            keys.append(at_level[first])
            starts.append(np.append(first, len(at_level)).astype(np.int64))
            if len(first):
                low.append(np.minimum.reduceat(sorted_mapped, first, axis=0))
                high.append(np.maximum.reduceat(sorted_mapped, first, axis=0))
            else:
                low.append(np.zeros((0, p)))
                high.append(np.zeros((0, p)))
        return cls(p, levels, tuple(keys), tuple(starts), tuple(low), tuple(high))

    def children(self, level: int, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For cells of `level`, the [lo, hi) ranges of their children among level + 1's cells."""
        parent = self.keys[level][cells] << self.n_dims
        below = self.keys[level + 1]
        return np.searchsorted(below, parent), np.searchsorted(below, parent + (1 << self.n_dims))

    def leaves(self, level: int, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For cells of `level`, the [lo, hi) ranges of the leaf cells under them."""
        shift = self.n_dims * (self.levels - level)
        key = self.keys[level][cells]
        leaves = self.keys[self.levels]
        return np.searchsorted(leaves, key << shift), np.searchsorted(leaves, (key + 1) << shift)


def expand(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every [lo, hi) range unrolled: (index of its range, item) for each item, ranges in order."""
    counts = np.maximum(hi - lo, 0)
    owner = np.repeat(np.arange(len(lo)), counts)
    offset = np.arange(len(owner)) - np.repeat(np.cumsum(counts) - counts, counts)
    return owner, np.repeat(lo, counts) + offset
