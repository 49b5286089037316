"""The best column mapping of one table: verified (query tuple, row) pairs -> the mapping of the key
columns to the table's columns that matches the most distinct tuples (`search nary`'s verification).

A pair's row may hold a key value in several columns, and every injective choice of them is a
mapping the pair matches. Rows of a wide table of 0/1 columns hold `0` in a thousand columns: one
(0, 0) tuple then matches a million mappings in one row, so the choices are enumerated with numpy
in runs of `BLOCK` matches (a pair of more split across runs), never as Python tuples: memory is
bounded by a run and the distinct matches kept. Matches under different columns of the initial
value are different mappings, so each such column's matches are counted on their own; within
one, the distinct (mapping, tuple) matches of the runs so far are kept.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

BLOCK = 4_000_000  # matches enumerated at once


@dataclass(frozen=True)
class Choices:
    """Verified pairs with, per key position, where the row's columns holding the tuple's value
    start in `columns` and how many there are (at the initial position: the pair's own column)."""

    tuple_of: np.ndarray  # (pairs,) the query tuple of each pair
    start: np.ndarray  # (pairs, m) int64 offsets into `columns`
    count: np.ndarray  # (pairs, m) int64 columns holding the value (0: the row lacks it)
    columns: np.ndarray  # int64 column positions, as `start` indexes them


@dataclass(frozen=True)
class Best:
    joinability: int  # distinct tuples the mapping matches (0: no pair matched)
    positions: tuple[int, ...]  # the mapping: the table's columns in key order
    matched: int  # pairs with at least one injective mapping


def best_mapping(choices: Choices, init: int) -> Best:
    """The mapping matching the most distinct tuples, the smallest positions on a tie."""
    total = choices.count.prod(axis=1)
    live = np.flatnonzero(total > 0)
    if len(live) == 0:
        return Best(0, (), 0)
    # the values below which each column of a (mapping..., tuple) row lies
    radix = [int(choices.columns.max()) + 1] * choices.start.shape[1] + [int(choices.tuple_of.max()) + 1]
    hit = np.zeros(len(total), bool)  # the pairs with at least one injective mapping
    best: tuple[int, tuple[int, ...]] = (0, ())
    first = choices.columns[choices.start[live, init]]
    for column in np.unique(first).tolist():
        hits = _distinct_matches(choices, live[first == column], total, radix, hit)
        if len(hits):
            combos, counts = _unique_rows(hits[:, :-1], radix[:-1], counts=True)
            top = int(np.flatnonzero(counts == counts.max())[0])  # rows sorted: the smallest combo first
            candidate = (int(counts[top]), tuple(int(c) for c in combos[top]))
            if candidate[0] > best[0] or (candidate[0] == best[0] and candidate[1] < best[1]):
                best = candidate
    return Best(best[0], best[1], int(hit.sum()))


def _distinct_matches(
    choices: Choices, pairs: np.ndarray, total: np.ndarray, radix: list[int], hit: np.ndarray
) -> np.ndarray:
    """The distinct (mapping..., tuple) rows `pairs` match; `hit` marks the pairs that match one."""
    parts: list[np.ndarray] = []
    held = 0
    for block, first, n in _blocks(pairs, total):
        combos, owner = _enumerate(choices, block, first, n)
        injective = _injective(combos)
        hit[block[owner[injective]]] = True
        rows = np.column_stack([combos[injective], choices.tuple_of[block][owner[injective]]])
        parts.append(_unique_rows(rows, radix)[0])
        held += len(parts[-1])
        if len(parts) > 1 and held > BLOCK:  # merged when they outgrow a block: each match merged O(log) times
            parts = [_unique_rows(np.concatenate(parts), radix)[0]]
            held = len(parts[0])
    if not parts:
        return np.empty((0, len(radix)), np.int64)
    return _unique_rows(np.concatenate(parts), radix)[0]


def _injective(combos: np.ndarray) -> np.ndarray:
    """Which rows use no column twice."""
    out = np.ones(len(combos), bool)
    for i in range(combos.shape[1]):
        for j in range(i + 1, combos.shape[1]):
            out &= combos[:, i] != combos[:, j]
    return out


def _unique_rows(rows: np.ndarray, radix: list[int], *, counts: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a non-negative int64 matrix whose column j holds values below radix[j],
    in lexicographic order (and how often each occurs): one number per row where the radixes
    multiply within int64, numpy's row-wise unique otherwise."""
    if len(rows) == 0:
        return rows, np.empty(0, np.int64)
    if math.prod(radix) >= 2**62:
        out, n = np.unique(rows, axis=0, return_counts=True)
        return out, n
    code = np.zeros(len(rows), np.int64)
    for j in range(rows.shape[1]):
        code = code * radix[j] + rows[:, j]
    if counts:
        code, n = np.unique(code, return_counts=True)
    else:
        code, n = np.unique(code), np.empty(0, np.int64)
    out = np.empty((len(code), rows.shape[1]), np.int64)
    for j in reversed(range(rows.shape[1])):
        code, out[:, j] = np.divmod(code, radix[j])
    return out, n


def _blocks(pairs: np.ndarray, total: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The matches of `pairs`, in order, in runs of BLOCK: per run its pairs, the rank of each
    one's first match in the run and how many of its matches the run holds (a pair of more matches
    than a run spans several)."""
    sizes = total[pairs]
    ends = np.cumsum(sizes)
    starts = ends - sizes
    for lo in range(0, int(ends[-1]) if len(ends) else 0, BLOCK):
        a = int(np.searchsorted(ends, lo, "right"))
        b = int(np.searchsorted(starts, lo + BLOCK, "left"))
        first = np.maximum(lo - starts[a:b], 0)
        yield pairs[a:b], first, np.minimum(lo + BLOCK - starts[a:b], sizes[a:b]) - first


def _enumerate(choices: Choices, block: np.ndarray, first: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The matches of rank first[p] to first[p] + n[p] - 1 of each pair p of `block` (a match's rank
    numbers its choice of one column per key position, mixed radix over the positions' counts):
    (matches, m) columns and, per match, its pair's index in `block`."""
    owner = np.repeat(np.arange(len(block)), n)
    rank = first[owner] + np.arange(len(owner)) - np.repeat(np.cumsum(n) - n, n)
    m = choices.start.shape[1]
    combos = np.empty((len(owner), m), np.int64)
    stride = np.ones(len(owner), np.int64)
    for i in reversed(range(m)):
        count = choices.count[block, i][owner]
        combos[:, i] = choices.columns[choices.start[block, i][owner] + (rank // stride) % count]
        stride *= count
    return combos, owner
