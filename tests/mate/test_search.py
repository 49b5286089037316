"""MATE's search against brute force, in memory (the index built by the same functions as the lake's):
every method returns the oracle's top k, with the same joinability at every rank and the same mapping."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from catalog.core.errors import SettingsError, UserError, XashMismatchError
from catalog.core.xash import BETA, XashSpec
from catalog.search.mate import METHODS, mappings
from catalog.search.mate import search as mate_search
from catalog.search.mate.query import choose_key, composite_keys, parse_csv
from catalog.search.mate.search import NaryRequest, SkippedTable, TooManyMatchesError, search_nary
from catalog.search.mate.settings import BITS, MateSettings
from catalog.search.mate.source import HeldRowKeys, Postings, build_memory_source
from tests.mate.lake import Table, match_count, oracle, random_lake


def _answers(source, headers, rows, key, k, method):  # type: ignore[no-untyped-def]
    out = search_nary(source, NaryRequest(headers, rows, key, k=k, method=method))
    return [(r.table_id, r.joinability, r.mapping) for r in out.results], out.stats


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("key_size", [2, 3])
def test_every_method_equals_brute_force(seed: int, key_size: int) -> None:
    tables, (_, headers, rows) = random_lake(seed, key_size=key_size)
    source = build_memory_source(tables)
    for k in (1, 3, 10):
        expected = oracle(tables, headers, rows, headers[:key_size], k)
        assert expected, "the lake must hold joinable tables"
        for method in METHODS:
            got, _ = _answers(source, headers, rows, headers[:key_size], k, method)
            assert got == expected, (method, k)


@pytest.mark.parametrize("key_size", [4, 5])
def test_wide_keys(key_size: int) -> None:
    tables, (_, headers, rows) = random_lake(7, n_tables=25, key_size=key_size)
    source = build_memory_source(tables)
    expected = oracle(tables, headers, rows, headers[:key_size], 5)
    for method in METHODS:
        assert _answers(source, headers, rows, headers[:key_size], 5, method)[0] == expected


def test_the_filter_prunes_and_verifies_less() -> None:
    tables, (_, headers, rows) = random_lake(3, n_tables=60)
    source = build_memory_source(tables)
    _, mate = _answers(source, headers, rows, headers[:2], 10, "mate")
    _, scr = _answers(source, headers, rows, headers[:2], 10, "scr")
    assert mate.passed < scr.passed and mate.verified < scr.verified
    assert mate.matched == scr.matched or mate.matched <= scr.matched  # no tuple the filter loses


def zero_one_lake(seed: int, key_size: int) -> tuple[list[Table], list[str], list[list[str | None]]]:
    """Wide tables of 0/1 columns (a row holds each key value in dozens of columns: thousands of
    mappings per pair) beside narrow ones, and a query of small-integer tuples."""
    rng = np.random.default_rng(seed)
    tables: list[Table] = []
    for t in range(6):
        width = 30 if t % 2 else 3
        rows = [[str(v) for v in rng.integers(0, 2 + t % 3, width)] for _ in range(int(rng.integers(5, 25)))]
        tables.append((f"w{t}", [f"c{c}" for c in range(width)], rows))
    headers = [f"k{i}" for i in range(key_size)]
    query: list[list[str | None]] = [[str(v) for v in rng.integers(0, 3, key_size)] for _ in range(12)]
    return tables, headers, query


@pytest.mark.parametrize("key_size", [2, 3])
def test_rows_holding_key_values_in_many_columns(key_size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every mapping is enumerated, in runs (a tiny run splits the pairs, and one pair's matches
    across runs), and the best mapping is the oracle's."""
    tables, headers, query = zero_one_lake(key_size, key_size)
    source = build_memory_source(tables)
    expected = oracle(tables, headers, query, headers, 4)
    assert expected[0][1] > 1
    for block in (mappings.BLOCK, 3 if key_size == 2 else 500):
        monkeypatch.setattr(mappings, "BLOCK", block)
        for method in METHODS:
            assert _answers(source, headers, query, headers, 4, method)[0] == expected, (block, method)


def test_column_choices_are_counted_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Brute force verifies every pair, so it counts every choice of columns the oracle counts; one
    fewer allowed over the search and it is refused, naming a table."""
    tables, headers, query = zero_one_lake(2, 2)
    source = build_memory_source(tables)
    _, stats = _answers(source, headers, query, headers, 4, "brute")
    assert stats.matches == match_count(tables, headers, query, headers) > 0
    monkeypatch.setattr(mate_search, "MAX_SEARCH_MATCHES", stats.matches - 1)
    with pytest.raises(TooManyMatchesError, match="table 'w"):
        _answers(source, headers, query, headers, 4, "brute")


@pytest.mark.parametrize("k", [1, 4])
def test_a_table_past_the_per_table_bound_is_skipped_and_named(k: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables with the most column choices, one more than the bound allows, are left out and
    named with their count; every method ranks the others exactly as the oracle does without them.
    Brute force verifies every table, so it names exactly those; the others name those they reach."""
    tables, headers, query = zero_one_lake(4, 3)
    counts = {t[0]: match_count([t], headers, query, headers) for t in tables}
    bound = max(counts.values()) - 1
    over = {t for t, n in counts.items() if n > bound}
    assert over and len(over) < len(tables)
    monkeypatch.setattr(mate_search, "MAX_TABLE_MATCHES", bound)
    source = build_memory_source(tables)
    expected = oracle([t for t in tables if t[0] not in over], headers, query, headers, k)
    assert expected
    for method in METHODS:
        out = search_nary(source, NaryRequest(headers, query, headers, k=k, method=method))
        assert [(r.table_id, r.joinability, r.mapping) for r in out.results] == expected, method
        skipped = {s.table_id: s.matches for s in out.skipped}
        assert set(skipped) <= over and all(n == counts[t] for t, n in skipped.items()), method
        if method == "brute":  # the skipped tables' choices are not enumerated, so not counted
            assert set(skipped) == over
            assert out.stats.matches == sum(n for t, n in counts.items() if t not in over)


def test_more_column_choices_than_int64_holds_skip_the_table() -> None:
    """A row of 1,000 zeros and a key of 8 zeros: 1,000^7 choices per pair, past int64, where a
    product in numpy's integers would wrap to a wrong count. That table is skipped and named; the
    table holding the other tuple is still found."""
    width, m = 1_000, mate_search.MAX_KEY_COLUMNS
    plain = ("plain", [f"p{i}" for i in range(m)], [[f"v{i}" for i in range(m)]])
    source = build_memory_source([("zeros", [f"c{c}" for c in range(width)], [["0"] * width]), plain])
    headers = [f"k{i}" for i in range(m)]
    query: list[list[str | None]] = [["0"] * m, [f"v{i}" for i in range(m)]]
    for method in METHODS:
        out = search_nary(source, NaryRequest(headers, query, headers, k=3, method=method))
        assert [(r.table_id, r.joinability) for r in out.results] == [("plain", 1)], method
        assert out.results[0].mapping == {f"k{i}": f"p{i}" for i in range(m)}
        assert out.skipped == [SkippedTable("zeros", float(width) ** m)], method
        assert out.stats.matches == 1
        assert re.search(r"skipped table 'zeros'.*\(1e\+24 column choices", out.skipped[0].describe())


def test_single_values_shared_but_no_tuple() -> None:
    header = ["city", "day"]
    lake = [
        ("apart", ["c", "d"], [["berlin", "tue"], ["paris", "wed"], ["rome", "mon"]]),
        ("together", ["d", "x", "c"], [["tue", "1", "berlin"], ["mon", "2", "berlin"]]),
    ]
    query = [["Berlin", "Mon"], ["Paris", "Mon"]]
    source = build_memory_source(lake)
    for method in METHODS:
        got, _ = _answers(source, header, query, header, 10, method)
        assert got == [("together", 1, {"city": "c", "day": "d"})]


def test_bad_requests_are_one_line_errors() -> None:
    source = build_memory_source([("t", ["a", "b"], [["1", "2"]])])
    with pytest.raises(UserError, match="at least 2 columns"):
        search_nary(source, NaryRequest(["a", "b"], [["1", "2"]], ["a"]))
    with pytest.raises(UserError, match="no column 'z'"):
        search_nary(source, NaryRequest(["a", "b"], [["1", "2"]], ["a", "z"]))
    with pytest.raises(UserError, match="unknown method"):
        search_nary(source, NaryRequest(["a", "b"], [["1", "2"]], ["a", "b"], method="fast"))
    assert search_nary(source, NaryRequest(["a", "b"], [[None, "2"]], ["a", "b"])).results == []


def test_a_query_hashed_otherwise_is_refused() -> None:
    source = build_memory_source([("t", ["a", "b"], [["1", "2"]])])
    with pytest.raises(XashMismatchError):
        search_nary(source, NaryRequest(["a", "b"], [["1", "2"]], ["a", "b"], spec=XashSpec(bits=256)))


def test_no_false_negative_from_the_filter() -> None:
    """Every row holding a tuple's values passes that tuple's super-key test, at every hash size."""
    rng = np.random.default_rng(5)
    for bits in (128, 256, 512):
        tables, (_, headers, rows) = random_lake(int(rng.integers(100)), key_size=3)
        source = build_memory_source(tables, XashSpec(bits=bits))
        expected = oracle(tables, headers, rows, headers[:3], 10)
        assert _answers(source, headers, rows, headers[:3], 10, "mate")[0] == expected


def test_query_csv_and_its_detected_key() -> None:
    headers, rows = parse_csv("\ufeffcity,day,n,\nberlin,mon,1,\nberlin,tue,1,\nparis,mon,2,\n")
    assert headers == ["city", "day", "n", "column_4"] and rows[2] == ["paris", "mon", "2", ""]
    keys = composite_keys(headers, rows)  # column_4 is empty: never part of a key
    assert keys == [("city", "day"), ("day", "n")]
    assert choose_key(headers, rows, None) == (["city", "day"], keys)
    assert choose_key(headers, rows, "n, day") == (["n", "day"], [])
    with pytest.raises(UserError, match="not valid CSV: unexpected end of data"):
        parse_csv('a,b\n"x,1\n')
    with pytest.raises(UserError, match="empty"):
        parse_csv("\n\n")
    with pytest.raises(UserError, match="no composite key"):
        choose_key(["a", "b"], [["1", "x"], ["1", "x"]], None)


def test_the_settings_offer_exactly_the_hash_sizes_xash_has() -> None:
    assert tuple(sorted(BETA)) == BITS
    with pytest.raises(SettingsError, match=r"index\.mate\.bits"):
        MateSettings(bits=64)


def test_runs_of_matches_enumerate_every_choice_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut into runs of 3, one pair's matches across several, the runs give each pair's choices of
    one column per key position exactly once: the product of its positions' columns."""
    monkeypatch.setattr(mappings, "BLOCK", 3)
    rng = np.random.default_rng(8)
    count = rng.integers(0, 4, (9, 3))
    count[:, 1] = 1  # the initial position: the pair's own column
    start = np.cumsum(np.r_[0, count.ravel()[:-1]]).reshape(count.shape)
    columns = rng.integers(1, 50, int(count.sum()))
    choices = mappings.Choices(np.arange(9), start, count, columns)
    total = count.prod(axis=1)
    pairs = np.flatnonzero(total > 0)
    got: list[tuple[int, ...]] = []
    for block, first, n in mappings._blocks(pairs, total):
        assert n.sum() <= 3
        combos, owner = mappings._enumerate(choices, block, first, n)
        got += [(int(block[o]), *map(int, c)) for o, c in zip(owner, combos, strict=True)]
    want = [
        (p, *c)
        for p in pairs.tolist()
        for c in itertools.product(*(columns[start[p, i] : start[p, i] + count[p, i]].tolist() for i in range(3)))
    ]
    assert want and sorted(got) == sorted(want)


def test_held_row_keys_keep_the_recent_blocks_of_one_index_version() -> None:
    def block(fill: int, rows: int = 4) -> np.ndarray:
        return np.full((rows, 2), fill, np.uint64)

    held = HeldRowKeys(budget=3 * block(0).nbytes)
    assert held.take("1", [(0, 0)]) == {}
    held.hold("1", {(0, 0): block(1), (0, 1): block(2), (1, 0): block(3)})
    assert sorted(held.take("1", [(0, 0), (5, 5)])) == [(0, 0)]  # (0, 0) is now the most recent
    held.hold("1", {(2, 0): block(4)})  # past the budget: the least recently used, (0, 1), leaves
    assert sorted(held.take("1", [(0, 0), (0, 1), (1, 0), (2, 0)])) == [(0, 0), (1, 0), (2, 0)]
    assert int(held.take("1", [(2, 0)])[(2, 0)][0, 0]) == 4
    held.hold("0", {(9, 9): block(9)})  # read from an older version while a newer one is held: dropped
    assert held.take("1", [(9, 9)]) == {}
    assert held.take("2", [(0, 0), (1, 0), (2, 0)]) == {}  # a new index version: nothing held is valid
    assert held.size == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pairs_are_every_item_with_every_tuple_holding_its_value(seed: int) -> None:
    """A table's (query tuple, row, column) pairs against a loop over its items (empty lists and
    values held by several tuples included)."""
    rng = np.random.default_rng(seed)
    tuple_ids = {f"v{i}": np.sort(rng.choice(40, int(rng.integers(1, 5)), replace=False)) for i in range(6)}
    for ref in range(12):
        lists = []
        for token in rng.permutation(list(tuple_ids))[: int(rng.integers(0, 4))]:
            n = int(rng.integers(0, 7))
            rows = np.sort(rng.integers(0, 200, n)).astype(np.int32)
            lists.append(Postings(str(token), ref, rows, rng.integers(1, 9, n).astype(np.int32)))
        got = mate_search._pairs(lists, tuple_ids)
        expected = [
            (int(t), int(r), int(c))
            for p in lists
            for r, c in zip(p.rows, p.cols, strict=True)
            for t in tuple_ids[p.token]
        ]
        assert list(zip(*(a.tolist() for a in got), strict=True)) == expected, ref
