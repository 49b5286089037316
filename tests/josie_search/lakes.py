"""Random lakes for the JOSIE search tests: Zipf set sizes, many duplicate lists, empty and one-token sets."""

from __future__ import annotations

import random

from catalog.core.identity import column_id


def random_lake(rng: random.Random, *, n_sets: int, vocab: int) -> dict[str, set[str]]:
    """column_id -> tokens. Sizes follow a Zipf-like law; a third of the columns copy a few shared
    "bundles" (identical posting lists), some hold only tokens of their own (singleton lists, one
    duplicate group per column), some are empty or hold one token."""
    bundles = [set(rng.sample(range(vocab), min(vocab, int(rng.paretovariate(0.9))))) for _ in range(4)]
    lake: dict[str, set[str]] = {}
    for s in range(n_sets):
        cid = column_id(f"file:t{s % 5}.csv", f"c{s}")
        roll = rng.random()
        if roll < 0.08:
            tokens: set[str] = set()
        elif roll < 0.16:
            tokens = {str(rng.randrange(vocab))}
        elif roll < 0.45:
            tokens = {str(t) for t in rng.choice(bundles)}
        else:
            size = min(vocab, int(rng.paretovariate(0.8)))
            tokens = {str(t) for t in rng.sample(range(vocab), size)}
        if rng.random() < 0.2:
            tokens |= {f"own{s}-{i}" for i in range(rng.randrange(1, 15))}
        lake[cid] = tokens
    return lake


def random_query(rng: random.Random, lake: dict[str, set[str]], vocab: int) -> set[str]:
    q = {str(t) for t in rng.sample(range(vocab), rng.randrange(0, vocab + 1))}
    if rng.random() < 0.4:
        q |= lake[rng.choice(sorted(lake))]
    return q | {"not-in-the-lake"}
