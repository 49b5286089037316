"""Joinable row pairs from rare q-grams (thesis §4.4.1, Algorithm 3).

The operators keep local q-grams, so a q-gram that occurs in one distinct value of a source column
and one distinct value of a target key column (a 1-to-1 match) almost always marks a true pair; an
n-to-m match scores 1/(n·m). The thesis finds, for each suffix of a value, the longest prefix still
matched in the other column with a suffix array per column (binary search; the match count never
grows with the prefix).

Here the same counts come from sorted arrays of hashed q-grams, one per column, for every q in
[q_min, q_max] (q ≥ 3, as the thesis enforces: shorter q-grams match everything). A q-gram's
number of distinct values in a column is a range in its sorted array, found by binary search
(`np.searchsorted`), which is what the suffix array's probe gives; building sorted hash arrays is a
few numpy sorts instead of a suffix-array construction in Python, and the probes of every value of
a column run as one vectorized call instead of one Python loop per suffix. The difference: q stops
at `q_max`. A q-gram matched 1-to-1 scores 1 and no longer one can beat it, so the cap only costs
pairs whose values share nothing rare shorter than `q_max` characters (default 12).

One more "q-gram" per value departs from the thesis: the sorted set of its alphanumeric tokens
(of a value with two or more). Reformatting that reorders fields and changes every separator
("1967-07-01" and "07/01/1967") leaves no rare q-gram in common, but the same token set.

Values are compared lower-cased (the operators change case) and truncated to `max_chars`.
Hash collisions (64-bit polynomial hashes) are possible and harmless: a pair is only an example
for the program search, which checks it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

_BASE = np.uint64(0x100000001B3)
_Q_SALT = np.uint64(0x9E3779B97F4A7C15)
_TOKENS = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class ColumnGrams:
    """The distinct q-grams of a column's distinct values: `hashes` sorted, `value` the distinct
    value holding each (a q-gram held by n values appears n times), and `count` per entry (n)."""

    hashes: np.ndarray  # uint64, sorted
    value: np.ndarray  # int64: index into the column's distinct values
    count: np.ndarray  # int64: distinct values holding that q-gram

    @property
    def nbytes(self) -> int:
        return self.hashes.nbytes + self.value.nbytes + self.count.nbytes


@dataclass(frozen=True)
class ValuePairs:
    """Candidate joinable value pairs of one (source column, target column): for each source value
    its best target value, `score` = max 1/(n·m) over the q-grams they share and `shared` = how many
    q-grams reach that score."""

    source: np.ndarray  # int64 distinct-value indexes
    target: np.ndarray
    score: np.ndarray  # float64
    shared: np.ndarray  # int64


def column_grams(values: Sequence[str], *, q_min: int = 3, q_max: int = 12, max_chars: int = 128) -> ColumnGrams:
    """The q-gram index of a column's distinct values (no nulls: callers drop them)."""
    if q_min < 3:
        raise ValueError(f"q_min must be at least 3 (shorter q-grams match everything), got {q_min}")
    if q_max < q_min:
        raise ValueError(f"q_max must be at least q_min={q_min}, got {q_max}")
    n = len(values)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return ColumnGrams(np.zeros(0, np.uint64), empty, empty)
    width = max(1, min(max_chars, max(len(v) for v in values)))
    text = np.array([v.lower()[:width] for v in values], dtype=f"<U{width}")
    codes = text.view(np.uint32).reshape(n, width).astype(np.uint64)
    lengths = np.char.str_len(text).astype(np.int64)
    hashes_out, values_out = [], []
    rolling = np.zeros((n, width), np.uint64)  # rolling[:, i]: hash of the q-gram starting at i
    power = np.uint64(1)
    with np.errstate(over="ignore"):
        for q in range(1, q_max + 1):
            if q > width:
                break
            rolling[:, : width - q + 1] += codes[:, q - 1 :] * power
            power = power * _BASE
            if q < q_min:
                continue
            starts = width - q + 1
            valid = np.arange(starts)[None, :] + q <= lengths[:, None]
            rows, cols = np.nonzero(valid)
            hashes_out.append(rolling[rows, cols] ^ (np.uint64(q) * _Q_SALT))
            values_out.append(rows.astype(np.int64))
    tokens = _token_sets(values)
    if len(tokens[0]):
        hashes_out.append(tokens[1])
        values_out.append(tokens[0])
    if not hashes_out:
        empty = np.zeros(0, np.int64)
        return ColumnGrams(np.zeros(0, np.uint64), empty, empty)
    hashes = np.concatenate(hashes_out)
    value = np.concatenate(values_out)
    # one entry per (q-gram, value): a value holding a q-gram twice counts once. A stable sort by
    # hash keeps equal hashes in generation order (one q, rows ascending), so a value's repeats
    # of a q-gram are adjacent
    order = np.argsort(hashes, kind="stable")
    hashes, value = hashes[order], value[order]
    keep = np.ones(len(hashes), bool)
    keep[1:] = (hashes[1:] != hashes[:-1]) | (value[1:] != value[:-1])
    hashes, value = hashes[keep], value[keep]
    _, runs = equal_runs(hashes)
    return ColumnGrams(hashes, value, np.repeat(runs, runs).astype(np.int64))


def equal_runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, length) of each run of equal values of the sorted array `keys`."""
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1]))) if len(keys) else np.zeros(0, np.int64)
    return starts, np.diff(np.append(starts, len(keys)))


class GramMemo:
    """Column q-gram indexes already cut, looked up by the column's distinct values (the key is the
    values themselves, so a hit is exact), for one run of many `autojoin` calls: a publish learns
    its lists' pairs, `search transform` tries a query against many tables. `autojoin` cuts each
    column in both directions, and a column is in several pairs; whenever it is sampled whole (a
    table of a few hundred rows, most of a real lake) the values are the same each time. The
    oldest entries go first once the held arrays pass `max_bytes`."""

    def __init__(self, max_bytes: int = 256 << 20) -> None:
        self.max_bytes = max_bytes
        self.hits = self.misses = 0
        self._held: dict[tuple[Any, ...], ColumnGrams] = {}
        self._bytes = 0

    def column_grams(self, values: Sequence[str], *, q_min: int, q_max: int, max_chars: int) -> ColumnGrams:
        """`column_grams` of these values, cut once per run."""
        key = (q_min, q_max, max_chars, tuple(values))
        found = self._held.get(key)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        found = column_grams(values, q_min=q_min, q_max=q_max, max_chars=max_chars)
        size = found.nbytes
        while self._held and self._bytes + size > self.max_bytes:
            self._bytes -= self._held.pop(next(iter(self._held))).nbytes
        if size <= self.max_bytes:
            self._held[key] = found
            self._bytes += size
        return found


def match_values(source: ColumnGrams, target: ColumnGrams, *, max_nm: int = 4) -> ValuePairs:
    """Each source value's best-matching target value through q-grams of n·m ≤ `max_nm`."""
    s_keep = source.count <= max_nm
    t_keep = target.count <= max_nm
    s_hash, s_val, s_cnt = source.hashes[s_keep], source.value[s_keep], source.count[s_keep]
    t_hash, t_val, t_cnt = target.hashes[t_keep], target.value[t_keep], target.count[t_keep]
    lo = np.searchsorted(t_hash, s_hash, side="left")
    hi = np.searchsorted(t_hash, s_hash, side="right")
    reps = hi - lo
    has = reps > 0
    if not has.any():
        empty = np.zeros(0, np.int64)
        return ValuePairs(empty, empty, np.zeros(0), empty)
    s_idx = np.repeat(np.nonzero(has)[0], reps[has])
    starts = np.repeat(lo[has], reps[has])
    within = np.arange(len(s_idx)) - np.repeat(np.cumsum(reps[has]) - reps[has], reps[has])
    t_idx = starts + within
    nm = s_cnt[s_idx] * t_cnt[t_idx]
    ok = nm <= max_nm
    src, tgt, score = s_val[s_idx[ok]], t_val[t_idx[ok]], 1.0 / nm[ok]
    # per (source, target) value pair: the best score and how many q-grams reach it
    order = np.lexsort((-score, tgt, src))
    src, tgt, score = src[order], tgt[order], score[order]
    new_pair = np.ones(len(src), bool)
    new_pair[1:] = (src[1:] != src[:-1]) | (tgt[1:] != tgt[:-1])
    starts_idx = np.nonzero(new_pair)[0]
    best = score[starts_idx]
    pair_of = np.cumsum(new_pair) - 1
    at_best = score == best[pair_of]
    shared = np.bincount(pair_of[at_best], minlength=len(starts_idx)).astype(np.int64)
    p_src, p_tgt = src[starts_idx], tgt[starts_idx]
    # per source value: its best target (score, then shared q-grams)
    order = np.lexsort((-shared, -best, p_src))
    p_src, p_tgt, best, shared = p_src[order], p_tgt[order], best[order], shared[order]
    first = np.ones(len(p_src), bool)
    first[1:] = p_src[1:] != p_src[:-1]
    return ValuePairs(p_src[first], p_tgt[first], best[first], shared[first])


def _token_sets(values: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(value index, hash of its sorted lower-cased token set) for values of two or more tokens."""
    import mmh3  # deferred: only the token-set grams hash strings

    index, hashes = [], []
    for i, value in enumerate(values):
        tokens = sorted(set(_TOKENS.findall(value.lower())))
        if len(tokens) >= 2:
            index.append(i)
            hashes.append(mmh3.hash64("\x00".join(tokens), seed=7, signed=False)[0])
    return np.asarray(index, np.int64), np.asarray(hashes, np.uint64)
