"""Full build: index invariants checked directly, sets equal the columns' token sets, groups are
exactly the distinct posting lists (also when every hash collides), the most frequent group exists."""

from __future__ import annotations

import random

from spark_jobs.josie import build as josie_index
from spark_jobs.lake.store import LakeStore
from tests.josie_index.josie_oracle import (
    check_invariants,
    model_sets,
    random_table,
    read_index,
    write_column_tokens,
)


def _lake(seed: int, n_tables: int) -> dict[str, dict[str, frozenset[str]]]:
    rng = random.Random(seed)
    lake: dict[str, dict[str, frozenset[str]]] = {}
    for i in range(n_tables):
        tid = f"file:t{i}.csv"
        lake[tid] = random_table(rng, tid, 60, lake)
    # the largest-frequency group: two tokens in every column (regression for the last-group bug)
    for cols in lake.values():
        for cid in cols:
            cols[cid] = cols[cid] | {"everywhere", "also everywhere"}
    return lake


def test_build_matches_columns_and_keeps_invariants(spark, settings):  # type: ignore[no-untyped-def]
    store = LakeStore(settings.lake, spark)
    lake = _lake(5, 24)
    write_column_tokens(store, lake, sorted(lake), settings.index.cells_buckets)
    result = josie_index.build(spark, store, batch_id=1)
    idx = read_index(store)
    check_invariants(idx, fresh=True)
    assert idx.column_sets() == model_sets(lake)
    assert sorted(idx.set_ids().values()) == list(range(len(idx.sets)))
    assert result.state.n_lists == len({t for s in model_sets(lake).values() for t in s})
    # the two most frequent tokens form the last group, and it covers every set
    ids = idx.token_ids()
    last = max(ids.values())
    assert {ids["everywhere"], ids["also everywhere"]} == {last, last - 1}
    assert idx.tokens[last][2] == idx.tokens[last - 1][2] == max(g for _, _, g in idx.tokens.values())
    assert idx.postings[last][0] == sorted(idx.sets)


def test_hash_collisions_do_not_merge_different_lists(spark, settings):  # type: ignore[no-untyped-def]
    store = LakeStore(settings.lake, spark)
    lake = {
        f"file:c{i}.csv": {
            f"file:c{i}.csv#a": frozenset({f"s{i}", f"p{i % 3}", f"q{i % 2}", "all"}),
            f"file:c{i}.csv#b": frozenset({f"s{i}b", f"p{i % 3}"}),
        }
        for i in range(9)
    }
    write_column_tokens(store, lake, sorted(lake), settings.index.cells_buckets)
    josie_index.build(spark, store, batch_id=1, hash_modulus=1)  # every list hashes to 0
    idx = read_index(store)
    check_invariants(idx, fresh=True, hash_modulus=1)
    n_groups = len({g for _, _, g in idx.tokens.values()})
    distinct_lists = {
        tuple(sorted(cid for cid, s in model_sets(lake).items() if tok in s))
        for s in model_sets(lake).values()
        for tok in s
    }
    assert n_groups == len(distinct_lists)
    assert idx.column_sets() == model_sets(lake)
