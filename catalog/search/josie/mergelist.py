"""MergeList-D: read the posting list of every distinct query run and count (JOSIE, SIGMOD 2019, §2.2).

No set is read; the last list of each duplicate run credits the run length r to each of its sets.
Its cost does not depend on k. Counting is vectorised with numpy (`EntryCounter`), and JOSIE counts
the lists it reads before any set read with the same counter.
"""

from __future__ import annotations

import threading

import numpy as np

from catalog.search.josie.query_plan import QueryPlan
from catalog.search.josie.reader import IndexReader, PackedLists
from catalog.search.josie.results import SearchStats

_scratch = threading.local()  # per thread: one int64 array indexed by set id, all zero between counts


def mergelist_counts(
    reader: IndexReader, plan: QueryPlan, *, ignore: frozenset[int] = frozenset(), stats: SearchStats | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(set ids, overlaps) of every set sharing a token with the query, ignored sets left out."""
    stats = stats if stats is not None else SearchStats()
    n_runs = len(plan.run_ends)
    packed = reader.read_lists_packed(plan.list_token_ids().tolist())
    stats.n_lists_read += n_runs
    stats.n_lists_fetched += n_runs
    counter = EntryCounter()
    counter.add(packed, np.asarray(plan.skipped, dtype=np.int64) + 1)
    uniq, counts = counter.take()
    if ignore and len(uniq):
        keep = ~np.isin(uniq, np.fromiter(ignore, dtype=np.int64, count=len(ignore)))
        uniq, counts = uniq[keep], counts[keep]
    stats.n_candidates += len(uniq)
    return uniq, counts


class EntryCounter:
    """Per set id, the sum of the credits of the lists holding it, over lists added in one or more
    steps; `take` hands the sums out once.

    Counts in a per-thread scratch array indexed by set id instead of sorting the entries: `np.unique`
    over the ~10,000 entries of a middling query took longer than reading its lists. A counter that
    is never taken or discarded (a search that raised) keeps its array; the next one allocates anew."""

    def __init__(self) -> None:
        self._acc: np.ndarray | None = None
        self._sids: list[np.ndarray] = []

    def add(self, lists: PackedLists, credits: np.ndarray) -> np.ndarray:
        """Count `lists` (list t credits `credits[t]`); their entries' set ids, as int64."""
        sid = lists.set_ids.astype(np.int64)
        if len(sid) == 0:
            return sid
        acc = self._grown(int(sid.max()) + 1)
        if bool((credits == 1).all()):
            np.add.at(acc, sid, 1)
        else:
            np.add.at(acc, sid, np.repeat(credits, np.diff(lists.offsets)))
        self._sids.append(sid)
        return sid

    def counts(self, set_ids: np.ndarray) -> np.ndarray:
        """The sums so far of sets met by the lists added."""
        assert self._acc is not None
        return self._acc[set_ids]

    def take(self) -> tuple[np.ndarray, np.ndarray]:
        """(distinct set ids met, in no particular order; their sums), and the counter is empty again."""
        if self._acc is None:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        acc = self._acc
        sid = self._sids[0] if len(self._sids) == 1 else np.concatenate(self._sids)
        per_entry = acc[sid]
        one = one_entry_each(sid, acc)  # overwrites the sums, read just above
        uniq, counts = sid[one], per_entry[one]
        acc[uniq] = 0
        self._give_back()
        return uniq, counts

    def discard(self) -> None:
        """Forget everything added."""
        if self._acc is not None:
            self._acc[np.concatenate(self._sids)] = 0
            self._give_back()

    def _grown(self, size: int) -> np.ndarray:
        if self._acc is None:
            acc = getattr(_scratch, "acc", None)
            _scratch.acc = None
            self._acc = acc if acc is not None and len(acc) >= size else np.zeros(max(1024, 2 * size), dtype=np.int64)
        elif len(self._acc) < size:
            grown = np.zeros(2 * size, dtype=np.int64)
            grown[: len(self._acc)] = self._acc
            self._acc = grown
        return self._acc

    def _give_back(self) -> None:
        _scratch.acc, self._acc, self._sids = self._acc, None, []


def one_entry_each(set_ids: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """One entry number per distinct value of `set_ids` (int64), without sorting: entry numbers are
    scattered into `scratch` (indexed by set id, long enough; its values at those ids are overwritten)
    and each set keeps whichever of its entries won (any winner will do)."""
    entry = np.arange(len(set_ids), dtype=np.int64)
    scratch[set_ids] = entry
    return np.flatnonzero(scratch[set_ids] == entry)
