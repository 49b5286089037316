"""The precomputed semantic join lists, on both catalog databases: after a full build, after a batch
that adds columns (kept lists gain them by merging), after one that deletes a table (lists naming it
are computed again), and around a refresh over the work bound, every list equals the oracle: the
column's own values searched by computing every distance (`tests.pexeso.lake.oracle`)."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import Engine, func, insert, select

from catalog.core.errors import UserError
from catalog.search.pexeso import lists, range_join
from catalog.search.pexeso.index import ColumnRef, ColumnVectors, IndexShape, PexesoIndex
from catalog.search.pexeso.lists import LIST_K, LIST_T, LIST_TAU, refresh_semantic_lists, semantic_joinable
from catalog.search.pexeso.models import PexesoColumn, PexesoList, PexesoMeta
from catalog.search.pexeso.pivots import select_pivots
from catalog.search.pexeso.range_join import RangeJoin
from catalog.search.pexeso.repartition import assign_added, repartition
from catalog.search.pexeso.search import Query
from catalog.search.pexeso.source import budget_vectors
from catalog.search.pexeso.vector_blocks import LakeBlocks, catalog_blocks
from tests.pexeso.lake import SPEC, clustered_lake, oracle, publish_columns, sparse_centres, write_facts

SPREAD = 0.02  # two vectors around one centre lie about 0.11 apart: near the lists' radius, 2τ = 0.12


def _expected(columns: list[ColumnVectors]) -> dict[str, list[tuple[str, int]]]:
    """Each non-empty column's list by the oracle: its values (each once) against every column."""
    out = {}
    for col in columns:
        if not len(col.vectors):
            continue
        query = Query(tuple(col.values), col.vectors, np.ones(len(col.vectors), np.int64), SPEC)
        found = [(c, m) for c, m in oracle(columns, query, LIST_TAU, LIST_T) if c != col.ref.column_id]
        out[col.ref.column_id] = found[:LIST_K]
    return out


def _published(engine: Engine) -> dict[str, list[tuple[str, int]]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(PexesoList.column_id, PexesoList.rank, PexesoList.candidate_column_id, PexesoList.n_matched)
        ).all()
    out: dict[str, list[tuple[int, str, int]]] = {}
    for column_id, rank, candidate, n_matched in rows:
        out.setdefault(column_id, [])
        if rank:
            out[column_id].append((rank, candidate, n_matched))
    return {c: [(cand, m) for _, cand, m in sorted(entries)] for c, entries in out.items()}


def _refresh(engine: Engine, index: PexesoIndex, added: list[str] | None, touched: list[str] = []) -> dict[str, int]:  # noqa: B006
    with engine.begin() as conn:
        return refresh_semantic_lists(conn, lambda: LakeBlocks.of_index(index), added, touched)


def _centres(rng: np.random.Generator, n: int, *, sparse: bool) -> np.ndarray:
    """Dense centres (the range join has nothing to key: brute force) or sparse ones (keyed)."""
    return sparse_centres(rng, n) if sparse else rng.standard_normal((n, SPEC.dimension))


def _take_join_path(lake: list[ColumnVectors], monkeypatch: pytest.MonkeyPatch, *, sparse: bool) -> None:
    """Make the lists' range join take its keyed path exactly when the lake is sparse: in 16
    dimensions the keys filter too little to be chosen on cost, so keyed pairs are made free."""
    if sparse:
        monkeypatch.setattr(range_join, "_PAIR_COST", 0)
    vectors = np.concatenate([c.vectors for c in lake if len(c.vectors)])
    join = RangeJoin.fit(vectors, 2 * LIST_TAU)
    keys = join.keys(vectors)
    assert len(keys.unkeyed) < len(vectors) / 2
    assert (join.cost(keys, keys) < len(vectors) ** 2) == sparse


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_lists_equal_the_oracle_through_build_merge_delete_and_the_work_bound(
    catalog_engine: Engine, monkeypatch: pytest.MonkeyPatch, sparse: bool
) -> None:
    rng = np.random.default_rng(7)
    centres = _centres(rng, 6, sparse=sparse)
    lake = clustered_lake(rng, n_columns=24, centres=centres, spread=SPREAD)
    _take_join_path(lake, monkeypatch, sparse=sparse)
    index = PexesoIndex.build(lake, SPEC, IndexShape(n_pivots=3, levels=4))
    with catalog_engine.begin() as conn:
        conn.execute(insert(PexesoMeta), [{"key": "index_version", "value": "1"}])
    counts = _refresh(catalog_engine, index, None)
    expected = _expected(lake)
    assert counts["pexeso_lists_computed"] == len(expected)
    assert _published(catalog_engine) == expected
    assert sum(map(len, expected.values())) > len(expected)  # lists with several columns

    # a batch that adds columns near two centres and a copy of a listed column: kept lists gain
    # them without being computed again
    added = clustered_lake(rng, n_columns=3, centres=centres[:2], spread=SPREAD, prefix="new")
    source = next(c for c in lake if len(c.vectors) > 5)
    added.append(ColumnVectors(ColumnRef("copy", "t-copy", "col0"), source.values, source.vectors))
    lake += added
    index = index.add(added)
    counts = _refresh(catalog_engine, index, sorted({c.ref.table_id for c in added}))
    assert counts["pexeso_lists_merged"] > 0
    assert counts["pexeso_lists_computed"] < len(_expected(lake))
    assert _published(catalog_engine) == _expected(lake)

    # a batch that deletes a table: the lists naming it are computed again (their k+1-th is unknown)
    gone = "t-c1"
    lake = [c for c in lake if c.ref.table_id != gone]
    index = index.delete([f"c{i}" for i in (3, 4, 5)])
    _refresh(catalog_engine, index, [], [gone])
    assert _published(catalog_engine) == _expected(lake)

    # over the work bound: no list is kept, and the lookup says why; the next refresh within it
    # (an empty batch: the lists were not current, so it builds them all) brings them back
    bound = lists.MAX_LIST_WORK
    monkeypatch.setattr(lists, "MAX_LIST_WORK", -1)  # below any work (free keyed pairs cost 0)
    assert _refresh(catalog_engine, index, None)["pexeso_lists_over_bound"] == 1
    assert _published(catalog_engine) == {}
    with catalog_engine.connect() as conn, pytest.raises(UserError, match="not precomputed"):
        semantic_joinable(conn, lake[0].ref.column_id)
    monkeypatch.setattr(lists, "MAX_LIST_WORK", bound)
    _refresh(catalog_engine, index, [], [])
    assert _published(catalog_engine) == _expected(lake)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_lists_read_from_the_catalog_a_budget_at_a_time_equal_the_oracle(
    catalog_engine: Engine, monkeypatch: pytest.MonkeyPatch, sparse: bool
) -> None:
    """The publisher's path: the lake read back from the catalog in blocks of at most half the
    memory budget, cut along the JSD partitions, blocks out of each other's reach never joined;
    through a build and a batch that adds columns (merged into kept lists)."""
    rng = np.random.default_rng(11)
    centres = _centres(rng, 6, sparse=sparse)
    lake = [
        c
        for i in range(6)
        for c in clustered_lake(rng, n_columns=6, centres=centres[i : i + 1], spread=SPREAD, prefix=f"p{i}-")
    ]
    _take_join_path(lake, monkeypatch, sparse=sparse)
    shape = IndexShape(n_pivots=3, levels=4, memory_budget_mb=0.04)
    vectors = np.concatenate([c.vectors for c in lake if len(c.vectors)])
    pivots = select_pivots(vectors, shape.n_pivots, method="pca", seed=0)
    with catalog_engine.begin() as conn:
        publish_columns(conn, lake, 1)
        frame = write_facts(conn, shape, pivots, len(vectors))
        repartition(conn, frame)
        blocks = catalog_blocks(conn, shape.memory_budget_mb)
        capacity = budget_vectors(shape.memory_budget_mb, SPEC, shape)
        assert len(blocks.block_columns) > 3
        assert all(blocks.sizes[c].sum() <= capacity // 2 or len(c) == 1 for c in blocks.block_columns)
        n = len(blocks.block_columns)
        assert any(blocks.apart(i, j, 2 * LIST_TAU) for i in range(n) for j in range(n)), "blocks should be skipped"
        refresh_semantic_lists(conn, lambda: catalog_blocks(conn, shape.memory_budget_mb), None)
    assert _published(catalog_engine) == _expected(lake)

    added = clustered_lake(rng, n_columns=4, centres=centres[:2], spread=SPREAD, prefix="new")
    lake += added
    with catalog_engine.begin() as conn:
        first = (conn.execute(select(func.max(PexesoColumn.column_ref))).scalar() or 0) + 1
        publish_columns(conn, added, first)
        assign_added(conn, frame, first)
        counts = refresh_semantic_lists(
            conn, lambda: catalog_blocks(conn, shape.memory_budget_mb), sorted({c.ref.table_id for c in added})
        )
    assert counts["pexeso_lists_merged"] > 0
    assert _published(catalog_engine) == _expected(lake)
