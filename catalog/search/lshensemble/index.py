"""The in-memory LSH Ensemble a search runs on: signatures grouped by size partition, with band
keys built per (partition, r) on first use and kept sorted for `np.searchsorted`.

Why band keys are built here rather than read from the catalog: a query picks its band length r
per partition (1..max_r), so every r needs its own bands (num_perm/1 + num_perm/2 + ... keys per
column, 533 at 256 permutations). Publishing them would multiply the catalog by that; they are a
pure function of the signatures, derived in numpy in well under a second for 100,000 columns, and
only for the (partition, r) pairs queries actually use.

A band key is a 64-bit mix of the band's number and its r values; two columns share a key when
their bands are equal (or, with probability about n·2^-64, by a collision, which only adds a
candidate that verification drops). A band key never misses an equal band, so the LSH guarantee
is the thesis's: a column in partition i is a candidate with probability 1 - (1 - s^r)^b where s
is its Jaccard similarity with the query, and s >= s*_i whenever its containment is >= t*.

The index changes in place as the lake does: `add` puts new columns into the partitions of their
sizes (raising the last bound first when a column is larger than every bound: a member above its
partition's bound could be missed), merging their keys into the levels already built; `remove`
marks columns dead. A repartition (`with_uppers`) re-buckets the same signatures.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from catalog.core.minhash import MinHashSpec
from catalog.search.lshensemble.partitions import partition_of, raised
from catalog.search.lshensemble.tuning import BandTable, band_table

# (b, r) for thresholds above this are tuned as for this one: the objective's false-negative range
# [t, 1] shrinks to nothing as t nears 1, so it would pick the fewest candidates (one band of
# max_r) and miss supersets of the query; the extra candidates a lower tuning gives are dropped
# by verification.
TUNING_MAX_THRESHOLD = 0.95
# Least probability that LSH finds a worst-case answer in a partition it probes (else: exact path).
MIN_PROBABILITY = 0.99

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer (numpy's uint64 arithmetic wraps, as the finalizer expects)."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def band_keys(signatures: np.ndarray, r: int, n_bands: int) -> np.ndarray:
    """(n, n_bands) uint64 keys of bands 0..n_bands-1 of length r of each signature row."""
    sig = np.atleast_2d(signatures)[:, : n_bands * r].astype(np.uint64).reshape(-1, n_bands, r)
    keys = np.broadcast_to((np.arange(n_bands, dtype=np.uint64) + np.uint64(1)) * _GOLDEN, sig.shape[:2]).copy()
    with np.errstate(over="ignore"):
        for j in range(r):
            keys = _mix(keys ^ sig[:, :, j])
    return keys


@dataclass(frozen=True)
class Plan:
    """Per partition: bands b of length r, and whether LSH probes it or an exact path answers it."""

    b: np.ndarray
    r: np.ndarray
    probed: np.ndarray  # bool
    exact: np.ndarray  # bool


def _bands_for(s: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Bands of length r needed for 1 - (1 - s^r)^b >= MIN_PROBABILITY (a huge number when s^r ~ 0)."""
    hit = np.clip(np.asarray(s, dtype=np.float64) ** r, 0.0, 1.0)
    with np.errstate(divide="ignore"):
        need = np.log1p(-MIN_PROBABILITY) / np.log1p(-np.minimum(hit, 1.0 - 1e-12))
    return np.ceil(np.nan_to_num(need, nan=np.inf, posinf=np.inf).clip(1, 1 << 30)).astype(np.int64)


def prefix_length(n_known: int, size: int, threshold: float) -> int:
    """How many of the query's rarest lake tokens a column must share one of to hold `threshold`
    of the query's `size` tokens, `n_known` of which the lake holds (pigeonhole: a column missing
    all of the first n_known - need + 1 holds at most need - 1); 0 when no column can."""
    need = math.ceil(threshold * size - 1e-9)
    return max(0, n_known - need + 1)


@dataclass
class _Level:
    """One partition's bands of one length r: keys sorted, with the row each key belongs to."""

    keys: np.ndarray  # uint64, ascending
    rows: np.ndarray  # int64 row of each key

    def find(self, query_keys: np.ndarray) -> np.ndarray:
        lo = np.searchsorted(self.keys, query_keys, "left")
        hi = np.searchsorted(self.keys, query_keys, "right")
        hit = hi > lo
        if not hit.any():
            return np.empty(0, np.int64)
        lo, hi = lo[hit], hi[hit]
        lengths = hi - lo
        starts = np.repeat(lo - np.cumsum(lengths) + lengths, lengths)
        return self.rows[starts + np.arange(lengths.sum())]

    def merged(self, keys: np.ndarray, rows: np.ndarray) -> _Level:
        order = np.argsort(keys, kind="stable")
        keys, rows = keys[order], rows[order]
        at = np.searchsorted(self.keys, keys, "right")
        return _Level(np.insert(self.keys, at, keys), np.insert(self.rows, at, rows))


@dataclass
class EnsembleIndex:
    """Signatures of the indexed columns with their sizes and partitions; rows are positions in
    these arrays (a caller maps them to column ids)."""

    spec: MinHashSpec
    uppers: np.ndarray  # partition upper bounds, ascending; every member's size <= its bound
    signatures: np.ndarray  # (n, num_perm) uint32
    sizes: np.ndarray  # int64 distinct-token count per row
    max_r: int = 4
    fp_weight: float = 0.5
    fn_weight: float = 0.5
    parts: np.ndarray = field(init=False)
    alive: np.ndarray = field(init=False)
    _levels: dict[tuple[int, int], _Level] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.signatures = np.ascontiguousarray(self.signatures, dtype=np.uint32).reshape(-1, self.spec.num_perm)
        self.sizes = np.asarray(self.sizes, dtype=np.int64)
        if len(self.sizes) != len(self.signatures):
            raise ValueError(f"{len(self.sizes)} sizes for {len(self.signatures)} signatures")
        if (self.sizes < 1).any():
            raise ValueError("an indexed column has at least one distinct token")
        self.uppers = raised(np.asarray(self.uppers, dtype=np.int64), self.sizes) if len(self.sizes) else self.uppers
        self.uppers = np.asarray(self.uppers, dtype=np.int64)
        self.parts = partition_of(self.sizes, self.uppers).astype(np.int64)
        self.alive = np.ones(len(self.sizes), dtype=bool)

    @property
    def table(self) -> BandTable:
        return band_table(self.spec.num_perm, self.max_r, self.fp_weight, self.fn_weight)

    def __len__(self) -> int:
        return int(self.alive.sum())

    def plan(self, size: int, threshold: float) -> Plan:
        """How a query of `size` distinct tokens searches at `threshold`: (b, r) per partition, and
        which partitions LSH probes or leaves to an exact path.

        (b, r) start from the thesis's tuning (least false-positive plus false-negative area), which
        balances the two and finds an answer at exactly the threshold with probability near 1/2.
        Recall is what a user of `search contain` is promised, so b is then raised until a
        worst-case answer (containment exactly `threshold`, size at the partition's bound) is a
        candidate with probability at least `MIN_PROBABILITY`; every other answer (more contained,
        or smaller) has a higher Jaccard and is found more surely. When bands of the tuned length
        cannot reach that within num_perm, single-value bands are tried; when those cannot either,
        the partition is *exact*: a small query against huge columns has a Jaccard of about
        t·|Q|/|X|, below anything MinHash can see (the thesis's own pitfall: route such queries to
        an exact method). A partition whose bound is below threshold * size is skipped: none of
        its columns can hold that many of the query's values."""
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        b, r = self.table.choose(self.uppers, size, min(threshold, TUNING_MAX_THRESHOLD))
        reachable = self.uppers >= threshold * size
        s = threshold / (self.uppers / size + 1.0 - threshold)  # Jaccard of a worst-case answer
        b = np.maximum(b, _bands_for(s, r))  # more bands of the tuned length where the tuning falls short
        short = b * r > self.spec.num_perm
        b = np.where(short, _bands_for(s, np.ones_like(r)), b)  # else single-value bands
        r = np.where(short, 1, r)
        exact = reachable & (b > self.spec.num_perm)
        b = np.minimum(b, self.spec.num_perm // r)
        return Plan(b, r, reachable & ~exact, exact)

    def candidates(
        self,
        signature: np.ndarray,
        size: int,
        threshold: float,
        *,
        exact: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> np.ndarray:
        """Rows that may hold `threshold` of the query, ascending, alive only: those sharing a band
        with it in a probed partition, plus what `exact(partitions)` returns for the partitions
        left to an exact path (rows of those partitions sharing a prefix token with the query,
        from an inverted index). Without `exact`, those partitions are probed too (best effort)."""
        if len(self.uppers) == 0 or size < 1:
            return np.empty(0, np.int64)
        plan = self.plan(size, threshold)
        probed = plan.probed if exact is not None else plan.probed | plan.exact
        found = []
        for p in np.flatnonzero(probed):
            level = self._level(int(p), int(plan.r[p]))
            if len(level.keys):
                found.append(level.find(band_keys(signature, int(plan.r[p]), int(plan.b[p]))[0]))
        if exact is not None and plan.exact.any():
            rows = np.asarray(exact(np.flatnonzero(plan.exact)), dtype=np.int64)
            found.append(rows[np.isin(self.parts[rows], np.flatnonzero(plan.exact))])
        if not found:
            return np.empty(0, np.int64)
        rows = np.unique(np.concatenate(found))
        return rows[self.alive[rows]]

    def _level(self, p: int, r: int) -> _Level:
        level = self._levels.get((p, r))
        if level is None:
            rows = np.flatnonzero((self.parts == p) & self.alive)
            n_bands = self.spec.num_perm // r
            keys = band_keys(self.signatures[rows], r, n_bands).ravel()
            owners = np.repeat(rows, n_bands)
            order = np.argsort(keys, kind="stable")
            level = self._levels[(p, r)] = _Level(keys[order], owners[order])
        return level

    def add(self, signatures: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Index more columns; returns their rows. A column larger than every bound raises the
        last bound first (the levels of that partition are dropped: its (b, r) change)."""
        signatures = np.asarray(signatures, dtype=np.uint32).reshape(-1, self.spec.num_perm)
        sizes = np.asarray(sizes, dtype=np.int64)
        if (sizes < 1).any():
            raise ValueError("an indexed column has at least one distinct token")
        uppers = raised(self.uppers, sizes)
        if len(self.uppers) and uppers[-1] != self.uppers[-1]:
            last = len(uppers) - 1
            self._levels = {key: level for key, level in self._levels.items() if key[0] != last}
        self.uppers = uppers
        start = len(self.sizes)
        rows = np.arange(start, start + len(sizes), dtype=np.int64)
        parts = partition_of(sizes, self.uppers).astype(np.int64)
        self.signatures = np.concatenate([self.signatures, signatures])
        self.sizes = np.concatenate([self.sizes, sizes])
        self.parts = np.concatenate([self.parts, parts])
        self.alive = np.concatenate([self.alive, np.ones(len(sizes), dtype=bool)])
        for (p, r), level in list(self._levels.items()):
            mine = rows[parts == p]
            if len(mine):
                n_bands = self.spec.num_perm // r
                keys = band_keys(self.signatures[mine], r, n_bands).ravel()
                self._levels[(p, r)] = level.merged(keys, np.repeat(mine, n_bands))
        return rows

    def remove(self, rows: np.ndarray) -> None:
        """Stop answering with these rows (their keys stay until a repartition)."""
        self.alive[np.asarray(rows, dtype=np.int64)] = False

    def with_uppers(self, uppers: np.ndarray) -> EnsembleIndex:
        """The live columns re-bucketed under new bounds (a repartition: no re-hashing)."""
        keep = self.alive
        return EnsembleIndex(
            self.spec, uppers, self.signatures[keep], self.sizes[keep], self.max_r, self.fp_weight, self.fn_weight
        )
