"""ProbeSet-D: prefix filter plus position filter, reading each candidate the moment it is first seen
(JOSIE, SIGMOD 2019, §2.3–2.4: Xiao et al. 2009 made into a search, the paper's baseline).

0-based with s = skipped duplicates: stop when no unseen set can beat the k-th overlap
(max possible n − i + s); prune a new candidate whose bound min(n − i + s, |X| − j + s) cannot enter
the answer; else its overlap is r + |X[j+1:] ∩ Q| (its first match is this run). Tie handling: see
`results.TopK`.
"""

from __future__ import annotations

from catalog.search.josie.query_plan import ListReader, QueryPlan, count_matches
from catalog.search.josie.reader import IndexReader
from catalog.search.josie.results import SearchStats, TopK


def probeset_top_k(
    reader: IndexReader,
    plan: QueryPlan,
    k: int,
    *,
    ignore: frozenset[int] = frozenset(),
    exact_ties: bool = True,
    stats: SearchStats | None = None,
    block: int = 20,
) -> TopK:
    stats = stats if stats is not None else SearchStats()
    top = TopK(k, exact_ties=exact_ties)
    n = plan.n
    seen: set[int] = set(ignore)
    lists = ListReader(reader, plan, stats, block=block)
    for run_idx, (i, s) in enumerate(plan.runs()):
        if top.prunable(n - i + s):
            break
        plist = lists.list_at(run_idx)
        for x, j, size in zip(plist.set_ids.tolist(), plist.positions.tolist(), plist.sizes.tolist(), strict=True):
            if x in seen:
                continue
            seen.add(x)
            stats.n_candidates += 1
            if top.prunable(min(n - i + s, size - j + s)):
                continue
            suffix = reader.read_set_suffix(x, j + 1)
            stats.n_sets_read += 1
            stats.n_set_tokens_read += len(suffix)
            top.push(x, s + 1 + count_matches(plan.token_ids, suffix))
    return top
