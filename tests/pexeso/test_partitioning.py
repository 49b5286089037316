"""PEXESO's partitions by Jensen-Shannon clustering under a memory budget: the divergence's
properties, the clustering (families apart, the budget kept), partition skipping never dropping a
true match (property test), and searches over the catalog's partitions equal to brute force and the
oracle for random τ and T, after random ADD/DELETE batches, on both catalog databases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, delete, func, select

from catalog.core.errors import SettingsError, UserError
from catalog.search.pexeso import search as pexeso_search
from catalog.search.pexeso.index import ColumnRef, ColumnVectors, IndexShape
from catalog.search.pexeso.models import PexesoColumn
from catalog.search.pexeso.partitioning import (
    LN2,
    ColumnSummaries,
    Histograms,
    assign_with_capacity,
    cluster,
    jsd,
    reachable,
    summarise,
)
from catalog.search.pexeso.pivots import map_to_pivots, select_pivots
from catalog.search.pexeso.repartition import assign_added, partition_fact, repartition, repartition_due
from catalog.search.pexeso.search import Query, distance_rows, search_partitions
from catalog.search.pexeso.settings import PexesoSettings
from catalog.search.pexeso.source import Partitions, SearchPlan, budget_vectors, partitions
from tests.pexeso.lake import SPEC, clustered_lake, clustered_query, oracle, publish_columns, unit, write_facts


@pytest.fixture(autouse=True)
def _always_verify_through_the_index(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pexeso_search, "DENSE_SHARE", math.inf)


def _histograms(rows: list[dict[int, float]]) -> Histograms:
    r, b, p = [], [], []
    for i, h in enumerate(rows):
        total = sum(h.values())
        for k in sorted(h):
            r.append(i)
            b.append(k)
            p.append(h[k] / total)
    return Histograms(len(rows), np.array(r, np.int64), np.array(b, np.int64), np.array(p))


def _dense_jsd(a: np.ndarray, b: np.ndarray) -> float:
    m = (a + b) / 2
    kl = lambda x: float(np.sum(np.where(x > 0, x * np.log(np.where(x > 0, x, 1) / np.where(m > 0, m, 1)), 0)))  # noqa: E731
    return 0.5 * kl(a) + 0.5 * kl(b)


# ---------------------------------------------------------------------- the divergence
def test_jsd_is_symmetric_zero_for_equal_histograms_bounded_by_ln2_and_the_textbook_value() -> None:
    rng = np.random.default_rng(0)
    rows = [
        {int(k): float(rng.random()) for k in rng.choice(12, size=int(rng.integers(1, 8)), replace=False)}
        for _ in range(30)
    ]
    rows += [{100: 1.0}, {101: 2.0, 102: 1.0}]  # disjoint from everything
    h = _histograms(rows)
    vocabulary = np.unique(h.bins)
    dense = np.zeros((h.n_rows, len(vocabulary)))
    dense[h.rows, np.searchsorted(vocabulary, h.bins)] = h.probs
    d = jsd(h, dense, vocabulary)  # every histogram against every other one
    assert np.allclose(d, d.T, atol=1e-12)
    assert np.allclose(np.diag(d), 0.0, atol=1e-12)
    assert (d >= 0).all() and (d <= LN2 + 1e-12).all()
    assert d[-2, -1] == pytest.approx(LN2) and d[0, -1] == pytest.approx(LN2)
    for i, j in [(0, 1), (2, 7), (5, 29), (3, 30)]:
        assert d[i, j] == pytest.approx(_dense_jsd(dense[i], dense[j]), abs=1e-12)
    assert 0 < d[0, 1] < LN2


def _two_families(rng: np.random.Generator, n: int) -> tuple[list[ColumnVectors], np.ndarray]:
    """n columns, the even ones around one direction, the odd ones around the opposite one."""
    base = unit(rng.standard_normal((1, SPEC.dimension)))[0]
    columns = []
    for i in range(n):
        sign = 1.0 if i % 2 == 0 else -1.0
        size = int(rng.integers(3, 25))
        vectors = unit(sign * base + rng.standard_normal((size, SPEC.dimension)) * 0.15)
        columns.append(ColumnVectors(ColumnRef(f"f{i}", f"t{i}", "c"), [f"{i}:{j}" for j in range(size)], vectors))
    return columns, np.array([i % 2 for i in range(n)])


def _summaries(columns: list[ColumnVectors], pivots: np.ndarray, level: int = 2) -> ColumnSummaries:
    vectors = np.concatenate([c.vectors for c in columns])
    column_of = np.repeat(np.arange(len(columns)), [len(c.vectors) for c in columns])
    return summarise(map_to_pivots(vectors, pivots), column_of, len(columns), level)


def test_the_clustering_puts_two_separated_families_of_columns_apart() -> None:
    rng = np.random.default_rng(1)
    columns, family = _two_families(rng, 40)
    vectors = np.concatenate([c.vectors for c in columns])
    pivots = select_pivots(vectors, 3, method="pca", seed=0)
    s = _summaries(columns, pivots)
    parts = cluster(s, capacity=int(s.sizes.sum()), seed=3)  # room for everything: k = 2 at FILL 0.8
    assert len(parts.centres) == 2
    for p in range(2):
        assert len(set(family[parts.labels == p].tolist())) == 1  # no partition mixes the families
    assert 0.5 < parts.quality <= 1.0
    # under a tighter budget, a family may span partitions but a partition never spans families
    tight = cluster(s, capacity=int(s.sizes.sum() / 5), seed=3)
    assert len(tight.centres) >= 5
    assert all(len(set(family[tight.labels == p].tolist())) == 1 for p in range(len(tight.centres)))


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 60), min_size=1, max_size=40),
    capacity=st.integers(1, 120),
    seed=st.integers(0, 3),
)
def test_no_partition_holds_more_than_the_budget_unless_it_is_one_column(
    sizes: list[int], capacity: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((3, SPEC.dimension))
    columns = [
        ColumnVectors(
            c.ref, [str(j) for j in range(n)], unit(centres[i % 3] + rng.standard_normal((n, SPEC.dimension)) * 0.3)
        )
        for i, (c, n) in enumerate(
            zip(clustered_lake(rng, n_columns=len(sizes), centres=centres, spread=0.1), sizes, strict=True)
        )
    ]
    pivots = select_pivots(np.concatenate([c.vectors for c in columns]), 3, method="random", seed=seed)
    s = _summaries(columns, pivots)
    parts = cluster(s, capacity=capacity, seed=seed)
    held = np.bincount(parts.labels, weights=s.sizes)
    members = np.bincount(parts.labels)
    assert ((held <= capacity) | (members == 1)).all()
    assert (members > 0).all() and len(parts.labels) == len(sizes)
    assert np.allclose(
        parts.divergence, jsd(s.histograms, parts.centres, parts.vocabulary)[np.arange(len(sizes)), parts.labels]
    )


def test_assignment_under_capacity_keeps_the_most_attached_and_turns_the_rest_away() -> None:
    d = np.array([[0.1, 0.5], [0.2, 0.21], [0.05, 0.6], [0.3, 0.4]])
    sizes = np.array([5, 5, 5, 20])
    labels = assign_with_capacity(d, sizes, capacity=10, loads=np.array([0, 0]))
    # centre 0 can hold two of rows 0-2: row 1 (least attached: 0.21 − 0.2) moves to centre 1;
    # row 3 (20 vectors) fits nowhere
    assert labels.tolist() == [0, 1, 0, -1]
    assert assign_with_capacity(d, sizes, capacity=10, loads=np.array([10, 0])).tolist() == [1, 1, -1, -1]


# ---------------------------------------------------------------------- skipping is exact
_point = st.lists(st.floats(-1.0, 1.0, allow_nan=False, allow_subnormal=False), min_size=4, max_size=4)


@settings(max_examples=150, deadline=None)
@given(
    lake=st.lists(st.lists(_point, min_size=1, max_size=6), min_size=1, max_size=10),
    query=st.lists(_point, min_size=1, max_size=6),
    tau=st.floats(0.0, 1.0),
    n_pivots=st.integers(1, 4),
    capacity=st.integers(1, 12),
    jitter=st.sampled_from([0.0, 1e-7, 1e-3]),
)
def test_partition_skipping_never_drops_a_true_match(
    lake: list[list[list[float]]], query: list[list[float]], tau: float, n_pivots: int, capacity: int, jitter: float
) -> None:
    raw = np.array([p for col in lake for p in col]) + 1e-3
    if (np.linalg.norm(raw, axis=1) < 1e-6).any() or (np.linalg.norm(np.array(query) + 1e-3, axis=1) < 1e-6).any():
        return
    vectors = unit(raw)
    column_of = np.repeat(np.arange(len(lake)), [len(c) for c in lake])
    pivots = select_pivots(vectors, n_pivots, method="random", seed=0)
    mapped = map_to_pivots(vectors, pivots)
    parts = cluster(summarise(mapped, column_of, len(lake), 2), capacity)
    q = unit(np.array(query) + 1e-3)
    q = unit(np.concatenate([q, unit(vectors[: len(q)] + jitter)]))  # queries on and near lake vectors too
    live = reachable(map_to_pivots(q, pivots), parts.low, parts.high, 2 * tau)
    for qi in range(len(q)):
        d = distance_rows(np.repeat(q[qi : qi + 1], len(vectors), 0), vectors)
        for x in np.flatnonzero(d <= 2 * tau):
            assert live[parts.labels[column_of[x]]], (qi, x, d[x])


# ---------------------------------------------------------------------- through the catalog
def _searched(
    engine: Engine, query: Query, tau: float, threshold: float, budget_mb: float, method: str
) -> tuple[list[tuple[str, int]], SearchPlan]:
    with engine.connect() as conn:
        parts = partitions(conn, budget_mb)
        plan = parts.plan(query.vectors, tau)
        found = search_partitions(
            (parts.load(load) for load in plan.loads),
            query,
            tau=tau,
            threshold=threshold,
            method=method,  # type: ignore[arg-type]
        )
    return [(m.column_id, m.n_matched) for m in found], plan


def _one_topic(rng: np.random.Generator, n: int, centre: np.ndarray, spread: float, prefix: str) -> list[ColumnVectors]:
    return clustered_lake(rng, n_columns=n, centres=centre[None], spread=spread, prefix=prefix)


def _check_budget(engine: Engine, capacity: int) -> int:
    with engine.connect() as conn:
        rows = conn.execute(
            select(PexesoColumn.partition, func.count(), func.sum(PexesoColumn.n_values)).group_by(
                PexesoColumn.partition
            )
        ).all()
    assert all(p is not None for p, _, _ in rows)
    assert all(held <= capacity or members == 1 for _, members, held in rows)
    return len(rows)


@pytest.mark.parametrize("seed", range(3))
def test_search_over_budgeted_partitions_equals_the_oracle_through_add_and_delete_batches(
    catalog_engine: Engine, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((int(rng.integers(4, 10)), SPEC.dimension))
    spread = float(rng.uniform(0.01, 0.06))
    # most columns around one centre each (what partitions can tell apart), some around all of them
    held = [c for i, centre in enumerate(centres) for c in _one_topic(rng, 8, centre, spread, f"a{i}-")]
    held += clustered_lake(rng, n_columns=10, centres=centres, spread=spread, prefix="mix")
    vectors = np.concatenate([c.vectors for c in held if len(c.vectors)])
    shape = IndexShape(n_pivots=int(rng.integers(2, 6)), levels=int(rng.integers(2, 6)), memory_budget_mb=0.05)
    pivots = select_pivots(vectors, shape.n_pivots, method="pca", seed=seed)
    capacity = budget_vectors(shape.memory_budget_mb, SPEC, shape)
    assert capacity * 4 < len(vectors), "the budget must be well below the lake"
    with catalog_engine.begin() as conn:
        publish_columns(conn, held, 1)
        frame = write_facts(conn, shape, pivots, len(vectors))
        assert repartition(conn, frame)["pexeso_partitions"] >= 4
    assert _check_budget(catalog_engine, capacity) >= 4
    skipped = opened = 0
    for batch in range(4):
        for _ in range(3):
            topics = centres[rng.choice(len(centres), size=int(rng.integers(1, 3)), replace=False)]
            query = clustered_query(rng, centres=topics, spread=spread, n=int(rng.integers(1, 120)))
            tau, threshold = float(rng.uniform(0.0, 0.1)), float(rng.uniform(0.05, 1.0))
            expected = oracle(held, query, tau, threshold)
            got, plan = _searched(catalog_engine, query, tau, threshold, shape.memory_budget_mb, "pexeso")
            assert got == expected, (batch, tau, threshold)
            assert _searched(catalog_engine, query, tau, threshold, shape.memory_budget_mb / 3, "brute")[0] == expected
            assert _searched(catalog_engine, query, tau, threshold, 1000.0, "pexeso")[0] == expected  # one load
            skipped += plan.n_skipped
        # a batch: some columns deleted, others added near shifted centres
        gone = [c.ref.column_id for c in held if rng.random() < 0.2]
        new = clustered_lake(
            rng,
            n_columns=int(rng.integers(5, 40)),
            centres=centres * (1 + batch / 4),
            spread=spread,
            prefix=f"b{batch}-",
        )
        held = [c for c in held if c.ref.column_id not in gone] + new
        with catalog_engine.begin() as conn:
            conn.execute(delete(PexesoColumn).where(PexesoColumn.column_id.in_(gone)))
            first = (conn.execute(select(func.max(PexesoColumn.column_ref))).scalar() or 0) + 1
            publish_columns(conn, new, first)
            counts = assign_added(conn, frame, first)
            opened += counts["pexeso_partitions_opened"]
            fact = partition_fact(conn)
        assert counts["pexeso_partitions"] >= 4 and 0.0 <= fact["quality"] <= 1.0
        _check_budget(catalog_engine, capacity)
    assert skipped > 0, "a query at small τ on a clustered lake should skip some partitions"
    # a column larger than the budget is added: no partition has room, it opens one of its own
    big = unit(centres[0] + rng.standard_normal((capacity + 5, SPEC.dimension)) * spread)
    held.append(ColumnVectors(ColumnRef("big", "t-big", "c"), [f"big{j}" for j in range(len(big))], big))
    with catalog_engine.begin() as conn:
        first = (conn.execute(select(func.max(PexesoColumn.column_ref))).scalar() or 0) + 1
        publish_columns(conn, held[-1:], first)
        opened += assign_added(conn, frame, first)["pexeso_partitions_opened"]
    assert opened >= 1
    _check_budget(catalog_engine, capacity)
    query = clustered_query(rng, centres=centres[:1], spread=spread, n=50)
    got, _ = _searched(catalog_engine, query, 0.05, 0.3, shape.memory_budget_mb, "pexeso")
    assert got == oracle(held, query, 0.05, 0.3) and "big" in {c for c, _ in got}


def test_a_rebuild_is_due_when_the_quality_fell_by_the_share() -> None:
    fact = {"quality_at_partitioning": 0.8, "quality": 0.7}
    assert not repartition_due(fact, 0.2) and repartition_due(fact, 0.1) and not repartition_due({}, 0.1)


def test_a_bad_budget_is_refused_with_the_setting_named() -> None:
    for bad in ({"memory_budget_mb": 0}, {"memory_budget_mb": -3.0}, {"repartition_share": 0.0}):
        with pytest.raises(SettingsError, match=f"index.pexeso.{next(iter(bad))}"):
            PexesoSettings(**bad)  # type: ignore[arg-type]
    assert PexesoSettings(memory_budget_mb=0.5).shape.memory_budget_mb == 0.5
    with pytest.raises(UserError, match="memory budget must be a positive"):
        budget_vectors(0.0, SPEC, IndexShape())


def test_an_index_without_columns_packs_into_no_loads() -> None:
    """A lake with nothing textual publishes no PEXESO column: its list refresh and searches load
    nothing (`juncture index --full` on such a lake once failed here)."""
    empty = np.zeros(0, np.int64)
    parts = Partitions("1", 10, empty, empty, empty, np.zeros((0, 3)), np.zeros((0, 3)), None, None)  # type: ignore[arg-type]
    assert parts.with_capacity(5) == []
