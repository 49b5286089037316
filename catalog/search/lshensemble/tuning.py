"""(b, r) of LSH Ensemble, per partition and per query, looked up in a precomputed table.

A set of size x is a candidate for a query of size q with probability P = 1 - (1 - s^r)^b, where
s = t / (x/q + 1 - t) is the Jaccard similarity of containment t (thesis §2.4.1). For a threshold t*,
a partition whose upper bound is u picks the (b, r) minimising

    fp_weight·FP + fn_weight·FN,   FP = ∫_0^{min(t*, x/q)} P dt,   FN = ∫_{t*}^{min(1, x/q)} (1 - P) dt

at x = u (FN = 0 when x/q < t*: such a set cannot reach t*), subject to 1 <= r <= max_r, b >= 1,
b·r <= num_perm (thesis §2.4.7; research/zhu-thesis.md §1.7). Tuning at x = u is the thesis's
choice: s falls as x grows, so every member (size <= u) has at least the similarity tuned for, and
the translation adds false positives only, never false negatives.

The objective depends on x and q only through x/q, so it is tabulated once over a grid of log(x/q)
and of t* (digest §8 item 8): integrating per query would take hundreds of integrals (one per (b, r))
per partition, and
datasketch's 10-point x/q grid is too coarse for open data, where x/q easily exceeds 100. The table
is built with every integral at once (cumulative trapezoids over a t-grid, for all b, x/q and t*) and
cached per parameter set. r is the forest depth and b the number of bands probed, both chosen per
query without rebuilding anything (LSH Forest, digest §1.7).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

_RATIO_RANGE = (1e-4, 1e6)  # x/q covered by the table; beyond it the nearest end is used (see `choose`)
_N_RATIOS = 192  # log-grid points: neighbours differ by a factor of about 1.13
_N_THRESHOLDS = 100  # t* = 0.01, 0.02, ..., 1.00
_T_STEPS = 400  # t-grid of 401 points; every 4th is a threshold, so thresholds need no interpolation
_B_CHUNK = 32  # values of b integrated together: 32 x 192 x 401 float64 = 20 MB per array


@dataclass(frozen=True, eq=False)
class BandTable:
    """The best (b, r) for each (log(x/q), t*) grid point; the table is shared.

    `b[i, j]`, `r[i, j]` are the parameters for x/q = exp(log_ratios[i]) and t* = thresholds[j]. Rows
    (one x/q each, every threshold) are computed when first asked for and kept: a command-line
    search needs one row per partition (a few milliseconds) rather than the whole table (about
    0.3 s); a server fills the table as its queries go.
    """

    num_perm: int
    max_r: int
    fp_weight: float
    fn_weight: float
    log_ratios: np.ndarray
    thresholds: np.ndarray
    # b and r of every grid point, valid in the rows marked computed: dense, so that `choose` is a
    # few numpy calls per query whatever the number of partitions
    _b: np.ndarray = field(init=False, repr=False)
    _r: np.ndarray = field(init=False, repr=False)
    _computed: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        shape = (len(self.log_ratios), len(self.thresholds))
        object.__setattr__(self, "_b", np.zeros(shape, dtype=np.int32))
        object.__setattr__(self, "_r", np.zeros(shape, dtype=np.int32))
        object.__setattr__(self, "_computed", np.zeros(len(self.log_ratios), dtype=bool))

    @property
    def b(self) -> np.ndarray:
        return self._table(0)

    @property
    def r(self) -> np.ndarray:
        return self._table(1)

    def _table(self, which: int) -> np.ndarray:
        self._compute(np.arange(len(self.log_ratios)))
        out = (self._b if which == 0 else self._r).copy()
        out.flags.writeable = False
        return out

    def _compute(self, rows: np.ndarray) -> None:
        """Fill the rows not computed yet (b and r first, then the mark: a reader in another
        thread never sees a marked row unfilled)."""
        if self._computed[rows].all():
            return
        missing = np.unique(rows[~self._computed[rows]])
        b, r = _best(self.num_perm, self.max_r, (self.fp_weight, self.fn_weight), self.log_ratios[missing])
        self._b[missing], self._r[missing] = b, r
        self._computed[missing] = True

    def choose(self, uppers: np.ndarray, query_size: int, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        """(b, r) for each partition upper bound, for a query of `query_size` distinct values.

        upper/query_size is snapped to the nearest point of the log grid (neighbours differ by about 13%)
        and `threshold` to the nearest of 0.01..1.00 (below 0.01: 0.01). Ratios outside [1e-4, 1e6] take
        the parameters of the nearest end. That is harmless. Above 1e6, s < 1e-6 for every containment,
        so whatever (b, r) a set of that partition is a candidate with probability below num_perm·1e-6:
        the objective is flat there, and the partition is out of LSH's reach for this query anyway.
        Below 1e-4, no set can reach any t* >= 0.01, so FN = 0 and the end's choice (one band of
        max_r rows, the fewest candidates) stays the best.

        Returns:
            int32 arrays b and r, one entry per upper bound, with b·r <= num_perm and 1 <= r <= max_r.

        Raises:
            ValueError: `threshold` outside (0, 1], `query_size` below 1, or an upper bound below 1.
        """
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        if query_size < 1:
            raise ValueError(f"query_size must be >= 1, got {query_size}")
        bounds = np.asarray(uppers, dtype=np.float64)
        if bounds.size and not bounds.min() >= 1:
            raise ValueError(f"uppers must be >= 1, got {bounds.min()}")
        return self.lookup(bounds, query_size, threshold)

    def lookup(self, bounds: np.ndarray, query_size: int, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        """`choose` without its checks, for a caller that made them once (the index, whose bounds
        are checked when set): a query plans with it, and the checks cost as much as the lookup."""
        step = (self.log_ratios[-1] - self.log_ratios[0]) / (len(self.log_ratios) - 1)
        i = np.rint((np.log(bounds / query_size) - self.log_ratios[0]) / step)
        i = np.minimum(np.maximum(i, 0, out=i), len(self.log_ratios) - 1, out=i).astype(np.intp)
        j = min(max(math.floor(threshold * len(self.thresholds) + 0.5) - 1, 0), len(self.thresholds) - 1)
        if not self._computed[i].all():
            self._compute(i)
        return self._b[i, j], self._r[i, j]


@functools.lru_cache(maxsize=8)
def band_table(num_perm: int = 256, max_r: int = 4, fp_weight: float = 0.5, fn_weight: float = 0.5) -> BandTable:
    """The (b, r) table for these parameters, one per process (rows computed as needed; all of
    them take about 0.3 s for 256 and 4).

    For each r, s^r is computed once on the (x/q, t) grid, and P for b = 1, 2, ... by the recurrence
    P(b) = P(b-1) + (1 - P(b-1))·s^r, keeping 1 - P apart: one multiply-add per point and b, exact at
    s^r = 1 (P = 1) and accurate for P near 0 and near 1 (cheaper here than exp(b·log1p(-s^r)), whose
    float64 exp is not vectorised). Chunks of b are then integrated at once: cumulative trapezoids of
    P along t give ∫_0^t* P dt at every threshold node, plus one partial trapezoid to the exact end
    point min(1, x/q), which falls between nodes when x/q < 1 (there s = x/q). The integral of 1 - P is
    the interval's length minus that of P. Memory: a few arrays of 32 x 192 x 402 float64 (20 MB each).

    Raises:
        ValueError: num_perm below 1, max_r outside [1, num_perm], weights negative, not finite or both 0.
    """
    if num_perm < 1:
        raise ValueError(f"num_perm must be >= 1, got {num_perm}")
    if not 1 <= max_r <= num_perm:
        raise ValueError(f"max_r must be in [1, num_perm={num_perm}], got {max_r}")
    if not (math.isfinite(fp_weight) and math.isfinite(fn_weight) and fp_weight >= 0 and fn_weight >= 0):
        raise ValueError(f"fp_weight and fn_weight must be finite and >= 0, got {fp_weight}, {fn_weight}")
    if fp_weight + fn_weight == 0:
        raise ValueError("fp_weight and fn_weight must not both be 0")

    log_ratios = np.linspace(math.log(_RATIO_RANGE[0]), math.log(_RATIO_RANGE[1]), _N_RATIOS)
    thresholds = np.arange(1, _N_THRESHOLDS + 1) / _N_THRESHOLDS
    for array in (log_ratios, thresholds):
        array.flags.writeable = False
    return BandTable(num_perm, max_r, float(fp_weight), float(fn_weight), log_ratios, thresholds)


def _best(
    num_perm: int, max_r: int, weights: tuple[float, float], log_ratios: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The best (b, r) at every threshold for each of `log_ratios`: int32 arrays [ratio, threshold]."""
    fp_weight, fn_weight = weights
    n_ratios = len(log_ratios)
    thresholds = np.arange(1, _N_THRESHOLDS + 1) / _N_THRESHOLDS
    ratio = np.exp(log_ratios)
    t = np.linspace(0.0, 1.0, _T_STEPS + 1)

    end = np.minimum(1.0, ratio)  # containment cannot exceed x/q
    below = np.minimum(np.floor(end * _T_STEPS).astype(np.intp), _T_STEPS)  # last t-node <= end
    # s on the t-grid (clipped: beyond `end` it only keeps P defined) and, as one column more, at `end`.
    s = np.empty((n_ratios, _T_STEPS + 2))
    s[:, :-1] = np.clip(t / (ratio[:, None] + 1.0 - t), 0.0, 1.0)
    s[:, -1] = end / (ratio + 1.0 - end)
    reachable = thresholds[None, :] <= ratio[:, None]  # x/q >= t*: FN counts, FP stops at t*

    best = np.full((n_ratios, _N_THRESHOLDS), np.inf)
    best_b = np.zeros((n_ratios, _N_THRESHOLDS), dtype=np.int32)
    best_r = np.zeros((n_ratios, _N_THRESHOLDS), dtype=np.int32)
    p = np.empty((_B_CHUNK, *s.shape))  # P for a chunk of b, [b, ratio, t + end]
    step = np.empty_like(s)
    for r in range(1, max_r + 1):
        hit = s**r  # one band matches with probability s^r
        # P(b) = P(b-1) + (1 - P(b-1))·s^r, with 1 - P kept apart: both stay accurate near 0 and near 1.
        previous, miss = np.zeros_like(s), np.ones_like(s)
        n_bands = num_perm // r
        for b0 in range(1, n_bands + 1, _B_CHUNK):
            bands = np.arange(b0, min(b0 + _B_CHUNK, n_bands + 1))
            chunk = p[: len(bands)]
            for k in range(len(bands)):
                np.multiply(miss, hit, out=step)
                np.add(previous, step, out=chunk[k])
                miss -= step
                previous = chunk[k]
            previous = previous.copy()  # the chunk's buffer is summed in place next
            objective = _objective(chunk, (fp_weight, fn_weight), end, below, reachable)
            arg = np.argmin(objective, axis=0)
            value = np.take_along_axis(objective, arg[None], axis=0)[0]
            better = value < best
            best = np.where(better, value, best)
            best_b = np.where(better, bands[arg], best_b).astype(np.int32)
            best_r = np.where(better, r, best_r).astype(np.int32)

    return best_b, best_r


def _objective(
    p: np.ndarray, weights: tuple[float, float], end: np.ndarray, below: np.ndarray, reachable: np.ndarray
) -> np.ndarray:
    """fp_weight·FP + fn_weight·FN, [b, ratio, threshold], from P on the t-grid and, last, at each ratio's
    end point min(1, x/q) ([b, ratio, t + end]; the t part is summed in place).

    Trapezoids: ∫_0^{t_k} P dt = h·(P_0 + ... + P_k - P_k/2), as P_0 = 0 (s = 0 at t = 0); the integral
    to `end` adds one partial trapezoid from the last node below it. For t* <= x/q,
    FP + FN = F(t*) + (end - t*) - (F(end) - F(t*)); otherwise FP = F(end) and FN = 0.
    """
    fp_weight, fn_weight = weights
    h = 1.0 / _T_STEPS
    every = _T_STEPS // _N_THRESHOLDS
    rows = np.arange(p.shape[1])
    p_end, p_below = p[..., -1].copy(), p[:, rows, below]  # P itself, before the running sum
    p = p[..., :-1]
    p_nodes = p[..., every::every].copy()
    np.cumsum(p, axis=-1, out=p)
    f_threshold = h * (p[..., every::every] - p_nodes / 2)
    f_end = h * (p[:, rows, below] - p_below / 2) + (end - below * h) * (p_below + p_end) / 2
    thresholds = np.arange(1, _N_THRESHOLDS + 1) / _N_THRESHOLDS
    reached = (fp_weight + fn_weight) * f_threshold + (
        fn_weight * (end[:, None] - thresholds) - fn_weight * f_end[..., None]
    )
    return np.where(reachable, reached, fp_weight * f_end[..., None])
