"""JOSIE, MergeList-D and ProbeSet-D agree with brute force over Python sets, on random lakes."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.josie_lake import zipf_lake
from catalog.core.identity import column_id
from catalog.search.josie import METHODS, build_memory_index, search_tokens
from catalog.search.josie import search as josie
from catalog.search.josie.brute_force import brute_force_top_k
from catalog.search.josie.cost_model import CostModel
from catalog.search.josie.query_plan import plan_query
from catalog.search.josie.results import SearchStats
from catalog.search.josie.search import josie_top_k
from tests.josie_search.lakes import random_lake, random_query

# Cost models that push JOSIE to each extreme: sets cheap (reads candidates early), lists cheap.
COSTS = [CostModel(1e-5, 1e-8, 1e-5, 1e-8), CostModel(1e-3, 1e-6, 1e-7, 1e-9), CostModel(1e-7, 1e-9, 1e-3, 1e-5)]


def overlaps(results):  # type: ignore[no-untyped-def]
    return [r.overlap for r in results]


def check_all_methods(lake: dict[str, set[str]], query: set[str], ks: list[int]) -> None:
    index = build_memory_index(lake)
    for k in ks:
        expected = brute_force_top_k(lake, query, k)
        for method in METHODS:
            got = search_tokens(index, query, k=k, method=method).results
            assert got == expected, (method, k)
            loose = search_tokens(index, query, k=k, method=method, exact_ties=False).results
            assert overlaps(loose) == overlaps(expected), (method, k, "paper tie rule")
        plan = plan_query(index.lookup_tokens(query))
        for batch_size in (1, 3):
            for costs in COSTS:
                for exact_ties in (True, False):
                    top = josie_top_k(index, plan, k, batch_size=batch_size, costs=costs, exact_ties=exact_ties)
                    got = top.results(index)
                    assert overlaps(got) == overlaps(expected), (k, batch_size, costs, exact_ties)
                    if exact_ties:
                        assert got == expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_sets=st.integers(1, 60), vocab=st.integers(1, 80))
def test_every_method_equals_brute_force_on_random_lakes(seed: int, n_sets: int, vocab: int) -> None:
    rng = random.Random(seed)
    lake = random_lake(rng, n_sets=n_sets, vocab=vocab)
    query = random_query(rng, lake, vocab)
    n_matching = sum(1 for t in lake.values() if t & query)
    check_all_methods(lake, query, [1, 10, 100, n_matching + 3])


@pytest.mark.parametrize("seed", range(6))
def test_every_method_equals_brute_force_on_larger_seeded_lakes(seed: int) -> None:
    rng = random.Random(1000 + seed)
    lake = random_lake(rng, n_sets=400, vocab=600)
    for _ in range(3):
        query = random_query(rng, lake, 600)
        n_matching = sum(1 for t in lake.values() if t & query)
        check_all_methods(lake, query, [1, 10, 100, n_matching + 1])


def test_results_shape_and_ranking_contract() -> None:
    lake = {
        column_id("file:a.csv", "x"): {"1", "2", "3"},
        column_id("file:b.csv", "y"): {"1", "2"},
        column_id("file:c.csv", "z"): {"2", "3"},
        column_id("file:d.csv", "w"): {"9"},
    }
    index = build_memory_index(lake)
    for method in METHODS:
        res = search_tokens(index, {"1", "2", "3"}, k=10, method=method).results
        assert [(r.column_id, r.overlap) for r in res] == [
            ("file:a.csv#x", 3),
            ("file:b.csv#y", 2),
            ("file:c.csv#z", 2),
        ]  # overlap desc, column_id asc; no 0
        assert res[0].table_id == "file:a.csv" and res[0].column == "x" and res[0].exact is True
        tie = search_tokens(index, {"1", "2", "3"}, k=2, method=method).results
        assert [r.column_id for r in tie] == ["file:a.csv#x", "file:b.csv#y"]


def test_query_column_in_the_lake_is_excluded() -> None:
    rng = random.Random(7)
    lake = random_lake(rng, n_sets=80, vocab=50)
    me = max(lake, key=lambda c: len(lake[c]))
    index = build_memory_index(lake)
    expected = brute_force_top_k(lake, lake[me], 5, exclude_column_id=me)
    for method in METHODS:
        got = search_tokens(index, lake[me], k=5, method=method, exclude_column_id=me).results
        assert got == expected and me not in [r.column_id for r in got]


def test_query_all_in_one_duplicate_group_reads_one_list() -> None:
    # Tokens a..e occur in exactly the same three columns: one duplicate group, one list read.
    shared = {"a", "b", "c", "d", "e"}
    lake = {column_id("file:t.csv", f"c{i}"): shared | {f"x{i}"} for i in range(3)}
    lake[column_id("file:u.csv", "other")] = {"x0", "zz"}
    index = build_memory_index(lake)
    assert len({index.dictionary[t].group_id for t in shared}) == 1
    for method in ("josie", "mergelist", "probeset"):
        out = search_tokens(index, shared, k=2, method=method)
        assert overlaps(out.results) == [5, 5]
        assert out.stats.n_lists_read == 1


def test_highest_frequency_group_is_found() -> None:
    # The last duplicate group in global order (the most frequent tokens) must be searchable (erratum B1).
    lake = {column_id("file:t.csv", f"c{i}"): {"common1", "common2", f"own{i}"} for i in range(6)}
    index = build_memory_index(lake)
    last_gid = max(q.group_id for q in index.dictionary.values())
    assert index.dictionary["common1"].group_id == index.dictionary["common2"].group_id == last_gid
    for method in METHODS:
        assert overlaps(search_tokens(index, {"common1", "common2"}, k=3, method=method).results) == [2, 2, 2]


def test_no_overlap_and_empty_query_return_nothing() -> None:
    index = build_memory_index({column_id("file:t.csv", "a"): {"1"}, column_id("file:t.csv", "b"): set()})
    for method in METHODS:
        assert search_tokens(index, {"2"}, k=3, method=method).results == []
        assert search_tokens(index, set(), k=3, method=method).results == []


def test_k_below_one_is_rejected() -> None:
    index = build_memory_index({column_id("file:t.csv", "a"): {"1"}})
    with pytest.raises(ValueError, match="k must be at least 1"):
        search_tokens(index, {"1"}, k=0)


def test_stats_count_reads() -> None:
    rng = random.Random(3)
    lake = random_lake(rng, n_sets=200, vocab=300)
    index = build_memory_index(lake)
    query = lake[max(lake, key=lambda c: len(lake[c]))]
    stats = SearchStats()
    josie_top_k(index, plan_query(index.lookup_tokens(query)), 5, stats=stats)
    assert 0 < stats.n_lists_read <= len(query)
    merge = search_tokens(index, query, k=5, method="mergelist").stats
    assert merge.n_sets_read == 0 and merge.n_lists_read == len({index.dictionary[t].group_id for t in query})


def test_searches_reuse_a_clean_candidate_workspace_across_lakes_and_threads() -> None:
    """JOSIE keeps its candidate arrays per thread between searches: every search must leave the
    ones read before a set becomes a candidate (status, partial count, latest position) zeroed, and
    searches of lakes of different sizes in several threads at once still equal brute force (a
    leftover entry would resurrect a pruned candidate or hide a new one)."""

    from concurrent.futures import ThreadPoolExecutor

    from catalog.search.josie.search import _Candidates

    rng = random.Random(11)
    lakes = [random_lake(rng, n_sets=n, vocab=300) for n in (40, 400, 1500)]
    indexes = [build_memory_index(lake) for lake in lakes]
    jobs = [(i, random_query(rng, lakes[i], 300)) for i in range(len(lakes)) for _ in range(8)]

    def work(offset: int) -> bool:
        for i, query in jobs[offset:] + jobs[:offset]:
            own = next(iter(lakes[i]))
            expected = brute_force_top_k(lakes[i], query, 10, exclude_column_id=own)
            assert search_tokens(indexes[i], query, k=10, exclude_column_id=own).results == expected
        arrays = dict(zip(_Candidates._FIELDS, _Candidates._pool.arrays, strict=True))
        return not any(arrays[name].any() for name in ("status", "partial", "j"))

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(work, range(0, len(jobs), len(jobs) // 4)))


def test_josie_settles_the_last_candidates_by_reading_their_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once no unseen set can enter the top k, a few pending candidates whose estimates do not beat
    the k-th overlap would keep Algorithm 1 reading lists to the end of the query, the longest ones.
    JOSIE reads their sets instead when the cost model says that is cheaper: fewer lists, same answers.
    The lists are priced dear here, so that these queries take the set path at all (at the default
    prices the lists left after the rent cost less than filling the heap)."""
    costs = CostModel(read_list_a=5e-5, read_list_b=5e-7, read_set_a=5e-6, read_set_b=1e-9)
    lake = zipf_lake(1500, seed=3)
    index = build_memory_index(lake)
    biggest = sorted(lake, key=lambda c: (-len(lake[c]), c))[:10]

    def lists_read() -> list[int]:
        counts = []
        for cid in biggest:
            out = search_tokens(index, lake[cid], k=10, exclude_column_id=cid, costs=costs)
            assert out.results == brute_force_top_k(lake, lake[cid], 10, exclude_column_id=cid)
            counts.append(out.stats.n_lists_read)
        return counts

    settling = lists_read()
    monkeypatch.setattr(josie, "_settle_by_sets", lambda *args: False)
    reading_on = lists_read()
    assert all(a <= b for a, b in zip(settling, reading_on, strict=True))
    assert sum(settling) < sum(reading_on), (settling, reading_on)


@pytest.mark.parametrize(
    ("costs", "shortcut"),
    [
        (CostModel(1e-7, 0.0, 1e-3, 0.0), "merge"),  # lists all but free: merged at once, no set read
        (CostModel(1e-5, 0.0, 1e-6, 1e-5), "lists"),  # big sets dear: the rest of the lists beat filling the heap
        (CostModel(1e-3, 1e-6, 1e-7, 1e-9), ""),  # sets cheap: the heap is filled by reading sets
    ],
)
def test_josie_reads_every_list_when_that_costs_less_than_filling_its_heap(costs: CostModel, shortcut: str) -> None:
    """Before the heap is full Algorithm 1 reads a candidate set after every list. JOSIE first reads
    lists worth what those reads would cost (the rent), and reads every list instead of any set when
    the cost model prices that lower: before the first list ("merge", with no per-step machinery) or
    after the rent ("lists"); the answer stays exact, and no set is read on either path."""
    rng = random.Random(21)
    lake = random_lake(rng, n_sets=400, vocab=600)
    index = build_memory_index(lake)
    seen = []
    for cid in sorted(lake, key=lambda c: (-len(lake[c]), c))[:40]:
        stats = SearchStats()
        plan = plan_query(index.lookup_tokens(lake[cid]))
        own = index.set_id_of(cid)
        assert own is not None
        ignore = frozenset({own})
        top = josie_top_k(index, plan, 10, costs=costs, ignore=ignore, stats=stats)
        assert top.results(index) == brute_force_top_k(lake, lake[cid], 10, exclude_column_id=cid)
        if stats.shortcut == "merge":
            assert stats.n_sets_read == 0 and stats.n_lists_read == len(plan.run_ends)
        if stats.shortcut == "lists":
            assert stats.n_lists_read == len(plan.run_ends) and stats.n_sets_read == 0
        seen.append(stats.shortcut)
    assert seen.count(shortcut) >= 10, seen


def test_cost_lines_price_small_reads_by_their_fixed_cost() -> None:
    """Timings shaped like a real lake's set reads: a hundred small sets at ~11 µs and a few sets of up
    to a million tokens. Plain least squares lets the big ones set the line and gives a negative
    intercept (every small read priced at the floor, so JOSIE over-reads sets); the fit keeps the
    intercept near the small reads' cost and the slope near the big ones'."""
    from catalog.search.josie.cost_model import _line

    rng = random.Random(4)
    sizes = [rng.randrange(1, 500) for _ in range(100)] + [30_000, 100_000, 400_000, 1_000_000]
    seconds = [11e-6 + 4e-9 * m * (1 + m / 250_000) for m in sizes]  # big sets: cache misses per token
    assert np.polyfit(sizes, seconds, 1)[1] < 0  # what plain least squares makes of it
    intercept, slope = _line(sizes, seconds)
    assert 9e-6 < intercept < 13e-6 and slope > 4e-9, (intercept, slope)


@given(
    lists=st.lists(st.lists(st.integers(0, 3000), max_size=60, unique=True), min_size=1, max_size=12),
    credits=st.lists(st.integers(1, 4), min_size=12, max_size=12),
    split=st.integers(0, 12),
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_entry_counter_sums_credits_per_set_like_a_sort(lists: list[list[int]], credits: list[int], split: int) -> None:
    """MergeList and JOSIE's rent count posting entries in a scratch array instead of sorting them
    (`np.unique`); added in one step or two, the sums per set equal a plain count, and the scratch
    array is all zero again afterwards (the next search would count stale entries otherwise)."""
    from catalog.search.josie import mergelist
    from catalog.search.josie.reader import PostingList, pack_lists

    packed = [sorted(ls) for ls in lists]
    weights = np.asarray(credits[: len(packed)], dtype=np.int64)
    expected: dict[int, int] = {}
    for ls, w in zip(packed, weights.tolist(), strict=True):
        for s in ls:
            expected[s] = expected.get(s, 0) + w
    counter = mergelist.EntryCounter()
    cut = min(split, len(packed))
    for part, w in ((packed[:cut], weights[:cut]), (packed[cut:], weights[cut:])):
        arrays = [np.asarray(ls, dtype="<i4") for ls in part]
        counter.add(pack_lists([PostingList(a, a, a) for a in arrays]), w)
    ids, counts = counter.take()
    assert len(set(ids.tolist())) == len(ids)
    assert dict(zip(ids.tolist(), counts.tolist(), strict=True)) == expected
    scratch = getattr(mergelist._scratch, "acc", None)
    assert scratch is None or not scratch.any()


def test_a_segment_is_fetched_in_one_round_trip() -> None:
    """JOSIE asks for the lists it needs a segment at a time (the rent, then every list left): each
    segment must come in one read, not in read-ahead sized pieces (a 3,000-list query made 65 round
    trips where MergeList made 13)."""
    from catalog.search.josie.query_plan import ListReader

    rng = random.Random(5)
    lake = {column_id("file:t.csv", f"c{s}"): {f"v{t}" for t in rng.sample(range(900), 300)} for s in range(40)}
    index = build_memory_index(lake)
    plan = plan_query(index.lookup_tokens({f"v{t}" for t in range(900)}))
    calls: list[int] = []

    class Counting:
        def read_lists_packed(self, token_ids: list[int]):  # type: ignore[no-untyped-def]
            calls.append(len(token_ids))
            return index.read_lists_packed(token_ids)

    reader = ListReader(Counting(), plan, SearchStats(), block=20)  # type: ignore[arg-type]
    n_runs = len(plan.run_ends)
    assert n_runs > 300
    head = reader.segment(0, 10)
    rest = reader.segment(10, n_runs)
    assert len(calls) == 2 and calls[1] >= n_runs - calls[0]
    assert len(head.offsets) - 1 == 10 and len(rest.offsets) - 1 == n_runs - 10
