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

import numpy as np

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
    # josie: "merge" (every list merged at once, a small query) or "lists" (after the rent, every list
    # counted, no set read); see search.py
    shortcut: str = ""


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
        self.overlaps: dict[int, int] = {}  # pushed one at a time
        self._batches: list[tuple[np.ndarray, np.ndarray]] = []  # pushed together (`push_many`)
        self._final = False  # `of_counts`: the answer is ranked from one batch, nothing more is pushed

    @classmethod
    def of_counts(cls, k: int, set_ids: np.ndarray, overlaps: np.ndarray, *, exact_ties: bool = True) -> TopK:
        """A finished top-k over the exact overlaps of *every* set that meets the query (a search that
        merged all its lists): the arrays are ranked only when the answer is asked for, with no heap
        kept on the way. A small query's whole search costs about as much as this bookkeeping did."""
        top = cls(k, exact_ties=exact_ties)
        top._batches.append((set_ids, overlaps))
        top._final = True
        return top

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
        assert not self._final, "a top-k made by of_counts takes no more sets"
        if overlap <= 0 or self.prunable(overlap):
            return
        self.overlaps[set_id] = overlap
        heapq.heappush(self.heap, overlap)
        if len(self.heap) > self.k:
            heapq.heappop(self.heap)

    def push_many(self, set_ids: np.ndarray, overlaps: np.ndarray) -> None:
        """`push` of each (set id, overlap), vectorised: only the sets at or above the batch's own k-th
        overlap can stay, so only those are kept (ties included: see the module docstring), as arrays."""
        keep = overlaps > 0
        if len(overlaps) > self.k:
            cut = len(overlaps) - self.k
            keep &= overlaps >= np.partition(overlaps, cut)[cut]
        if self.full:
            keep &= overlaps >= self.kth if self.exact_ties else overlaps > self.kth
        ids, values = set_ids[keep].astype(np.int64), overlaps[keep].astype(np.int64)
        self._batches.append((ids, values))
        best = values if len(values) <= self.k else np.partition(values, len(values) - self.k)[-self.k :]
        self.heap = heapq.nlargest(self.k, self.heap + best.tolist())
        heapq.heapify(self.heap)

    def results(self, reader: IndexReader) -> list[JoinResult]:
        """The answer: overlap desc, column_id asc, at most k, read from the kept exact overlaps."""
        if self._final:
            return rank_arrays(reader, *self._batches[0], self.k)
        ids = [np.fromiter(self.overlaps, dtype=np.int64, count=len(self.overlaps)), *(b[0] for b in self._batches)]
        values = [
            np.fromiter(self.overlaps.values(), dtype=np.int64, count=len(self.overlaps)),
            *(b[1] for b in self._batches),
        ]
        all_ids, all_values = np.concatenate(ids), np.concatenate(values)
        keep = all_values >= self.kth
        return rank_arrays(reader, all_ids[keep], all_values[keep], self.k)


def rank(reader: IndexReader, overlaps: dict[int, int], k: int) -> list[JoinResult]:
    """Top k of {set_id: overlap} by (overlap desc, column_id asc), overlap-0 sets dropped."""
    ids = np.fromiter(overlaps, dtype=np.int64, count=len(overlaps))
    return rank_arrays(reader, ids, np.fromiter(overlaps.values(), dtype=np.int64, count=len(overlaps)), k)


def rank_arrays(reader: IndexReader, set_ids: np.ndarray, overlaps: np.ndarray, k: int) -> list[JoinResult]:
    """`rank` of parallel arrays (distinct set ids). Only the sets returned are described when the
    reader knows the column order; else every set tied at the k-th overlap is."""
    keep = overlaps > 0
    ids, values = set_ids[keep], overlaps[keep]
    if len(values) > k:
        cut = len(values) - k
        keep = values >= np.partition(values, cut)[cut]
        ids, values = ids[keep], values[keep]
    if len(values) > k:  # ties at the k-th overlap: the first in column order win
        ranks = reader.column_ranks(ids)
        if ranks is not None:
            first = np.lexsort((ranks, -values))[:k]
            ids, values = ids[first], values[first]
    refs = reader.describe_sets(ids.tolist())
    ordered = sorted(
        zip(ids.tolist(), values.tolist(), strict=True), key=lambda item: (-item[1], refs[item[0]].column_id)
    )[:k]
    out = []
    for sid, o in ordered:
        ref = refs[sid]
        out.append(
            JoinResult(
                table_id=ref.table_id, column=split_column_id(ref.column_id)[1], column_id=ref.column_id, overlap=int(o)
            )
        )
    return out
