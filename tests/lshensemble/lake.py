"""A skewed test lake for containment search, with its brute-force oracle.

Column sizes follow a Zipf law from 1 to a few huge columns; some columns are exact duplicates,
some are subsets of others (containment 1 in one direction), and queries are built from columns
with part of their values swapped out, so true containments spread over the whole of [0, 1].
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from catalog.core.minhash import MinHashSpec, murmur3_32, signatures
from catalog.search.lshensemble.index import prefix_length


def skewed_lake(seed: int, n_columns: int = 400, vocabulary: int = 30_000) -> list[set[str]]:
    rng = np.random.default_rng(seed)
    sizes = np.minimum(rng.zipf(1.6, n_columns), 5_000)
    sizes[:3] = [20_000, 12_000, 8_000]  # huge columns
    columns: list[set[str]] = []
    for i, size in enumerate(sizes.tolist()):
        if i % 17 == 5 and columns:  # an exact duplicate of an earlier column
            columns.append(set(columns[int(rng.integers(len(columns)))]))
        elif i % 11 == 3 and columns:  # a subset of an earlier column
            parent = sorted(columns[int(rng.integers(len(columns)))])
            keep = rng.choice(len(parent), size=max(1, len(parent) // 2), replace=False)
            columns.append({parent[j] for j in keep})
        else:
            start = int(rng.integers(0, vocabulary))
            values = (start + rng.choice(min(vocabulary, 4 * size + 10), size=size, replace=False)) % vocabulary
            columns.append({f"v{v}" for v in values.tolist()})
    return columns


def queries(columns: list[set[str]], seed: int, n: int = 40) -> list[set[str]]:
    """Columns with a random share of their values replaced by values no column holds."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        base = sorted(columns[int(rng.integers(len(columns)))])
        keep = max(1, int(len(base) * rng.uniform(0.3, 1.0)))
        kept = rng.choice(len(base), size=keep, replace=False)
        out.append({base[j] for j in kept} | {f"q{i}_{j}" for j in range(len(base) - keep)})
    return out


def sign_all(spec: MinHashSpec, columns: list[set[str]]) -> tuple[np.ndarray, np.ndarray]:
    """(signatures, sizes) of the columns, through the same function the pipeline uses."""
    tokens = [t for c in columns for t in sorted(c)]
    owners = np.repeat(np.arange(len(columns)), [len(c) for c in columns])
    return signatures(spec, murmur3_32(tokens), owners, len(columns)), np.array([len(c) for c in columns])


def brute_force(columns: list[set[str]], query: set[str], threshold: float) -> set[int]:
    """Rows whose containment of the query is at least the threshold."""
    need = threshold * len(query) - 1e-9
    return {i for i, c in enumerate(columns) if c and len(c & query) >= need}


class Postings:
    """An inverted index over the lake's columns (token -> rows), rarest tokens first: the exact
    path for a query some partition of which LSH cannot serve, as JOSIE's posting lists serve it
    in the catalog."""

    def __init__(self, columns: list[set[str]]) -> None:
        self.lists: dict[str, list[int]] = {}
        for row, column in enumerate(columns):
            for token in column:
                self.lists.setdefault(token, []).append(row)

    def exact(self, query: set[str], threshold: float) -> Callable[[np.ndarray], np.ndarray]:
        known = sorted((t for t in query if t in self.lists), key=lambda t: (len(self.lists[t]), t))
        prefix = known[: prefix_length(len(known), len(query), threshold)]

        def rows(parts: np.ndarray) -> np.ndarray:
            return np.unique(np.array([r for t in prefix for r in self.lists[t]], dtype=np.int64))

        return rows
