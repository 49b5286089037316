"""An exact string -> integer table for looking up thousands of query tokens at once.

The search holds the whole token dictionary in the process (as the JOSIE reference implementation does). As a
Python dict of 600,000 strings it spreads keys, entries and values over some 90 MB of small heap
objects, and a lookup costs three or four scattered memory accesses; on a virtual machine each of
them is a TLB miss with a two-level page walk, so a 5,000-token query spent 4–5 ms in `dict.get`,
a fifth of a large search. Here the dictionary is a few large numpy arrays (which numpy backs with
huge pages): an open-addressing table of the tokens' `hash()` values and ids, and the tokens' UTF-8
bytes in one buffer. A lookup probes the table for all query tokens together and then confirms
every hit by comparing bytes, so a hash collision can never return a wrong id. Stored tokens that
share a hash with another stored token (vanishingly rare with 64-bit hashes) live in a small dict.

`hash()` of a str is randomised per process, so a table is only valid in the process that built it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

import numpy as np

_EMPTY = -1
_UTF8 = ("utf-8", "surrogatepass")  # a lone surrogate encodes too: equal bytes iff equal strings


class TokenTable:
    """Tokens (distinct str) -> their int ids; absent tokens get -1."""

    def __init__(
        self, tokens: Sequence[str], ids: Sequence[int] | np.ndarray, *, hash_of: Callable[[str], int] = hash
    ) -> None:
        """`hash_of` must give equal strings equal int64 values; tests pass a weak one to force collisions."""
        n = len(tokens)
        token_ids = np.asarray(ids, dtype=np.int64)
        self._hash_of = hash_of
        hashes = np.fromiter(map(hash_of, tokens), dtype=np.int64, count=n)
        self._size = 1 << max(4, int(2 * n).bit_length())  # load factor at most 1/2: short probe runs
        self._mask = self._size - 1
        self._slot_hash = np.zeros(self._size, dtype=np.int64)
        self._slot_row = np.full(self._size, _EMPTY, dtype=np.int64)  # row of the token in the arrays below
        encoded = [t.encode(*_UTF8) for t in tokens]
        self._length = np.fromiter(map(len, encoded), dtype=np.int64, count=n)
        self._start = np.zeros(n, dtype=np.int64)
        if n:
            np.cumsum(self._length[:-1], out=self._start[1:])
        self._bytes = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        self._ids = token_ids
        unique, counts = np.unique(hashes, return_counts=True)
        shared = unique[counts > 1]
        self._shared_hashes = shared
        in_shared = np.isin(hashes, shared)
        self._shared: dict[str, int] = {tokens[r]: int(token_ids[r]) for r in np.flatnonzero(in_shared).tolist()}
        self._insert(np.flatnonzero(~in_shared), hashes)

    def __len__(self) -> int:
        return len(self._ids)

    def _insert(self, rows: np.ndarray, hashes: np.ndarray) -> None:
        """Linear probing, all rows at once: each round, the first row aiming at a free slot takes it."""
        slot = hashes[rows] & self._mask
        while len(rows):
            free = self._slot_row[slot] == _EMPTY
            taken, first = np.unique(slot[free], return_index=True)
            winners = rows[free][first]
            self._slot_row[taken] = winners
            self._slot_hash[taken] = hashes[winners]
            placed = np.zeros(len(rows), dtype=bool)
            placed[np.flatnonzero(free)[first]] = True
            rows, slot = rows[~placed], (slot[~placed] + 1) & self._mask

    def lookup(self, tokens: Collection[str]) -> np.ndarray:
        """The ids of `tokens` (in iteration order), -1 where a token is absent."""
        query = list(tokens)
        m = len(query)
        out = np.full(m, _EMPTY, dtype=np.int64)
        if not m:
            return out
        q_hash = np.fromiter(map(self._hash_of, query), dtype=np.int64, count=m)
        row = self._probe(q_hash)
        hit = np.flatnonzero(row != _EMPTY)
        found = query if len(hit) == m else [query[i] for i in hit.tolist()]
        confirmed = self._same_bytes(found, row[hit])
        out[hit[confirmed]] = self._ids[row[hit[confirmed]]]
        if self._shared:
            for i in np.flatnonzero(np.isin(q_hash, self._shared_hashes)).tolist():
                out[i] = self._shared.get(query[i], _EMPTY)
        return out

    def _probe(self, q_hash: np.ndarray) -> np.ndarray:
        """Per query hash, the row of the stored token with that hash, or -1."""
        row = np.full(len(q_hash), _EMPTY, dtype=np.int64)
        active = np.arange(len(q_hash))
        slot = q_hash & self._mask
        while len(active):
            at = self._slot_row[slot]
            found = (at != _EMPTY) & (self._slot_hash[slot] == q_hash[active])
            row[active[found]] = at[found]
            going_on = (at != _EMPTY) & ~found  # an empty slot ends the probe: absent
            active, slot = active[going_on], (slot[going_on] + 1) & self._mask
        return row

    def _same_bytes(self, candidates: list[str], rows: np.ndarray) -> np.ndarray:
        """Per candidate, whether its UTF-8 bytes equal those of the stored token at `rows`."""
        if not candidates:
            return np.zeros(0, dtype=bool)
        joined = "".join(candidates)
        data = joined.encode(*_UTF8)
        if len(data) == len(joined):  # all ASCII: a token's byte length is its length
            lengths = np.fromiter(map(len, candidates), dtype=np.int64, count=len(candidates))
        else:
            encoded = [c.encode(*_UTF8) for c in candidates]
            lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        same = lengths == self._length[rows]
        q_start = np.zeros(len(lengths), dtype=np.int64)
        np.cumsum(lengths[:-1], out=q_start[1:])
        idx = np.flatnonzero(same & (lengths > 0))  # two empty tokens are equal as they are
        if len(idx):
            lens = lengths[idx]
            first = np.cumsum(lens) - lens  # where each compared token starts in the flat comparison
            offset = np.arange(int(lens.sum())) - np.repeat(first, lens)  # byte number within its token
            query_bytes = np.frombuffer(data, dtype=np.uint8)[np.repeat(q_start[idx], lens) + offset]
            stored_bytes = self._bytes[np.repeat(self._start[rows[idx]], lens) + offset]
            same[idx] = ~np.logical_or.reduceat(query_bytes != stored_bytes, first)
        return same
