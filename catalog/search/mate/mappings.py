"""The best column mapping of one table: verified (query tuple, row) pairs -> the mapping of the key
columns to the table's columns that matches the most distinct tuples (`search nary`'s verification).

A pair's row may hold a key value in several columns, and every injective choice of them is a
mapping the pair matches. Rows of a wide table of 0/1 columns hold `0` in a thousand columns: one
(0, 0) tuple then matches a million mappings in one row, so the choices are enumerated with numpy in
blocks of at most `BLOCK` matches, never as Python tuples, and memory stays bounded whatever the
table. Matches under different columns of the initial value are different mappings, so each such
column's matches are counted on their own; within one, the distinct (mapping, tuple) matches of
the blocks so far are kept.
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
    best: tuple[int, tuple[int, ...]] = (0, ())
    matched = 0
    first = choices.columns[choices.start[live, init]]
    if len(live):  # the values below which each column of a (mapping..., tuple) row lies
        radix = [int(choices.columns.max()) + 1] * choices.start.shape[1] + [int(choices.tuple_of.max()) + 1]
    for column in np.unique(first).tolist():
        hits, n_matched = _distinct_matches(choices, live[first == column], total, radix)
        matched += n_matched
        if len(hits):
            combos, counts = _unique_rows(hits[:, :-1], radix[:-1], counts=True)
            top = int(np.flatnonzero(counts == counts.max())[0])  # rows sorted: the smallest combo first
            candidate = (int(counts[top]), tuple(int(c) for c in combos[top]))
            if candidate[0] > best[0] or (candidate[0] == best[0] and candidate[1] < best[1]):
                best = candidate
    return Best(best[0], best[1], matched)


def _distinct_matches(
    choices: Choices, pairs: np.ndarray, total: np.ndarray, radix: list[int]
) -> tuple[np.ndarray, int]:
    """The distinct (mapping..., tuple) rows `pairs` match, and how many of the pairs match one."""
    parts: list[np.ndarray] = []
    held = matched = 0
    for block in _blocks(pairs, total):
        combos, owner = _enumerate(choices, block, total[block])
        injective = _injective(combos)
        matched += len(np.unique(owner[injective]))
        rows = np.column_stack([combos[injective], choices.tuple_of[block][owner[injective]]])
        parts.append(_unique_rows(rows, radix)[0])
        held += len(parts[-1])
        if len(parts) > 1 and held > BLOCK:  # merged when they outgrow a block: each match merged O(log) times
            parts = [_unique_rows(np.concatenate(parts), radix)[0]]
            held = len(parts[0])
    if not parts:
        return np.empty((0, len(radix)), np.int64), matched
    return _unique_rows(np.concatenate(parts), radix)[0], matched


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


def _blocks(pairs: np.ndarray, total: np.ndarray) -> Iterator[np.ndarray]:
    """`pairs` in consecutive runs of at most BLOCK matches (a pair of more is a run alone)."""
    ends = np.cumsum(total[pairs])
    lo = 0
    while lo < len(pairs):
        base = ends[lo - 1] if lo else 0
        hi = max(int(np.searchsorted(ends, base + BLOCK, "right")), lo + 1)
        yield pairs[lo:hi]
        lo = hi


def _enumerate(choices: Choices, block: np.ndarray, total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every choice of one column per key position for each pair of `block`: (matches, m) columns
    and, per match, its pair's index in `block` (mixed radix over the positions' counts)."""
    owner = np.repeat(np.arange(len(block)), total)
    rank = np.arange(len(owner)) - np.repeat(np.cumsum(total) - total, total)
    m = choices.start.shape[1]
    combos = np.empty((len(owner), m), np.int64)
    stride = np.ones(len(owner), np.int64)
    for i in reversed(range(m)):
        count = choices.count[block, i][owner]
        combos[:, i] = choices.columns[choices.start[block, i][owner] + (rank // stride) % count]
        stride *= count
    return combos, owner
