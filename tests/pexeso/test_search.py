"""PEXESO search equals brute force and an oracle with no index: random τ and T on clustered
lakes with empty columns and duplicate query values, pairs exactly at distance τ, both pivot
selections, random ADD/DELETE batches; the lemmas never drop a true match (property test)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.core.embedding import CharNgramEmbedder
from catalog.core.errors import EmbedderMismatchError, UserError
from catalog.search.pexeso import search as pexeso_search
from catalog.search.pexeso.grid import leaf_keys
from catalog.search.pexeso.index import PEXESO_EMBEDDER, ColumnRef, ColumnVectors, IndexShape, PexesoIndex, embed_column
from catalog.search.pexeso.pivots import map_to_pivots
from catalog.search.pexeso.search import (
    EmptyQueryError,
    Query,
    distance_rows,
    need_count,
    search,
    search_partitions,
)
from tests.pexeso.lake import SPEC, clustered_lake, clustered_query, oracle, unit


def _answers(index: PexesoIndex, query: Query, tau: float, threshold: float, method: str) -> list[tuple[str, int]]:
    return [(m.column_id, m.n_matched) for m in search(index, query, tau=tau, threshold=threshold, method=method)]  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _always_verify_through_the_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lemmas' verification path even where blocking prunes little (tiny lakes)."""
    monkeypatch.setattr(pexeso_search, "DENSE_SHARE", math.inf)


@pytest.mark.parametrize("seed", range(6))
def test_pexeso_equals_brute_force_and_the_oracle_for_random_tau_and_threshold(seed: int) -> None:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((int(rng.integers(3, 12)), SPEC.dimension))
    spread = float(rng.uniform(0.01, 0.08))
    lake = clustered_lake(rng, n_columns=60, centres=centres, spread=spread)
    shape = IndexShape(
        n_pivots=int(rng.integers(2, 6)), levels=int(rng.integers(2, 7)), pivot_method=("pca", "random")[seed % 2]
    )
    index = PexesoIndex.build(lake, SPEC, shape)
    for _ in range(4):
        query = clustered_query(rng, centres=centres, spread=spread, n=int(rng.integers(1, 300)))
        tau, threshold = float(rng.uniform(0.0, 0.12)), float(rng.uniform(0.05, 1.0))
        expected = oracle(lake, query, tau, threshold)
        pexeso = search(index, query, tau=tau, threshold=threshold)
        brute = search(index, query, tau=tau, threshold=threshold, method="brute")
        assert [(m.column_id, m.n_matched) for m in pexeso] == expected
        assert [m.as_dict() for m in pexeso] == [m.as_dict() for m in brute]  # examples included
        assert all(m.exact and m.joinability == m.n_matched / query.size for m in pexeso)
    assert any(oracle(lake, clustered_query(rng, centres=centres, spread=spread, n=50), 0.06, 0.5) for _ in range(3))


@pytest.mark.parametrize("method", ["pexeso", "brute"])
def test_each_example_is_a_matched_query_value_and_the_nearest_value_of_its_column(method: str) -> None:
    rng = np.random.default_rng(11)
    centres = rng.standard_normal((4, SPEC.dimension))
    lake = clustered_lake(rng, n_columns=40, centres=centres, spread=0.05)
    index = PexesoIndex.build(lake, SPEC, IndexShape(n_pivots=4, levels=4))
    query = clustered_query(rng, centres=centres, spread=0.05, n=80)
    by_id = {c.ref.column_id: c for c in lake}
    found = search(index, query, tau=0.1, threshold=0.2, method=method)  # type: ignore[arg-type]
    assert found
    for match in found:
        col = by_id[match.column_id]
        d = np.array(
            [distance_rows(np.repeat(query.vectors[[i]], len(col.vectors), 0), col.vectors) for i in range(80)]
        )
        matched_rows = np.flatnonzero((d <= 0.2).any(axis=1))
        expected_rows = matched_rows[: pexeso_search.N_EXAMPLES]
        assert [e.query_value for e in match.examples] == [query.values[i] for i in expected_rows]
        for e, row in zip(match.examples, expected_rows, strict=True):
            nearest = float(d[row].min())
            assert e.distance == pytest.approx(nearest, abs=1e-5)
            assert float(d[row][col.values.index(e.lake_value)]) == pytest.approx(nearest, abs=1e-5)


def test_a_query_blocking_prunes_little_is_verified_densely_with_the_same_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(9)
    centres = rng.standard_normal((3, SPEC.dimension))
    lake = clustered_lake(rng, n_columns=40, centres=centres, spread=0.05)
    index = PexesoIndex.build(lake, SPEC, IndexShape(n_pivots=3, levels=4))
    query = clustered_query(rng, centres=centres, spread=0.05, n=60)
    expected = oracle(lake, query, 0.1, 0.4)
    assert expected
    for share in (0.0, 0.25, math.inf):
        monkeypatch.setattr(pexeso_search, "DENSE_SHARE", share)
        assert _answers(index, query, 0.1, 0.4, "pexeso") == expected


def test_blocking_stops_early_when_the_cells_left_hold_more_pairs_than_verification_would_read() -> None:
    rng = np.random.default_rng(5)
    centres = rng.standard_normal((3, SPEC.dimension))
    lake = clustered_lake(rng, n_columns=40, centres=centres, spread=0.05)
    index = PexesoIndex.build(lake, SPEC, IndexShape(n_pivots=3, levels=6))
    query = clustered_query(rng, centres=centres, spread=0.05, n=30)
    q_mapped = map_to_pivots(query.vectors, index.pivots)
    every_pair = len(query.vectors) * len(index)
    blocked = pexeso_search._block(index.grid, q_mapped, 0.12, math.inf)
    assert blocked is not None
    assert pexeso_search._block(index.grid, q_mapped, 0.12, 0.0) is None  # candidates are left: stop
    assert pexeso_search._block(index.grid, q_mapped, 0.12, every_pair) is not None  # never more than all
    # a radius so wide that no level's cells are narrow enough to judge: blocking runs to the leaves
    assert pexeso_search._block(index.grid, q_mapped, 2.0, 0.0) is not None


def test_duplicates_count_on_the_query_side_and_the_threshold_is_inclusive() -> None:
    rng = np.random.default_rng(7)
    a, b = unit(rng.standard_normal((2, SPEC.dimension)))
    lake = [ColumnVectors(ColumnRef("x", "t", "c"), ["a"], a[None])]
    index = PexesoIndex.build(lake, SPEC, IndexShape(n_pivots=2, levels=3))
    query = Query(("a", "b"), np.stack([a, b]), np.array([3, 2]), SPEC)  # |Q| = 5, 3 of them match
    for method in ("pexeso", "brute"):
        assert _answers(index, query, 0.01, 0.6, method) == [("x", 3)]  # need = ceil(0.6·5) = 3: inclusive
        assert _answers(index, query, 0.01, 0.61, method) == []
    assert need_count(0.6, 5) == 3 and need_count(0.61, 5) == 4 and need_count(1.0, 7) == 7


@pytest.mark.parametrize("method", ["pexeso", "brute"])
def test_a_pair_exactly_at_distance_tau_matches_and_one_ulp_further_does_not(method: str) -> None:
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((4, SPEC.dimension))
    lake = clustered_lake(rng, n_columns=30, centres=centres, spread=0.05)
    edge = unit(centres[:3] + rng.standard_normal((3, SPEC.dimension)) * 0.05)
    lake += [ColumnVectors(ColumnRef(f"edge{i}", "t-edge", f"e{i}"), ["x"], edge[i : i + 1]) for i in range(3)]
    index = PexesoIndex.build(lake, SPEC, IndexShape(n_pivots=3, levels=5))
    for i in range(3):
        q = unit(edge[i : i + 1] + rng.standard_normal(SPEC.dimension) * 0.03)
        d = float(distance_rows(q, edge[i : i + 1])[0])  # the distance, as the search defines it
        query = Query(("q",), q, np.array([1]), SPEC)
        at = {
            m.column_id for m in search(index, query, tau=d / 2, threshold=1.0, method=method)
        }  # 2·(d/2) == d exactly
        below = {m.column_id for m in search(index, query, tau=np.nextafter(d, 0.0) / 2, threshold=1.0, method=method)}
        assert f"edge{i}" in at and f"edge{i}" not in below
        assert below == {
            c.ref.column_id for c in lake if (distance_rows(np.repeat(q, len(c.vectors), 0), c.vectors) < d).any()
        }


def test_tau_zero_finds_identical_vectors_only() -> None:
    rng = np.random.default_rng(11)
    lake = clustered_lake(rng, n_columns=20, centres=rng.standard_normal((3, SPEC.dimension)), spread=0.05)
    index = PexesoIndex.build(lake, SPEC, IndexShape(n_pivots=3, levels=4))
    target = next(c for c in lake if len(c.vectors))
    query = Query(("q",), target.vectors[:1], np.array([1]), SPEC)
    for method in ("pexeso", "brute"):
        assert target.ref.column_id in {
            m.column_id for m in search(index, query, tau=0.0, threshold=1.0, method=method)
        }  # type: ignore[arg-type]


def test_random_add_and_delete_batches_answer_as_a_fresh_index_and_brute_force() -> None:
    rng = np.random.default_rng(5)
    centres = rng.standard_normal((6, SPEC.dimension))
    held = clustered_lake(rng, n_columns=30, centres=centres, spread=0.04, prefix="a")
    index = PexesoIndex.build(held, SPEC, IndexShape(n_pivots=4, levels=5))
    pivots = index.pivots.copy()
    for batch in range(5):
        new = clustered_lake(
            rng, n_columns=int(rng.integers(0, 15)), centres=centres * (1 + batch / 5), spread=0.04, prefix=f"b{batch}-"
        )
        gone = [c.ref.column_id for c in held if rng.random() < 0.25]
        index = index.delete(gone).add(new)
        held = [c for c in held if c.ref.column_id not in gone] + new
        assert np.array_equal(index.pivots, pivots)  # new vectors mapped with the existing pivots
        query = clustered_query(rng, centres=centres, spread=0.04, n=80)
        tau, threshold = float(rng.uniform(0.01, 0.1)), float(rng.uniform(0.1, 0.9))
        expected = oracle(held, query, tau, threshold)
        assert _answers(index, query, tau, threshold, "pexeso") == expected
        assert _answers(index, query, tau, threshold, "brute") == expected
        rebuilt = index.rebuild()
        assert _answers(rebuilt, query, tau, threshold, "pexeso") == expected
    with pytest.raises(ValueError, match="already indexed"):
        index.add(held[-1:])


@pytest.mark.parametrize("method", ["pexeso", "brute"])
def test_an_index_searched_in_partitions_answers_as_the_whole_index(method: str) -> None:
    """Columns cut into consecutive partitions (the memory budget's shape: whole columns, shared
    pivots), each searched alone: the merged answers and their order equal the whole index's and
    the oracle's, with and without k."""
    rng = np.random.default_rng(9)
    centres = rng.standard_normal((5, SPEC.dimension))
    lake = clustered_lake(rng, n_columns=40, centres=centres, spread=0.05)
    whole = PexesoIndex.build(lake, SPEC, IndexShape(n_pivots=3, levels=4))
    cuts = [0, 7, 8, 23, 40]  # one partition of a single column
    ids = [c.ref.column_id for c in lake]
    parts = [whole.delete(ids[:lo] + ids[hi:]) for lo, hi in itertools.pairwise(cuts)]
    assert sum(len(p.columns) for p in parts) == len(whole.columns) and all(len(p.columns) for p in parts)
    for _ in range(4):
        query = clustered_query(rng, centres=centres, spread=0.05, n=60)
        tau, threshold = float(rng.uniform(0.05, 0.15)), float(rng.uniform(0.1, 0.4))
        expected = oracle(lake, query, tau, threshold)
        assert len(expected) > 3, "the query should join several columns for this test to mean anything"
        got = search_partitions(parts, query, tau=tau, threshold=threshold, method=method)  # type: ignore[arg-type]
        assert [(m.column_id, m.n_matched) for m in got] == expected
        full = search(whole, query, tau=tau, threshold=threshold, k=3, method=method)  # type: ignore[arg-type]
        cut = search_partitions(parts, query, tau=tau, threshold=threshold, k=3, method=method)  # type: ignore[arg-type]
        assert cut == full


def test_a_query_embedded_otherwise_is_refused() -> None:
    lake = [embed_column(ColumnRef("c1", "t1", "city"), ["New York", "Boston"], PEXESO_EMBEDDER)]
    index = PexesoIndex.build(lake, SPEC.of(PEXESO_EMBEDDER), IndexShape(n_pivots=2, levels=3))
    with pytest.raises(
        EmbedderMismatchError, match=r"char-trigram v1 \(64 dims\) but the index was built with char-ngram-2-4"
    ):
        search(index, Query.embed(["Boston"], CharNgramEmbedder()))
    found = search(index, Query.embed(["BOSTON", "boston.", None, ""], PEXESO_EMBEDDER), tau=0.01, threshold=1.0)
    assert [(m.column_id, m.n_matched) for m in found] == [("c1", 2)]
    assert found[0].examples[0].lake_value == "Boston" and found[0].examples[0].distance < 1e-6


def test_bad_queries_and_parameters_are_refused() -> None:
    with pytest.raises(EmptyQueryError):
        Query.embed([None, "", "..."], PEXESO_EMBEDDER)
    rng = np.random.default_rng(0)
    lake = clustered_lake(rng, n_columns=5, centres=rng.standard_normal((2, SPEC.dimension)), spread=0.05)
    index = PexesoIndex.build(lake, SPEC, IndexShape(n_pivots=2, levels=2))
    query = clustered_query(rng, centres=rng.standard_normal((2, SPEC.dimension)), spread=0.05, n=3)
    for bad in ({"tau": -0.1}, {"tau": 1.5}, {"threshold": 0.0}, {"threshold": 1.2}, {"k": 0}, {"method": "faiss"}):
        with pytest.raises(UserError, match=next(iter(bad))):
            search(index, query, **bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"n_pivots \* levels"):
        IndexShape(n_pivots=8, levels=8)


def test_k_keeps_the_best_answers() -> None:
    rng = np.random.default_rng(2)
    centres = rng.standard_normal((3, SPEC.dimension))
    lake = clustered_lake(rng, n_columns=40, centres=centres, spread=0.05)
    index = PexesoIndex.build(lake, SPEC, IndexShape(n_pivots=3, levels=4))
    query = clustered_query(rng, centres=centres, spread=0.05, n=30)
    everything = search(index, query, tau=0.08, threshold=0.2)
    assert len(everything) > 5
    assert search(index, query, tau=0.08, threshold=0.2, k=5) == everything[:5]


_point = st.lists(st.floats(-1.0, 1.0, allow_nan=False, allow_subnormal=False), min_size=4, max_size=4)


@settings(max_examples=150, deadline=None)
@given(
    lake=st.lists(st.lists(_point, min_size=1, max_size=6), min_size=1, max_size=6),
    query=st.lists(_point, min_size=1, max_size=8),
    tau=st.floats(0.0, 1.0),
    n_pivots=st.integers(1, 4),
    levels=st.integers(1, 6),
    jitter=st.sampled_from([0.0, 1e-7, 1e-3]),
)
def test_the_lemmas_never_drop_a_true_match(
    lake: list[list[list[float]]], query: list[list[float]], tau: float, n_pivots: int, levels: int, jitter: float
) -> None:
    spec = SPEC.__class__("tiny", 1, 4)
    raw = np.array([p for col in lake for p in col]) + 1e-3
    if (np.linalg.norm(raw, axis=1) < 1e-6).any() or (np.linalg.norm(np.array(query) + 1e-3, axis=1) < 1e-6).any():
        return
    columns = []
    at = 0
    for i, col in enumerate(lake):
        vectors = unit(raw[at : at + len(col)])
        at += len(col)
        columns.append(ColumnVectors(ColumnRef(f"c{i}", "t", f"c{i}"), [str(j) for j in range(len(col))], vectors))
    index = PexesoIndex.build(columns, spec, IndexShape(n_pivots=n_pivots, levels=levels, pivot_method="random"))
    q = unit(np.array(query) + 1e-3)
    q = unit(np.concatenate([q, unit(index.vectors[: len(q)] + jitter)]))  # queries on and near lake vectors too
    probe = Query(tuple(map(str, range(len(q)))), q, np.ones(len(q), np.int64), spec)
    radius = 2 * tau
    # every true (query, leaf cell of a matching lake vector) pair survives blocking
    mapped = map_to_pivots(q, index.pivots)
    blocked = pexeso_search._block(index.grid, mapped, radius, math.inf)
    assert blocked is not None
    s_q, s_lo, s_hi, c_q, c_leaf = blocked
    leaf_of = np.searchsorted(index.grid.keys[levels], index.keys)
    for qi in range(len(q)):
        d = distance_rows(np.repeat(q[qi : qi + 1], len(index), 0), index.vectors)
        for x in np.flatnonzero(d <= radius):
            leaf = leaf_of[x]
            covered = ((s_q == qi) & (s_lo <= leaf) & (leaf < s_hi)).any() or ((c_q == qi) & (c_leaf == leaf)).any()
            assert covered, (qi, x, d[x])
        for x in np.flatnonzero(d > radius):  # and what the matching lemmas accept is a true match
            leaf = leaf_of[x]
            assert not ((s_q == qi) & (s_lo <= leaf) & (leaf < s_hi)).any(), (qi, x, d[x])
    # and the verified pairs are exactly brute force's (need = 1: Lemma 7 prunes nothing early)
    hits = pexeso_search._hits_pexeso(index, probe, radius, 1)
    assert np.array_equal(np.sort(hits), pexeso_search._hits_brute(index, probe, radius))
    assert leaf_keys(mapped, levels).shape == (len(q),)
