"""The paper's worked example (JOSIE, SIGMOD 2019, §2.3–2.4, Examples 2–3)."""

from __future__ import annotations

from catalog.core.identity import column_id
from catalog.search.josie import METHODS, build_memory_index, search_tokens
from catalog.search.josie.probeset import probeset_top_k
from catalog.search.josie.query_plan import plan_query
from catalog.search.josie.results import SearchStats

ORDER = [f"x{i}" for i in range(1, 201)]  # global order = subscript order, as in the paper
X1, X2, X3, X4 = (column_id("file:paper.csv", f"X{i}") for i in range(1, 5))
LAKE = {X1: {"x1", "x100", "x200"}, X2: {"x2", "x5"}, X3: {"x2"}, X4: {f"x{i}" for i in range(2, 102)}}
QUERY = {"x1", "x2", "x100", "x200"}


def test_top2_is_x1_with_3_and_x4_with_2() -> None:
    index = build_memory_index(LAKE, token_order=ORDER)
    assert index.dictionary["x100"].token_id == 99
    # Example 2: x100's posting list holds (X4, position 98 0-based = 99 1-based, size 100).
    x4 = index.set_id_of(X4)
    plist = index.read_list(99)
    k = plist.set_ids.tolist().index(x4)
    assert (plist.positions[k], plist.sizes[k]) == (98, 100)
    for method in METHODS:
        got = search_tokens(index, QUERY, k=2, method=method).results
        assert [(r.column_id, r.overlap) for r in got] == [(X1, 3), (X4, 2)], method


def test_probeset_reads_x1_x2_x4_and_prunes_x3() -> None:
    # Example 3: ProbeSet reads X1, X2 and X4 (2 + 1 + 99 = 102 tokens after the first match) and
    # prunes X3 by the position filter (ub = 1 <= kth = 1, the paper's tie rule). The released code's
    # strict prefix filter then stops before the third list (kth = 2 >= n − i = 2).
    index = build_memory_index(LAKE, token_order=ORDER)
    stats = SearchStats()
    top = probeset_top_k(index, plan_query(index.lookup_tokens(QUERY)), 2, exact_ties=False, stats=stats)
    assert [(r.column_id, r.overlap) for r in top.results(index)] == [(X1, 3), (X4, 2)]
    assert stats.n_sets_read == 3 and stats.n_set_tokens_read == 102
    assert stats.n_lists_read == 2
