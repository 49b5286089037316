"""What every join-search method returns, and the running top-k they share.

Ranking contract (all methods; docs/contracts.md, "Output"): results are ordered by
`overlap` descending, then `column_id` ascending; sets with overlap 0 are never returned; fewer
than k results come back when fewer than k sets overlap the query. With `exact_ties=True` (the
default) the k results are exactly the first k of that order over the whole lake: sets tied with
the k-th overlap are never pruned (pruning uses `ub < kth`, not the paper's `ub <= kth` of
§2.4), so the column_id tie-break sees all of them. `exact_ties=False` prunes ties as the paper does:
the overlaps at every rank are still exact, but which of several sets tied at the k-th overlap is
returned depends on the read order (still deterministic for a given index).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from catalog.core.identity import split_column_id
from catalog.search.josie.reader import IndexReader


@dataclass(frozen=True)
class JoinResult:
    table_id: str
    column: str  # the header
    column_id: str
    overlap: int
    exact: bool = True


@dataclass
class SearchStats:
    method: str = ""
    n_query_tokens: int = 0  # query tokens found in the dictionary
    n_lists_read: int = 0  # posting lists the algorithm consumed (skipped duplicates not counted)
    n_lists_fetched: int = 0  # lists that travelled from storage (batched reads may overshoot)
    n_sets_read: int = 0
    n_set_tokens_read: int = 0
    n_candidates: int = 0


@dataclass
class SearchOutcome:
    results: list[JoinResult]
    stats: SearchStats = field(default_factory=SearchStats)


class TopK:
    """The running top-k overlaps (a size-k min-heap of overlaps) and the exact overlaps kept."""

    def __init__(self, k: int, *, exact_ties: bool = True) -> None:
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        self.k = k
        self.exact_ties = exact_ties
        self.heap: list[int] = []
        self.overlaps: dict[int, int] = {}

    @property
    def full(self) -> bool:
        return len(self.heap) >= self.k

    @property
    def kth(self) -> int:
        """The k-th best overlap so far, 0 until k sets are known."""
        return self.heap[0] if len(self.heap) >= self.k else 0

    def prunable(self, upper_bound: int) -> bool:
        """A set whose overlap is at most `upper_bound` cannot enter the answer."""
        kth = self.kth
        return upper_bound < kth if self.exact_ties else upper_bound <= kth

    def kth_after(self, overlap: int) -> int:
        """The k-th overlap if a set with `overlap` were pushed now (paper Eq. 5; heap full)."""
        kth = self.kth
        if not self.full or overlap <= kth:
            return kth
        if self.k == 1:
            return overlap
        return min(overlap, min(self.heap[1:3]))  # the (k-1)-th best: the smaller child of the root

    def push(self, set_id: int, overlap: int) -> None:
        if overlap <= 0 or self.prunable(overlap):
            return
        self.overlaps[set_id] = overlap
        heapq.heappush(self.heap, overlap)
        if len(self.heap) > self.k:
            heapq.heappop(self.heap)

    def results(self, reader: IndexReader) -> list[JoinResult]:
        """The answer: overlap desc, column_id asc, at most k, read from the kept exact overlaps."""
        kth = self.kth
        keep = {sid: o for sid, o in self.overlaps.items() if o >= kth}
        return rank(reader, keep, self.k)


def rank(reader: IndexReader, overlaps: dict[int, int], k: int) -> list[JoinResult]:
    """Top k of {set_id: overlap} by (overlap desc, column_id asc), overlap-0 sets dropped."""
    overlaps = {sid: o for sid, o in overlaps.items() if o > 0}
    if len(overlaps) > k:
        kth = heapq.nlargest(k, overlaps.values())[-1]
        overlaps = {sid: o for sid, o in overlaps.items() if o >= kth}
    refs = reader.describe_sets(overlaps)
    ordered = sorted(overlaps.items(), key=lambda item: (-item[1], refs[item[0]].column_id))[:k]
    out = []
    for sid, o in ordered:
        ref = refs[sid]
        out.append(
            JoinResult(
                table_id=ref.table_id, column=split_column_id(ref.column_id)[1], column_id=ref.column_id, overlap=int(o)
            )
        )
    return out
