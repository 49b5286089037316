"""A query as the exact algorithms walk it: token ids in global order and its duplicate runs.

Duplicate posting lists (JOSIE, SIGMOD 2019, §3.5 and App. 7.1.2): tokens of one duplicate group
are adjacent in token-id order, and so in the sorted query; of each maximal run of equal group ids
only the *last* list is read, and it credits the run length r to every set in it (those r tokens
sit at consecutive positions j−r+1 … j of each such set).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from catalog.search.josie.reader import IndexReader, PackedLists, PostingList, QueryToken
from catalog.search.josie.results import SearchStats


@dataclass(frozen=True)
class QueryPlan:
    token_ids: np.ndarray  # sorted ascending (int64)
    frequencies: list[int]
    group_ids: list[int]
    run_ends: list[int]  # 0-based query position of the last token of each duplicate run
    skipped: list[int]  # per run: its length − 1
    list_entries: int  # entries in the lists read (one list per run): the total of their frequencies

    @property
    def n(self) -> int:
        return len(self.frequencies)

    def list_token_ids(self) -> np.ndarray:
        """Per run, the token whose posting list is read: the run's last."""
        return self.token_ids[np.asarray(self.run_ends, dtype=np.int64)]

    def runs(self) -> list[tuple[int, int]]:
        """(i, skipped) per run: i is the run's last position, skipped = run length − 1."""
        return list(zip(self.run_ends, self.skipped, strict=True))


def plan_query(tokens: Sequence[QueryToken]) -> QueryPlan:
    tokens = sorted(tokens, key=lambda q: q.token_id)
    return plan_arrays(
        np.array([q.token_id for q in tokens], dtype=np.int64),
        np.array([q.frequency for q in tokens], dtype=np.int64),
        np.array([q.group_id for q in tokens], dtype=np.int64),
    )


def plan_arrays(token_ids: np.ndarray, frequencies: np.ndarray, group_ids: np.ndarray) -> QueryPlan:
    """The plan of query tokens given as parallel arrays sorted by token id (`IndexReader.lookup_arrays`)."""
    gids = np.asarray(group_ids, dtype=np.int64)
    n = len(gids)
    ends = np.flatnonzero(np.append(gids[1:] != gids[:-1], True)) if n else np.empty(0, dtype=np.int64)
    starts = np.concatenate(([0], ends[:-1] + 1)) if n else ends
    return QueryPlan(
        token_ids=np.asarray(token_ids, dtype=np.int64),
        frequencies=np.asarray(frequencies).tolist(),
        group_ids=gids.tolist(),
        run_ends=ends.tolist(),
        skipped=(ends - starts).tolist(),
        list_entries=int(np.asarray(frequencies, dtype=np.int64)[ends].sum()),
    )


def plan_tokens(reader: IndexReader, tokens: Iterable[str]) -> QueryPlan:
    """Look the query's tokens up in the reader's dictionary and plan the query."""
    return plan_arrays(*reader.lookup_arrays(tokens))


def count_matches(query_ids: np.ndarray, tokens: np.ndarray) -> int:
    """|tokens ∩ query| for two ascending arrays of distinct token ids."""
    if len(tokens) == 0 or len(query_ids) == 0:
        return 0
    idx = np.searchsorted(query_ids, tokens)
    idx[idx == len(query_ids)] = len(query_ids) - 1
    return int(np.count_nonzero(query_ids[idx] == tokens))


_MAX_AHEAD = 256


class ListReader:
    """Posting lists of the query's runs in order, fetched `block` runs per round trip at first, more
    as the search goes on.

    Counts `n_lists_read` as the lists the algorithm consumed (the paper's metric) and
    `n_lists_fetched` as those that travelled (a block may overshoot where the search stops).
    """

    def __init__(self, reader: IndexReader, plan: QueryPlan, stats: SearchStats, *, block: int = 20) -> None:
        self.reader, self.plan, self.stats, self.block = reader, plan, stats, max(1, block)
        self.ends = plan.run_ends
        self._list_ids = plan.list_token_ids()
        self._first = 0  # run index of the chunk's first list
        self._chunk: PackedLists | None = None

    def _fetch(self, run_idx: int, need: int, until: int) -> None:
        # Everything the segment needs (runs up to `need`) in one call, plus read-ahead that grows with
        # what the search has consumed (up to 256 lists): a search that ends early fetched at most
        # about twice what it read, a long one makes few round trips.
        ahead = min(_MAX_AHEAD, max(self.block, self.stats.n_lists_read))
        stop = min(max(run_idx + ahead, need), len(self.ends), until)  # until > run_idx: see `segment`
        self._chunk = self.reader.read_lists_packed(self._list_ids[run_idx:stop].tolist())
        self._first = run_idx
        self.stats.n_lists_fetched += stop - run_idx

    def segment(self, start: int, stop: int, *, fetch_until: int | None = None) -> PackedLists:
        """The lists of runs [start, stop) concatenated (counted as read); read-ahead stops before
        run `fetch_until` (JOSIE: where lists may stop being needed), or at the end of the query."""
        until = len(self.ends) if fetch_until is None else max(stop, fetch_until)
        pieces: list[PackedLists] = []
        r = start
        while r < stop:
            chunk = self._chunk
            if chunk is None or not (self._first <= r < self._first + len(chunk.offsets) - 1):
                self._fetch(r, stop, until)
                chunk = self._chunk
                assert chunk is not None
            hi = min(stop, self._first + len(chunk.offsets) - 1)
            a, b = chunk.offsets[r - self._first], chunk.offsets[hi - self._first]
            offs = chunk.offsets[r - self._first : hi - self._first + 1] - a
            pieces.append(PackedLists(chunk.set_ids[a:b], chunk.positions[a:b], chunk.sizes[a:b], offs))
            r = hi
        self.stats.n_lists_read += stop - start
        if len(pieces) == 1:
            return pieces[0]
        offsets = [pieces[0].offsets]
        base = pieces[0].offsets[-1]
        for pc in pieces[1:]:
            offsets.append(pc.offsets[1:] + base)
            base += pc.offsets[-1]
        return PackedLists(
            np.concatenate([pc.set_ids for pc in pieces]),
            np.concatenate([pc.positions for pc in pieces]),
            np.concatenate([pc.sizes for pc in pieces]),
            np.concatenate(offsets),
        )

    def list_at(self, run_idx: int) -> PostingList:
        seg = self.segment(run_idx, run_idx + 1)
        return PostingList(seg.set_ids, seg.positions, seg.sizes)
