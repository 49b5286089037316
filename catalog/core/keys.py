"""Unique column combinations of one table, in numpy: the key search the profile stage runs per
table on the executors (`spark_jobs.profile.keys`) and the n-ary search runs on a query table
(`catalog.search.mate.query`), so both find the same keys in the same table.

A single column is an exact key when all its values differ, and a near-unique (approximate) key when
distinct / rows >= `NEAR_UNIQUE_MIN`. A pair or triple is reported only when it is unique and none
of its subsets is (a *minimal* unique column combination); the search goes level by level with
Apriori pruning and stripped partitions, and its work is bounded (see `minimal_keys`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

NEAR_UNIQUE_MIN = 0.99
MAX_COLUMNS = 3
MAX_WORK = 200_000_000  # row visits per table before the search is cut short
# What one uniqueness check costs beyond its rows, in row visits: the Python and numpy call overhead
# (~10 µs). Without it a wide table with few repeating rows (hundreds of columns, a few dozen rows)
# makes millions of nearly free checks, and the bound on row visits bounds nothing.
CHECK_OVERHEAD = 2_000
MAX_KEYS = 1_000  # keys per table; a table with more minimal keys than this is not telling us much

ID_WORDS = frozenset(
    {"id", "key", "code", "no", "nr", "num", "number", "uuid", "guid", "faa", "iata", "icao", "tailnum", "pk", "ref"}
)
TIME_WORDS = frozenset(
    {"year", "month", "day", "hour", "minute", "second", "date", "time", "timestamp", "week", "quarter", "period"}
)
TYPE_WEIGHT = {
    "identifier": 1.0,
    "integer": 0.8,
    "date": 0.7,
    "datetime": 0.7,
    "categorical": 0.5,
    "text": 0.3,
    "boolean": 0.2,
}


@dataclass(frozen=True)
class KeyColumn:
    """A candidate column: header, 1-based position, inferred type, and its values as integer codes."""

    header: str
    position: int
    inferred_type: str
    codes: np.ndarray
    cardinality: int


@dataclass(frozen=True)
class FoundKey:
    columns: tuple[str, ...]
    exact: bool
    uniqueness: float
    score: float


@dataclass(frozen=True)
class KeySearch:
    keys: list[FoundKey]
    complete: bool
    n_checked: int
    work: int


def _words(header: str) -> set[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", header)
    return set(re.split(r"[^a-z0-9]+", spaced.lower())) - {""}


def key_score(cols: Sequence[KeyColumn], uniqueness: float, n_columns: int) -> float:
    """How likely a key is real (higher first); see the module docstring."""

    def name(c: KeyColumn) -> float:
        words = _words(c.header)
        if words & ID_WORDS or c.header.endswith(("Id", "ID")):
            return 1.0
        return 0.7 if len(cols) > 1 and words & TIME_WORDS else 0.0

    name_part = sum(map(name, cols)) / len(cols)
    type_part = sum(TYPE_WEIGHT.get(c.inferred_type, 0.3) for c in cols) / len(cols)
    pos_part = 1.0 - sum(c.position - 1 for c in cols) / len(cols) / max(n_columns, 1)
    return round(uniqueness * (0.4 * name_part + 0.3 * type_part + 0.2 / len(cols) + 0.1 * pos_part), 6)


def _has_duplicate(keys: np.ndarray) -> bool:
    if keys.size < 2:
        return False
    s = np.sort(keys, kind="stable")
    return bool((s[1:] == s[:-1]).any())


def _repeating_rows(codes: np.ndarray, cardinality: int) -> np.ndarray:
    """Rows whose code occurs at least twice (the stripped partition's rows)."""
    counts = np.bincount(codes, minlength=cardinality)
    return np.flatnonzero(counts[codes] >= 2)


def minimal_keys(
    columns: Sequence[KeyColumn],
    n_rows: int,
    *,
    n_columns: int | None = None,
    max_work: int = MAX_WORK,
    near_unique_min: float = NEAR_UNIQUE_MIN,
) -> KeySearch:
    """Unique and near-unique columns and minimal unique pairs and triples of `columns` (all with
    `n_rows` codes). `n_columns` is the table's width (for the position score)."""
    width = n_columns or max((c.position for c in columns), default=1)
    if n_rows == 0:
        return KeySearch([], True, 0, 0)
    found: list[FoundKey] = []
    nonunique: list[KeyColumn] = []
    for c in columns:
        u = c.cardinality / n_rows
        if c.cardinality == n_rows:
            found.append(FoundKey((c.header,), True, 1.0, key_score([c], 1.0, width)))
            continue
        nonunique.append(c)
        if u >= near_unique_min:
            found.append(FoundKey((c.header,), False, u, key_score([c], u, width)))
    unique_pairs: set[tuple[int, int]] = set()
    repeating = {i: _repeating_rows(c.codes, c.cardinality) for i, c in enumerate(nonunique)}
    budget = _Budget(max_work)
    complete = True
    for i, a in enumerate(nonunique):  # pairs
        rows = repeating[i]
        for j in range(i + 1, len(nonunique)):
            b = nonunique[j]
            if a.cardinality * b.cardinality < n_rows:
                continue
            if len(found) >= MAX_KEYS or not budget.spend(rows.size, check=True):
                complete = False
                break
            if not _has_duplicate(a.codes[rows] * b.cardinality + b.codes[rows]):
                unique_pairs.add((i, j))
                found.append(FoundKey((a.header, b.header), True, 1.0, key_score([a, b], 1.0, width)))
        if not complete:
            break
    if complete and MAX_COLUMNS >= 3:
        complete = _triples(nonunique, repeating, unique_pairs, n_rows, width, budget, found)
    return KeySearch(found, complete, budget.checks, budget.work)


class _Budget:
    """Row visits spent so far, against a fixed limit (deterministic, unlike a time limit)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.work, self.checks = limit, 0, 0

    def spend(self, cost: int, *, check: bool = False) -> bool:
        cost += CHECK_OVERHEAD
        if self.work + cost > self.limit:
            return False
        self.work += cost
        self.checks += int(check)
        return True


def _triples(
    nonunique: list[KeyColumn],
    repeating: dict[int, np.ndarray],
    unique_pairs: set[tuple[int, int]],
    n_rows: int,
    width: int,
    budget: _Budget,
    found: list[FoundKey],
) -> bool:
    """Minimal unique triples (all three pairs non-unique); False when the budget ran out."""
    for i, a in enumerate(nonunique):
        rows = repeating[i]
        for j in range(i + 1, len(nonunique)):
            b = nonunique[j]
            if (i, j) in unique_pairs:
                continue
            ks = [
                k
                for k in range(j + 1, len(nonunique))
                if (i, k) not in unique_pairs
                and (j, k) not in unique_pairs
                and a.cardinality * b.cardinality * nonunique[k].cardinality >= n_rows
            ]
            if not ks:
                continue
            if not budget.spend(rows.size + len(ks)):
                return False
            _, groups, counts = np.unique(
                a.codes[rows] * b.cardinality + b.codes[rows], return_inverse=True, return_counts=True
            )
            keep = counts[groups] >= 2
            pair_rows, pair_groups = rows[keep], groups[keep].astype(np.int64)
            for k in ks:
                c = nonunique[k]
                if len(found) >= MAX_KEYS or not budget.spend(pair_rows.size, check=True):
                    return False
                if not _has_duplicate(pair_groups * c.cardinality + c.codes[pair_rows]):
                    found.append(FoundKey((a.header, b.header, c.header), True, 1.0, key_score([a, b, c], 1.0, width)))
    return True
