"""The same searches through the catalog database (SQLite and PostgreSQL) as in memory and brute force."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import Engine, delete, select

from bench.josie_lake import store_index
from catalog.core.errors import UnknownIdError
from catalog.search.josie import (
    METHODS,
    DbIndexReader,
    build_memory_index,
    cost_model,
    search_join,
    search_tokens,
)
from catalog.search.josie.brute_force import brute_force_top_k
from catalog.search.josie.cost_model import DEFAULT_COSTS
from catalog.search.josie.models import JosieCostModel, JosiePosting, JosieSet, JosieToken
from catalog.search.josie.reader import clear_dictionary_cache
from tests.josie_search.lakes import random_lake, random_query


@pytest.fixture
def lake_in_catalog(catalog_engine: Engine) -> tuple[Engine, dict[str, set[str]]]:
    rng = random.Random(11)
    lake = random_lake(rng, n_sets=150, vocab=120)
    # non-dense, shuffled set ids, as after incremental updates
    ids = {cid: 3 * i + 7 for i, cid in enumerate(rng.sample(sorted(lake), len(lake)))}
    with catalog_engine.begin() as conn:
        store_index(conn, build_memory_index(lake, set_ids=ids))
    return catalog_engine, lake


@pytest.mark.parametrize("cached", [False, True], ids=["plain", "cached"])
def test_db_reader_answers_like_brute_force(lake_in_catalog: tuple[Engine, dict[str, set[str]]], cached: bool) -> None:
    """Set ids are shuffled, so ties at the k-th overlap must be broken by column_id, not set id: the
    cached reader by the column ranks it holds, the plain one by describing every tied set."""
    engine, lake = lake_in_catalog
    rng = random.Random(5)
    clear_dictionary_cache()
    with engine.connect() as conn:
        reader = DbIndexReader(conn, cache_dictionary=cached)
        n_ties = 0
        for _ in range(6):
            query = random_query(rng, lake, 120)
            n_matching = sum(1 for t in lake.values() if t & query)
            for k in (1, 10, 100, n_matching + 2):
                expected = brute_force_top_k(lake, query, k)
                tied = [c for c, t in lake.items() if expected and len(t & query) == expected[-1].overlap]
                n_ties += len(tied) > len([r for r in expected if r.overlap == expected[-1].overlap])
                for method in METHODS:
                    assert search_tokens(reader, query, k=k, method=method).results == expected, (method, k)
        assert n_ties >= 5  # answers that had to choose among tied columns


def test_db_reader_reads_suffixes_and_lists_exactly(lake_in_catalog: tuple[Engine, dict[str, set[str]]]) -> None:
    engine, lake = lake_in_catalog
    with engine.connect() as conn:
        reader = DbIndexReader(conn)
        cid = max(lake, key=lambda c: len(lake[c]))
        sid = reader.set_id_of(cid)
        assert sid is not None
        full = reader.read_set_suffix(sid, 0)
        assert len(full) == len(lake[cid]) and list(full) == sorted(full)
        assert list(reader.read_set_suffix(sid, 3)) == list(full[3:])
        assert len(reader.read_set_suffix(sid, len(full))) == 0
        tokens = reader.lookup_tokens([*sorted(lake[cid]), "absent"])
        assert [q.token_id for q in tokens] == list(full)
        plist = reader.read_list(tokens[0].token_id)
        assert sid in plist.set_ids.tolist() and len(plist.set_ids) == tokens[0].frequency
        assert reader.describe_sets([sid])[sid].column_id == cid


def test_raw_values_are_normalized_and_exclude_works(lake_in_catalog: tuple[Engine, dict[str, set[str]]]) -> None:
    engine, lake = lake_in_catalog
    cid = max(lake, key=lambda c: len(lake[c]))
    raw = [f"  {t.upper()} " for t in lake[cid]] + ["", "NULL", None]
    with engine.connect() as conn:
        reader = DbIndexReader(conn)
        got = search_join(reader, raw, k=3, exclude_column_id=cid).results
        assert got == brute_force_top_k(lake, lake[cid], 3, exclude_column_id=cid)
        with pytest.raises(UnknownIdError):
            search_join(reader, raw, k=3, exclude_column_id="file:nope.csv#x")


def test_cost_constants_are_fitted_stored_and_loaded(lake_in_catalog: tuple[Engine, dict[str, set[str]]]) -> None:
    engine, _ = lake_in_catalog
    with engine.connect() as conn:
        assert cost_model.load(conn, conn.dialect.name) == DEFAULT_COSTS
    with engine.begin() as conn:
        fitted = cost_model.refit(conn, DbIndexReader(conn), n_samples=40, repeats=1)
    with engine.begin() as conn:  # refitting replaces the row
        cost_model.refit(conn, DbIndexReader(conn), n_samples=40, repeats=1)
    with engine.connect() as conn:
        rows = conn.execute(select(JosieCostModel.database)).scalars().all()
        assert rows == [conn.dialect.name]
        loaded = cost_model.load(conn, conn.dialect.name)
    assert loaded.fitted and fitted.read_list_b >= 0 and fitted.read_set_b >= 0
    assert loaded.list_cost(10) > 0 and loaded.set_cost(10) > 0


def _replace_index(engine: Engine, lake: dict[str, set[str]], version: int) -> None:
    with engine.begin() as conn:
        for model in (JosieToken, JosieSet, JosiePosting):
            conn.execute(delete(model))
        store_index(conn, build_memory_index(lake), version=version)


def test_cached_dictionary_is_reused_and_invalidated_by_a_new_index_version(catalog_engine: Engine) -> None:
    rng = random.Random(23)
    first = random_lake(rng, n_sets=60, vocab=80)
    # a different lake over the same token names: stale token ids / groups would give wrong overlaps
    second = {
        cid: {str((int(t) * 7 + 3) % 80) if t.isdigit() else t for t in toks} | {"fresh"}
        for cid, toks in random_lake(rng, n_sets=70, vocab=80).items()
    }
    queries = [random_query(rng, first, 80) | {"fresh"} for _ in range(4)]
    _replace_index(catalog_engine, first, version=1)
    clear_dictionary_cache()
    with catalog_engine.connect() as conn:
        cached, plain = DbIndexReader(conn, cache_dictionary=True), DbIndexReader(conn)
        loaded = cached.token_dictionary()
        assert loaded is not None and loaded.version == "1" and plain.token_dictionary() is None
        for query in queries:
            assert cached.lookup_tokens(query) == plain.lookup_tokens(query)
            for method in METHODS:
                assert search_tokens(cached, query, k=10, method=method).results == brute_force_top_k(first, query, 10)
    with catalog_engine.connect() as conn:  # another reader on the same engine shares the loaded dictionary
        assert DbIndexReader(conn, cache_dictionary=True).token_dictionary() is loaded
    _replace_index(catalog_engine, second, version=2)
    with catalog_engine.connect() as conn:
        cached, plain = DbIndexReader(conn, cache_dictionary=True), DbIndexReader(conn)
        for query in queries:
            assert cached.lookup_tokens(query) == plain.lookup_tokens(query)
            for method in METHODS:
                got = search_tokens(cached, query, k=10, method=method).results
                assert got == brute_force_top_k(second, query, 10), method
        reloaded = cached.token_dictionary()
        assert reloaded is not None and reloaded is not loaded and reloaded.version == "2"
