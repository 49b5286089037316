"""Benchmark: the semantic lists' range join against brute force on the same vectors (issue 18).

`python -m bench.pexeso_lists_bench [--subset all] [--vectors 100000] [--seed 0]`

The vectors are the local portal seed's: each column's distinct tokens that are not numbers (the
textual columns' values, as the lists embed them), embedded by PEXESO's embedder, then `--vectors`
of them drawn at random (0: all; brute force on all of the seed's takes about half an hour). Both
methods self-join them at the lists' radius (2τ = 0.12): `range_join` (prefix keys, projection
bound, brute force's rule on what is left) and `close_pairs` over every pair (brute force, what the
lists did before). The pairs must be identical (the run fails otherwise).

Printed: the vectors, the range join's priced work against brute force's |V|², both times and
their ratio.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.seed_lake import seed_token_sets
from catalog.search.pexeso.index import PEXESO_EMBEDDER
from catalog.search.pexeso.range_join import RangeJoin
from catalog.search.pexeso.search import close_pairs

RADIUS = 0.12
_NUMBER = re.compile(r"^[-+]?[\d.,]+(e[-+]?\d+)?$", re.IGNORECASE)
_BRUTE_ROWS = 2_048


def seed_vectors(subset: str) -> np.ndarray:
    """Every column's distinct non-numeric tokens, embedded (the zero vectors of empty ones dropped)."""
    with tempfile.TemporaryDirectory() as scratch:
        sets = seed_token_sets(subset, Path(scratch))
    values = [t for tokens in sets.values() for t in sorted(tokens) if not _NUMBER.match(t)]
    vectors = PEXESO_EMBEDDER.embed(values)
    return vectors[np.any(vectors != 0, axis=1)]


def _brute(v: np.ndarray) -> set[tuple[int, int]]:
    out: set[tuple[int, int]] = set()
    for start in range(0, len(v), _BRUTE_ROWS):
        for ia, ix in close_pairs(v[start : start + _BRUTE_ROWS], v, RADIUS):
            out.update(zip((ia + start).tolist(), ix.tolist(), strict=True))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pexeso_lists_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--subset", choices=("demo", "small", "all"), default="all")
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    vectors = seed_vectors(args.subset)
    total = len(vectors)
    if 0 < args.vectors < total:
        vectors = vectors[np.random.default_rng(args.seed).choice(total, args.vectors, replace=False)]
    start = time.perf_counter()
    join = RangeJoin.fit(vectors, RADIUS)
    keys = join.keys(vectors)
    pairs = join.pairs(vectors, keys, vectors, keys)
    found = {(int(i), int(j)) for ia, ix in pairs for i, j in zip(ia, ix, strict=True)}
    joined = time.perf_counter() - start
    start = time.perf_counter()
    expected = _brute(vectors)
    brute = time.perf_counter() - start
    n = len(vectors)
    print(f"vectors: {n:,} of the seed's {total:,}; pairs within {RADIUS}: {len(expected):,}")
    print(f"work priced: {join.cost(keys, keys):,} brute-force distances of {n * n:,}")
    print("| method | time (s) |\n|---|---:|")
    print(f"| range join (prefix keys + projection) | {joined:.1f} |\n| brute force (close_pairs) | {brute:.1f} |")
    print(f"ratio brute / range join: {brute / joined:.1f}x")
    if found != expected:
        print(f"DIFFERENT PAIRS: {len(found - expected)} extra, {len(expected - found)} missing")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
