"""Pivot selection and pivot mapping (PEXESO v2 §III-D).

Every vector is replaced, for filtering, by its distances to a few pivots; by the triangle
inequality the largest per-pivot difference of two mapped vectors is a lower bound on their true
distance, so the pivots are good when they spread the mapped points apart. The paper selects them by
the PCA-based method of Mao, Miranker and Miranker (outlier candidates by farthest-first traversal,
then, for each leading principal component of the sample mapped onto the candidates, the candidate
loading most on it) and compares with random pivots, its stated alternative; both are here
(`method="pca" | "random"`). Any choice keeps the search exact: pivots only change how much is pruned.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

PivotMethod = Literal["pca", "random"]
PIVOT_METHODS: tuple[PivotMethod, ...] = ("pca", "random")
_SAMPLE = 4096  # vectors the PCA method looks at: keeps selection linear in the lake's size
_CANDIDATES_PER_PIVOT = 4  # outlier candidates per pivot wanted


def distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(len(a), len(b)) Euclidean distances in float64 (the pivot space's coordinates are float64 so
    that the lemmas' bounds hold up to ~1e-15, far inside the search's safety margin)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    sq = (a64 * a64).sum(1)[:, None] + (b64 * b64).sum(1)[None, :] - 2.0 * (a64 @ b64.T)
    return np.sqrt(np.maximum(sq, 0.0))


def map_to_pivots(vectors: np.ndarray, pivots: np.ndarray) -> np.ndarray:
    """(len(vectors), len(pivots)) float64: each vector's distance to each pivot, computed exactly
    (difference, square, sum) rather than through a dot product, whose cancellation near zero would
    cost the lemmas their margin."""
    out = np.empty((len(vectors), len(pivots)), np.float64)
    step = max(1, (1 << 22) // max(1, vectors.shape[1]))
    for start in range(0, len(vectors), step):
        block = vectors[start : start + step].astype(np.float64)
        for j, p in enumerate(pivots.astype(np.float64)):
            diff = block - p
            out[start : start + step, j] = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    return out


def select_pivots(vectors: np.ndarray, n_pivots: int, *, method: PivotMethod = "pca", seed: int = 0) -> np.ndarray:
    """(n_pivots, dimension) float32 pivots drawn from `vectors` (random unit vectors when there are
    none: an empty lake still needs a pivot space for vectors added later)."""
    if n_pivots < 1:
        raise ValueError(f"n_pivots must be >= 1, got {n_pivots}")
    if method not in PIVOT_METHODS:
        raise ValueError(f"method must be one of {list(PIVOT_METHODS)}, got {method!r}")
    rng = np.random.default_rng(seed)
    if not len(vectors):
        raise ValueError("pivots are selected from at least one vector")
    if method == "random" or len(vectors) <= n_pivots:
        return vectors[rng.choice(len(vectors), n_pivots, replace=len(vectors) < n_pivots)].astype(np.float32)
    sample = vectors[rng.choice(len(vectors), min(_SAMPLE, len(vectors)), replace=False)]
    candidates = _farthest_first(sample, min(len(sample), n_pivots * _CANDIDATES_PER_PIVOT), rng)
    mapped = distances(sample, sample[candidates])
    centred = mapped - mapped.mean(0)
    _, _, components = np.linalg.svd(centred, full_matrices=False)
    chosen: list[int] = []
    for component in components:
        for c in np.argsort(-np.abs(component), kind="stable"):
            if int(c) not in chosen:
                chosen.append(int(c))
                break
        if len(chosen) == n_pivots:
            break
    for c in range(len(candidates)):  # fewer components than pivots: the remaining candidates in order
        if len(chosen) == n_pivots:
            break
        if c not in chosen:
            chosen.append(c)
    return sample[candidates[chosen]].astype(np.float32)


def _farthest_first(sample: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of `n` outliers of `sample`: each the point farthest from those already taken."""
    taken = [int(rng.integers(len(sample)))]
    nearest = distances(sample, sample[taken])[:, 0]
    taken = [int(np.argmax(nearest))]  # the first pick is random; the point farthest from it is an outlier
    nearest = distances(sample, sample[taken])[:, 0]
    while len(taken) < n:
        nxt = int(np.argmax(nearest))
        taken.append(nxt)
        nearest = np.minimum(nearest, distances(sample, sample[[nxt]])[:, 0])
    return np.array(taken, np.int64)
