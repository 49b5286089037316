"""Test lakes for n-ary join search, with the brute-force oracle.

The lakes are made to fool a single-column index: values of the key columns are shared by many
tables while their combinations are not (columns are shuffled independently in decoy tables), and
they hold repeated rows, null and null-like key cells, a key value in two columns of one row, wide
tables and empty ones. The oracle knows nothing of posting lists or super keys: for every table and
row, every query tuple whose values all sit in the row, and every injective choice of columns
holding them, it records the tuple under that mapping, then keeps the mapping with the most tuples.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from catalog.core.identity import normalize_token

Table = tuple[str, list[str], list[list[str | None]]]


def oracle(
    tables: Sequence[Table], headers: Sequence[str], rows: Sequence[Sequence[str | None]], key: Sequence[str], k: int
) -> list[tuple[str, int, dict[str, str]]]:
    """Top-k (table_id, joinability, mapping) by joinability desc then table_id; of equal mappings
    the one with the smallest column positions; tables with joinability 0 left out."""
    at = [list(headers).index(name) for name in key]
    query = {t for r in rows if None not in (t := tuple(normalize_token(r[p]) for p in at))}
    out = []
    for table_id, theaders, trows in tables:
        hits: dict[tuple[int, ...], set[tuple[str, ...]]] = {}
        for r in trows:
            where: dict[str, list[int]] = {}
            for c, raw in enumerate(r, start=1):
                token = normalize_token(raw)
                if token is not None:
                    where.setdefault(token, []).append(c)
            for t in query:
                if all(v in where for v in t):
                    for combo in itertools.product(*(where[v] for v in t)):
                        if len(set(combo)) == len(combo):
                            hits.setdefault(combo, set()).add(t)
        if hits:
            best = min(hits, key=lambda combo: (-len(hits[combo]), combo))
            mapping = {name: theaders[p - 1] for name, p in zip(key, best, strict=True)}
            out.append((table_id, len(hits[best]), mapping))
    out.sort(key=lambda x: (-x[1], x[0]))
    return out[:k]


def pair_bound(
    tables: Sequence[Table], headers: Sequence[str], rows: Sequence[Sequence[str | None]], key: Sequence[str]
) -> int:
    """The work bound a precomputed list is held to: over the key's positions, the fewest (query
    tuple, lake cell holding the tuple's value at that position) pairs, every table of the lake
    (the query's own included) counted."""
    return min(position_pairs(tables, headers, rows, key))


def position_pairs(
    tables: Sequence[Table], headers: Sequence[str], rows: Sequence[Sequence[str | None]], key: Sequence[str]
) -> list[int]:
    """Per key position, the (query tuple, cell of `tables` holding the tuple's value there) pairs."""
    at = [list(headers).index(name) for name in key]
    query = {t for r in rows if None not in (t := tuple(normalize_token(r[p]) for p in at))}
    cells = Counter(
        token for _, _, trows in tables for r in trows for v in r if (token := normalize_token(v)) is not None
    )
    return [sum(cells[t[i]] for t in query) for i in range(len(key))]


def match_count(
    tables: Sequence[Table], headers: Sequence[str], rows: Sequence[Sequence[str | None]], key: Sequence[str]
) -> int:
    """The matches a precomputed list's verification would enumerate against `tables` (the list's
    own table left out by the caller): over every row and query tuple whose values all sit in the
    row, the product of how many of the row's columns hold each value."""
    at = [list(headers).index(name) for name in key]
    query = {t for r in rows if None not in (t := tuple(normalize_token(r[p]) for p in at))}
    total = 0
    for _, _, trows in tables:
        for r in trows:
            where = Counter(token for v in r if (token := normalize_token(v)) is not None)
            total += sum(math.prod(where[v] for v in t) for t in query)
    return total


def random_lake(seed: int, n_tables: int = 40, key_size: int = 2) -> tuple[list[Table], Table]:
    """A lake and a query table (its first `key_size` columns are the key)."""
    rng = np.random.default_rng(seed)
    domains = [[f"{name}{v}" for v in range(int(rng.integers(4, 40)))] for name in ("city", "d", "code", "x", "y")]
    domains.append([str(v) for v in range(30)])  # digits shared with every numeric column
    base_rows = [[str(rng.choice(domains[c % len(domains)])) for c in range(key_size + 1)] for _ in range(60)]
    headers = [f"k{i}" for i in range(key_size)] + ["measure"]
    query_rows: list[list[str | None]] = [list(r) for r in base_rows[:40]]
    query_rows += [list(query_rows[3]), [None, *query_rows[5][1:]], ["NULL", *query_rows[6][1:]]]  # repeat, nulls
    query_rows.append([query_rows[7][0].upper(), *query_rows[7][1:]])  # the same tuple, another case
    tables: list[Table] = []
    for t in range(n_tables):
        kind = t % 5
        n_rows = int(rng.integers(0, 80)) if t % 13 else 0
        width = int(rng.integers(key_size, key_size + 5)) + (12 if t % 11 == 4 else 0)  # some wide
        rows: list[list[str | None]] = []
        for _ in range(n_rows):
            row: list[str | None] = [str(rng.choice(domains[c % len(domains)])) for c in range(width)]
            rows.append(row)
        if kind in (0, 1) and n_rows:  # holds some of the query's tuples, in shuffled columns
            cols = [int(c) for c in rng.permutation(width)[:key_size]]
            for r in rng.choice(n_rows, size=min(n_rows, int(rng.integers(1, 30))), replace=False).tolist():
                src = base_rows[int(rng.integers(0, len(base_rows)))]
                for i, c in enumerate(cols):
                    rows[r][c] = src[i]
            if kind == 1:  # repeated rows, a null key cell, a key value in two columns
                rows.extend([list(rows[0]), list(rows[0])])
                rows[-1][cols[0]] = None
                spare = [c for c in range(width) if c not in cols]
                if spare:
                    rows[1][spare[0]] = rows[1][cols[1]]
        elif kind == 2 and n_rows:  # every single value of the query, no tuple: columns shuffled apart
            cols = [int(c) for c in rng.permutation(width)[:key_size]]
            for i, c in enumerate(cols):
                shuffled = rng.permutation(len(base_rows)).tolist()
                for r in range(n_rows):
                    rows[r][c] = base_rows[shuffled[r % len(base_rows)]][i]
        theaders = [f"c{c}" for c in range(width)]
        tables.append((f"t{t:03d}", theaders, rows))
    return tables, ("query", headers, query_rows)
