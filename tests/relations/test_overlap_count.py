"""The joinable counting kernel (numpy, no Spark) against brute force over plain Python sets, on
lakes with skewed set sizes, duplicate and empty columns and tokens over the list bound; both of
its counting paths (dense and sorted) are forced in turn."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from spark_jobs.relate import overlap_count
from spark_jobs.relate.overlap_count import Groups, top_k_batches


def random_sets(rng: random.Random, n: int) -> dict[int, set[int]]:
    """Zipf-like sizes over a vocabulary of 60 (so frequent tokens exist), some empty columns and
    some exact duplicates of earlier columns."""
    sets: dict[int, set[int]] = {}
    for c in range(n):
        if c and rng.random() < 0.15:
            sets[c] = set(sets[rng.randrange(c)])
        else:
            size = min(60, int(rng.paretovariate(1.2)) - 1)
            sets[c] = {min(59, int(rng.expovariate(0.08))) for _ in range(size)}
    return sets


def groups_of(sets: dict[int, set[int]], max_list: int) -> Groups:
    """The groups Spark would collect: identical posting lists counted once, long ones skipped."""
    postings: dict[int, list[int]] = {}
    for c, tokens in sets.items():
        for t in tokens:
            postings.setdefault(t, []).append(c)
    kept: Counter[tuple[int, ...]] = Counter()
    skipped: Counter[int] = Counter()
    for columns in postings.values():
        if len(columns) > max_list:
            skipped.update(columns)
        elif len(columns) > 1:
            kept[tuple(sorted(columns))] += 1
    return Groups.from_lists(
        len(sets),
        pa.array([list(g) for g in kept], pa.list_(pa.int64())),
        np.array(list(kept.values()), dtype=np.int64),
        np.array(list(skipped), dtype=np.int64),
        np.array(list(skipped.values()), dtype=np.int64),
    )


def brute_force(sets: dict[int, set[int]], max_list: int, k: int) -> dict[int, list[tuple[int, int, int, int]]]:
    """column -> [(rank, candidate, overlap, n_skipped)], ties by the smaller candidate id."""
    freq = Counter(t for tokens in sets.values() for t in tokens)
    frequent = {t for t, f in freq.items() if f > max_list}
    out: dict[int, list[tuple[int, int, int, int]]] = {}
    for c, tokens in sets.items():
        scored = sorted((-len((tokens & sets[d]) - frequent), d) for d in sets if d != c)
        best = [(d, -neg) for neg, d in scored if neg < 0][:k]
        if best:
            out[c] = [(i + 1, d, o, len(tokens & frequent)) for i, (d, o) in enumerate(best)]
    return out


def kernel(groups: Groups, n: int, k: int, batch: int) -> dict[int, list[tuple[int, int, int, int]]]:
    batches = (
        pa.record_batch({"cid": pa.array(range(lo, min(n, lo + batch)), pa.int64())}) for lo in range(0, n, batch)
    )
    out: dict[int, list[tuple[int, int, int, int]]] = {}
    for b in top_k_batches(groups, batches, k):
        for r in b.to_pylist():
            out.setdefault(r["cid"], []).append((r["rank"], r["candidate_cid"], r["overlap"], r["n_skipped"]))
    return out


@pytest.mark.parametrize("dense_factor", [0, 16, 10**9], ids=["sorted", "mixed", "dense"])
@pytest.mark.parametrize("seed", range(4))
def test_kernel_equals_brute_force(monkeypatch: pytest.MonkeyPatch, dense_factor: int, seed: int) -> None:
    monkeypatch.setattr(overlap_count, "DENSE_FACTOR", dense_factor)
    rng = random.Random(seed)
    n = rng.randint(30, 120)
    sets = random_sets(rng, n)
    max_list = rng.choice([3, 10, n])
    k = rng.choice([1, 3, 10])
    expected = brute_force(sets, max_list, k)
    assert expected, "the lake should have some joinable pairs"
    assert kernel(groups_of(sets, max_list), n, k, batch=rng.randint(1, 40)) == expected


def test_a_lake_without_shared_tokens_has_no_lists() -> None:
    sets = {0: {1, 2}, 1: {3}, 2: set()}
    assert kernel(groups_of(sets, 10), 3, 5, batch=2) == {}


@pytest.mark.parametrize("seed", range(3))
def test_lists_say_complete_exactly_when_they_hold_every_candidate(seed: int) -> None:
    rng = random.Random(100 + seed)
    n = rng.randint(30, 80)
    sets = random_sets(rng, n)
    max_list, k = rng.choice([10, n]), rng.choice([1, 3])
    every = brute_force(sets, max_list, n)
    batches = iter([pa.record_batch({"cid": pa.array(range(n), pa.int64())})])
    flags: dict[int, set[bool]] = {}
    for b in top_k_batches(groups_of(sets, max_list), batches, k):
        for r in b.to_pylist():
            flags.setdefault(r["cid"], set()).add(r["complete"])
    assert flags == {c: {len(rows) <= k} for c, rows in every.items()}
    assert {False, True} <= {f for fs in flags.values() for f in fs}, "both kinds of list should occur"
