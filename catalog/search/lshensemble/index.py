"""The in-memory LSH Ensemble a search runs on: signatures grouped by size partition, with band
keys built per band length r on first use (one array over all partitions, each partition's keys
moved into a key space of its own, grouped into runs by their top bits and looked up run by run).

Why band keys are built here rather than read from the catalog: a query picks its band length r
per partition (1..max_r), so every r needs its own bands (num_perm/1 + num_perm/2 + ... keys per
column, 533 at 256 permutations). Publishing them would multiply the catalog by that; they are a
pure function of the signatures, derived in numpy in well under a second for 100,000 columns, and
only for the lengths r queries actually use.

A band key is a 64-bit hash of the band's number and its r values (`band_keys`); two columns share
a key when their bands are equal (or, with probability about n·2^-64, by a collision, which only
adds a candidate that verification drops). A band key never misses an equal band, so the LSH guarantee
is the thesis's: a column in partition i is a candidate with probability 1 - (1 - s^r)^b where s
is its Jaccard similarity with the query, and s >= s*_i whenever its containment is >= t*.

The index changes in place as the lake does: `add` puts new columns into the partitions of their
sizes (raising the last bound first when a column is larger than every bound: a member above its
partition's bound could be missed), merging their keys into the levels already built; `remove`
marks columns dead. A repartition (`with_uppers`) re-buckets the same signatures.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from catalog.core.hashing import splitmix64
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

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
# A partition's keys are its rows' band keys plus p times this odd constant, so one array
# per band length r serves every partition (equal keys: same partition and same band, or a 2^-64
# coincidence that only adds a candidate).
_PARTITION_SALT = np.uint64(0xD6E8FEB86659FD93)
_LOG_MISS = float(np.log1p(-MIN_PROBABILITY))  # numpy's log1p, as per query (math's differs by an ulp)
_MAX_BANDS = 1 << 30
# Candidates are made distinct with a mask over all rows once there are more than 1/_MASK_RATIO of
# the rows (O(n) but no sort), by sorting below that.
_MASK_RATIO = 64
# Keys per run of equal top bits in a level, on average (see `_Level`).
_KEYS_PER_RUN = 4


@functools.lru_cache(maxsize=64)
def _band_seeds(n_bands: int) -> np.ndarray:
    """The starting value of bands 0..n_bands-1 (read-only; cached: a query asks for them every time)."""
    seeds = (np.arange(n_bands, dtype=np.uint64) + np.uint64(1)) * _GOLDEN
    seeds.flags.writeable = False
    return seeds


@functools.lru_cache(maxsize=64)
def _coefficients(r: int) -> np.ndarray:
    """r odd 64-bit multipliers, one per position in a band (splitmix64 outputs with the low bit set)."""
    with np.errstate(over="ignore"):
        out = splitmix64((np.arange(r, dtype=np.uint64) + np.uint64(1)) * _PARTITION_SALT) | np.uint64(1)
    out.flags.writeable = False
    return out


def band_keys(signatures: np.ndarray, r: int, n_bands: int) -> np.ndarray:
    """(n, n_bands) uint64 keys of bands 0..n_bands-1 of length r of each signature row.

    A key is the band's seed plus a dot product of its r values with fixed odd multipliers, mod
    2^64: one matrix product for every band and every r, where mixing value by value took a dozen
    numpy calls per position (it dominated a query's time). Equal bands get equal keys; unequal
    ones collide only where the weighted difference of their values vanishes mod 2^64, which for
    values below 2^31 and one odd multiplier is impossible at r = 1 and about as likely as 2^-64
    for longer bands: a collision only adds a candidate that verification drops."""
    sig = np.atleast_2d(signatures)[:, : n_bands * r].astype(np.uint64).reshape(-1, n_bands, r)
    with np.errstate(over="ignore"):
        return sig @ _coefficients(r) + _band_seeds(n_bands)


def partition_keys(keys: np.ndarray, parts: np.ndarray) -> np.ndarray:
    """Band keys moved into their partition's key space (see `_PARTITION_SALT`)."""
    with np.errstate(over="ignore"):
        return keys + parts.astype(np.uint64) * _PARTITION_SALT


@dataclass(frozen=True)
class Plan:
    """Per partition: bands b of length r, and whether LSH probes it or an exact path answers it
    (a query the exact path serves at all takes every partition from it: see `plan`)."""

    b: np.ndarray
    r: np.ndarray
    probed: np.ndarray  # bool
    exact: np.ndarray  # bool


def _bands_for(s: np.ndarray, r: np.ndarray | int) -> np.ndarray:
    """Bands of length r needed for 1 - (1 - s^r)^b >= MIN_PROBABILITY (2^30 when s^r ~ 0).

    s > 0 here (a positive threshold over a positive ratio), so s^r > 0 unless it underflows; the
    logarithm is kept below -1e-300 so that the quotient is then huge rather than a division by
    zero (no `np.errstate` per query), and the bound caps it."""
    hit = np.minimum(s**r, 1.0 - 1e-12)
    need = _LOG_MISS / np.minimum(np.log1p(-hit), -1e-300)
    return np.ceil(np.minimum(need, _MAX_BANDS)).astype(np.int64)


def required_overlap(size: int, threshold: float) -> int:
    """The tokens a column must share with a query of `size` tokens to hold `threshold` of it."""
    return math.ceil(threshold * size - 1e-9)


def prefix_length(n_known: int, size: int, threshold: float) -> int:
    """How many of the query's rarest lake tokens a column must share one of to hold `threshold`
    of the query's `size` tokens, `n_known` of which the lake holds (pigeonhole: a column missing
    all of the first n_known - need + 1 holds at most need - 1); 0 when no column can."""
    return max(0, n_known - required_overlap(size, threshold) + 1)


def rarest(frequency: np.ndarray, n: int) -> np.ndarray:
    """Positions of the n smallest frequencies (non-negative integers), ties taken in position
    order: the set that `np.argsort(frequency, kind="stable")[:n]` starts with, in position order,
    in linear time. A large query's exact path needs thousands of its tokens; sorting them all
    cost more than the rest of the query. The n-th smallest comes from a count of each frequency
    (np.partition degrades on the few distinct values real lists have: 100x slower on a column
    whose tokens are in one or two columns each); frequencies far above the query's size are
    sorted instead, as counting them would cost more."""
    if n >= len(frequency):
        return np.arange(len(frequency))
    if n <= 0:
        return np.empty(0, np.intp)
    if int(frequency.max()) > 8 * len(frequency) + 4096:
        return np.sort(np.argsort(frequency, kind="stable")[:n])
    kth = int(np.searchsorted(np.cumsum(np.bincount(frequency)), n))  # the least f with n at or below it
    keep = frequency < kth
    keep[np.flatnonzero(frequency == kth)[: n - int(np.count_nonzero(keep))]] = True
    return np.flatnonzero(keep)


@dataclass
class _Level:
    """The bands of one length r of every partition: keys (moved into their partition's key
    space) grouped by their top bits into runs, with the row each key belongs to, and where each
    run starts. One array for all partitions means one lookup per query and r, whatever the number
    of partitions probed; the runs make it two memory reads per key where a binary search over
    millions of keys made two dozen, mostly cache misses.

    Keys are grouped, not sorted: a lookup compares every key of its run, so the order inside a
    run does not matter, and grouping is one sort of (run, position) packed into 64 bits (numpy's
    vectorised sort) where an argsort of the keys took four times as long (14 s for the single-value
    bands of 100,000 columns): the level is built when a process first searches, so this is what
    a one-shot `juncture search contain` waits for."""

    keys: np.ndarray  # uint64, grouped by run (key >> shift ascending), in row order inside a run
    rows: np.ndarray  # int64 row of each key
    shift: np.uint64  # a key's run is key >> shift
    starts: np.ndarray  # int64: run k is keys[starts[k]:starts[k + 1]]

    @staticmethod
    def of(
        signatures: np.ndarray,
        rows: np.ndarray,
        parts: np.ndarray,
        r: int,
        n_bands: int,
        shift: np.uint64 | None = None,
    ) -> _Level:
        """The level of these rows (runs of `shift`, else of a width giving about _KEYS_PER_RUN keys each)."""
        keys = partition_keys(band_keys(signatures, r, n_bands), parts[:, None]).ravel()
        if shift is None:
            shift = np.uint64(64 - min(max(1, (len(keys) // _KEYS_PER_RUN).bit_length()), 32))
        run = keys >> shift
        order = _grouped_order(run)
        counts = np.bincount(run.astype(np.intp), minlength=1 << (64 - int(shift)))
        starts = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        return _Level(keys[order], np.repeat(rows, n_bands)[order], shift, starts)

    def find(self, query_keys: np.ndarray) -> np.ndarray:
        """The rows holding any of these keys (with repeats): every key of each query key's run
        is compared with it (a few per run, plus the run of an equal band many columns share)."""
        run = (query_keys >> self.shift).astype(np.intp)
        lo = self.starts[run]
        lengths = self.starts[run + 1] - lo
        total = int(lengths.sum())
        if total == 0:
            return np.empty(0, np.int64)
        at = np.repeat(lo - np.cumsum(lengths) + lengths, lengths) + np.arange(total)
        return self.rows[at[self.keys[at] == np.repeat(query_keys, lengths)]]

    def merged(self, other: _Level) -> _Level:
        """Both levels' keys in one, `other` made with this level's runs (an insert: cheaper than
        grouping the whole level again): each new key goes to the end of its run, and the runs'
        starts add up."""
        at = self.starts[(other.keys >> self.shift).astype(np.intp) + 1]
        keys, rows = np.insert(self.keys, at, other.keys), np.insert(self.rows, at, other.rows)
        return _Level(keys, rows, self.shift, self.starts + other.starts)


def _grouped_order(run: np.ndarray) -> np.ndarray:
    """The positions of `run` (values below 2^32) ordered by run and then by position: a stable
    argsort, made as one plain sort of run << 32 | position when positions fit in 32 bits."""
    n = len(run)
    if n >= 1 << 32:
        return np.argsort(run, kind="stable")
    packed = (run.astype(np.uint64) << np.uint64(32)) | np.arange(n, dtype=np.uint64)
    packed.sort()
    return (packed & np.uint64(0xFFFFFFFF)).astype(np.int64)


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
    _levels: dict[int, _Level] = field(init=False, default_factory=dict)  # by band length r

    def __post_init__(self) -> None:
        self.signatures = np.ascontiguousarray(self.signatures, dtype=np.uint32).reshape(-1, self.spec.num_perm)
        self.sizes = np.asarray(self.sizes, dtype=np.int64)
        if len(self.sizes) != len(self.signatures):
            raise ValueError(f"{len(self.sizes)} sizes for {len(self.signatures)} signatures")
        if (self.sizes < 1).any():
            raise ValueError("an indexed column has at least one distinct token")
        self.uppers = raised(np.asarray(self.uppers, dtype=np.int64), self.sizes)  # checked here, not per query
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
        its columns can hold that many of the query's values.

        When one partition is exact, every partition is: the exact path reads its posting lists
        whole either way (the catalog reads them in one query and keeps the rows of the partitions
        asked for), so the others cost only that filter, and their answer has no false negative
        and fewer candidates than the bands give (200 queries on the portal's real lake and on a
        100,000-column Zipf lake, t = 0.5/0.7/0.9: candidates 13-42% fewer, the p50 of making
        them 37-50% lower, the p95 unchanged). b and r stay those of the bands, for a caller
        without an exact path (`candidates` then probes every partition)."""
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        num_perm, uppers = self.spec.num_perm, self.uppers.astype(np.float64)
        b, r = self.table.lookup(uppers, size, min(threshold, TUNING_MAX_THRESHOLD))
        reachable = uppers >= threshold * size
        s = threshold / (uppers / size + 1.0 - threshold)  # Jaccard of a worst-case answer
        b = np.maximum(b, _bands_for(s, r))  # more bands of the tuned length where the tuning falls short
        short = b * r > num_perm
        if short.any():  # else single-value bands
            b = np.where(short, _bands_for(s, 1), b)
            r = np.where(short, 1, r)
        exact = reachable if (reachable & (b > num_perm)).any() else np.zeros_like(reachable)
        b = np.minimum(b, num_perm // r)
        return Plan(b, r, reachable & ~exact, exact)

    def candidates(
        self,
        signature: np.ndarray,
        size: int,
        threshold: float,
        *,
        exact: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> np.ndarray:
        """Rows that may hold `threshold` of the query, ascending, alive, each at least that many
        tokens large: those sharing a band with it in a probed partition, or what
        `exact(partitions)` returns for the partitions the plan leaves to the exact path (rows of
        those partitions sharing a prefix token with the query, from an inverted index). Without
        `exact`, every partition is probed (best effort)."""
        if len(self.uppers) == 0 or size < 1:
            return np.empty(0, np.int64)
        plan = self.plan(size, threshold)
        if exact is not None and plan.exact.any():
            rows = np.asarray(exact(np.flatnonzero(plan.exact)), dtype=np.int64)
            found = [rows[plan.exact[self.parts[rows]]]]
        else:
            found = self._probe(signature, plan, plan.probed | plan.exact)
        return self._distinct_alive(found, required_overlap(size, threshold))

    def _distinct_alive(self, found: list[np.ndarray], need: int) -> np.ndarray:
        """The live rows of at least `need` tokens among `found`, ascending, each once (a smaller
        column cannot hold `need` of the query's tokens): sorted (np.unique) when they are few,
        marked in a mask over every row when they are many (a common value's posting lists, or
        single-value bands of a small query, give thousands: sorting them cost more than the rest
        of the query)."""
        if not found:
            return np.empty(0, np.int64)
        rows = np.concatenate(found) if len(found) > 1 else found[0]
        if len(rows) * _MASK_RATIO < len(self.alive):
            rows = np.unique(rows)
            return rows[self.alive[rows] & (self.sizes[rows] >= need)]
        mask = np.zeros(len(self.alive), dtype=bool)
        mask[rows] = True
        return np.flatnonzero(mask & self.alive & (self.sizes >= need))

    def _probe(self, signature: np.ndarray, plan: Plan, probed: np.ndarray) -> list[np.ndarray]:
        """Rows sharing a band with the query in the probed partitions (with repeats): per band
        length r, the query's keys of every probed partition using r are made in one go (the
        first b of that partition's bands, moved into its key space) and searched in one go; the
        numpy calls per query depend on the lengths used (one or two), not on the partitions."""
        parts = np.flatnonzero(probed)
        if len(parts) == 0:
            return []
        b, r = plan.b[parts], plan.r[parts]
        lengths = set(r.tolist())
        found = []
        for length in sorted(lengths):
            mine = (parts, b) if len(lengths) == 1 else (parts[r == length], b[r == length])
            keys = band_keys(signature, length, int(mine[1].max()))[0]
            band = np.arange(int(mine[1].sum())) - np.repeat(np.cumsum(mine[1]) - mine[1], mine[1])
            found.append(self._level(length).find(partition_keys(keys[band], np.repeat(mine[0], mine[1]))))
        return found

    def _level(self, r: int) -> _Level:
        """The bands of length r of every live row (built on first use, kept up to date by `add`)."""
        level = self._levels.get(r)
        if level is None:
            rows = np.flatnonzero(self.alive)
            n_bands = self.spec.num_perm // r
            level = self._levels[r] = _Level.of(self.signatures[rows], rows, self.parts[rows], r, n_bands)
        return level

    def add(self, signatures: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Index more columns; returns their rows. A column larger than every bound raises the
        last bound first (no level changes: the rows already indexed keep their partitions)."""
        signatures = np.asarray(signatures, dtype=np.uint32).reshape(-1, self.spec.num_perm)
        sizes = np.asarray(sizes, dtype=np.int64)
        if (sizes < 1).any():
            raise ValueError("an indexed column has at least one distinct token")
        self.uppers = raised(self.uppers, sizes)
        start = len(self.sizes)
        rows = np.arange(start, start + len(sizes), dtype=np.int64)
        parts = partition_of(sizes, self.uppers).astype(np.int64)
        self.signatures = np.concatenate([self.signatures, signatures])
        self.sizes = np.concatenate([self.sizes, sizes])
        self.parts = np.concatenate([self.parts, parts])
        self.alive = np.concatenate([self.alive, np.ones(len(sizes), dtype=bool)])
        for r, level in list(self._levels.items()):
            added = _Level.of(signatures, rows, parts, r, self.spec.num_perm // r, level.shift)
            self._levels[r] = level.merged(added)
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
