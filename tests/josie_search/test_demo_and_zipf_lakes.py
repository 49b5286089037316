"""Every method equals brute force on the demo lake (nycflights13) and on a synthetic Zipf lake."""

from __future__ import annotations

import random

import pytest

from bench.josie_lake import nycflights13_lake, zipf_lake
from catalog.search.josie import METHODS, build_memory_index, search_tokens
from catalog.search.josie.brute_force import brute_force_top_k


@pytest.fixture(scope="module")
def demo_lake() -> dict[str, set[str]]:
    return nycflights13_lake()


def test_demo_lake_every_column_as_query(demo_lake: dict[str, set[str]]) -> None:
    index = build_memory_index(demo_lake)
    for cid in sorted(demo_lake):
        n_matching = sum(1 for other, t in demo_lake.items() if other != cid and t & demo_lake[cid])
        for k in (1, 10, 100, n_matching + 1):
            expected = brute_force_top_k(demo_lake, demo_lake[cid], k, exclude_column_id=cid)
            for method in METHODS:
                got = search_tokens(index, demo_lake[cid], k=k, method=method, exclude_column_id=cid).results
                assert got == expected, (cid, k, method)


def test_zipf_lake_sampled_columns_as_queries() -> None:
    lake = zipf_lake(1500, seed=3)
    index = build_memory_index(lake)
    rng = random.Random(4)
    biggest = sorted(lake, key=lambda c: (-len(lake[c]), c))[:8]
    for cid in rng.sample(sorted(lake), 25) + biggest:
        for k in (1, 10, 100):
            expected = brute_force_top_k(lake, lake[cid], k, exclude_column_id=cid)
            for method in METHODS:
                got = search_tokens(index, lake[cid], k=k, method=method, exclude_column_id=cid).results
                assert got == expected, (cid, k, method)
