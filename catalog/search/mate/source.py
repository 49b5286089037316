"""Where a MATE search reads the index from: the catalog database (`CatalogSource`) or memory
(`MemorySource`, built from plain rows by the same functions the Spark job uses; the tests' and the
benchmark's index).

Both give the search the same four reads, each one round trip per batch of values:
* `list_lengths(tokens)`: each token's number of posting items over the lake (the initial column
  is the key column whose values' lists are shortest in total);
* `postings(tokens, table_refs=None)`: the (token, table) lists of these tokens, in some tables or
  all;
* `row_keys(rows)`: the super keys of some rows of some tables, aligned with the rows given (one
  read for many tables);
* `tables(refs)`: table ids and headers (as stored, JSON: a search parses only its answers').
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from sqlalchemy import Connection, Engine, func, select, tuple_

from catalog.core.identity import normalize_token
from catalog.core.xash import XashSpec, super_keys, xash
from catalog.search.family import published_facts
from catalog.search.mate.models import ROW_BLOCK, MateMeta, MatePosting, MateRowKeys, MateTable

_CHUNK = 500  # values per SELECT ... IN (...)


@dataclass(frozen=True)
class Postings:
    """The cells of one table holding one token: rows (0-based) and 1-based column positions,
    sorted by row."""

    token: str
    table_ref: int
    rows: np.ndarray
    cols: np.ndarray


class MateSource(Protocol):
    spec: XashSpec
    version: str

    def list_lengths(self, tokens: Sequence[str]) -> dict[str, int]: ...

    def postings(self, tokens: Sequence[str], table_refs: Collection[int] | None = None) -> list[Postings]: ...

    def row_keys(self, rows: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]: ...

    def tables(self, refs: Iterable[int]) -> dict[int, tuple[str, str]]: ...


def _blocks_of(rows: np.ndarray) -> list[int]:
    """The `mate_row_keys` blocks holding these rows (a mask, not a sort: rows come by the million)."""
    if len(rows) == 0:
        return []
    mask = np.zeros(int(rows.max()) // ROW_BLOCK + 1, bool)
    mask[rows // ROW_BLOCK] = True
    return [int(b) for b in np.flatnonzero(mask)]


def blocks_of(rows: Mapping[int, np.ndarray]) -> list[tuple[int, int]]:
    """The (table_ref, block) row-key blocks holding these rows, sorted."""
    return sorted({(ref, b) for ref, r in rows.items() for b in _blocks_of(r)})


def assemble_row_keys(
    rows: Mapping[int, np.ndarray], blocks: Mapping[tuple[int, int], np.ndarray], words: int
) -> dict[int, np.ndarray]:
    """The super keys of `rows` (per table), aligned with them, out of their stored blocks."""
    out: dict[int, np.ndarray] = {}
    for ref, r in rows.items():
        dense = np.zeros(((int(r.max()) + 1 if len(r) else 0), words), np.uint64)
        for b in _blocks_of(r):
            block = blocks.get((ref, b))
            if block is None:
                continue
            start = b * ROW_BLOCK
            block = block[: max(0, len(dense) - start)]
            dense[start : start + len(block)] = block
        out[ref] = dense[r]
    return out


def _chunks(items: Sequence[str]) -> Iterable[list[str]]:
    for i in range(0, len(items), _CHUNK):
        yield list(items[i : i + _CHUNK])


# ---------------------------------------------------------------------- catalog
class HeldRowKeys:
    """Row-key blocks a long-running process keeps between searches (`CatalogSource(hold=True)`):
    the least recently used leave past `budget` bytes, and all of them when the index version
    changes. The paper stores a row's super key with each of its posting items, so the filter costs
    no read; stored per row here (5-6 times smaller), a search would otherwise read a block per
    candidate table before it could drop a single row: about as much as the filter saves."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.version = ""
        self.blocks: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self.size = 0
        self.lock = threading.Lock()

    def take(self, version: str, wanted: Sequence[tuple[int, int]]) -> dict[tuple[int, int], np.ndarray]:
        """The held blocks among `wanted` (now the most recently used)."""
        with self.lock:
            if version != self.version:
                self.version, self.blocks, self.size = version, OrderedDict(), 0
            out = {}
            for key in wanted:
                block = self.blocks.get(key)
                if block is not None:
                    self.blocks.move_to_end(key)
                    out[key] = block
            return out

    def hold(self, version: str, blocks: Mapping[tuple[int, int], np.ndarray]) -> None:
        with self.lock:
            if version != self.version:
                return  # read from another index version than the one held now
            for key, block in blocks.items():
                if key not in self.blocks:
                    self.blocks[key] = block
                    self.size += block.nbytes
            while self.size > self.budget and self.blocks:
                self.size -= self.blocks.popitem(last=False)[1].nbytes


HELD_ROW_KEYS_BYTES = 256 << 20  # the seed lake's 9 M rows hold 146 MB of 128-bit keys
_HELD: weakref.WeakKeyDictionary[Engine, HeldRowKeys] = weakref.WeakKeyDictionary()


class CatalogSource:
    """The published index, read on demand (nothing is loaded up front: a query touches a few
    lists and blocks of a lake-sized index). With `hold` (a long-running process: the API, the web
    page, a benchmark), the row-key blocks it reads are kept for the next searches (`HeldRowKeys`)."""

    def __init__(self, conn: Connection, *, hold: bool = False) -> None:
        meta = published_facts(conn, MateMeta, "MATE")
        self.conn = conn
        self.version = meta["index_version"]
        self.spec = XashSpec.from_dict(json.loads(meta["spec"]))
        self.held = _HELD.setdefault(conn.engine, HeldRowKeys(HELD_ROW_KEYS_BYTES)) if hold else None

    def list_lengths(self, tokens: Sequence[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for chunk in _chunks(tokens):
            q = select(MatePosting.token, func.sum(MatePosting.n)).where(MatePosting.token.in_(chunk))
            out.update((t, int(n)) for t, n in self.conn.execute(q.group_by(MatePosting.token)).tuples())
        return out

    def postings(self, tokens: Sequence[str], table_refs: Collection[int] | None = None) -> list[Postings]:
        cols = (MatePosting.token, MatePosting.table_ref, MatePosting.rows, MatePosting.cols)
        out: list[Postings] = []
        refs = sorted(table_refs) if table_refs is not None else None
        for chunk in _chunks(tokens):
            q = select(*cols).where(MatePosting.token.in_(chunk))
            if refs is not None:
                q = q.where(MatePosting.table_ref.in_(refs))
            out.extend(Postings(t, r, rows, c) for t, r, rows, c in self.conn.execute(q).tuples())
        return out

    def row_keys(self, rows: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]:
        return assemble_row_keys(rows, self.row_key_blocks(blocks_of(rows)), self.spec.words)

    def row_key_blocks(self, wanted: Sequence[tuple[int, int]]) -> dict[tuple[int, int], np.ndarray]:
        """The stored super-key blocks (table_ref, block) -> (rows, words) uint64."""
        out = self.held.take(self.version, wanted) if self.held is not None else {}
        missing = [w for w in wanted if w not in out]
        read: dict[tuple[int, int], np.ndarray] = {}
        key = tuple_(MateRowKeys.table_ref, MateRowKeys.block)
        for i in range(0, len(missing), _CHUNK):
            chunk = missing[i : i + _CHUNK]
            q = select(MateRowKeys.table_ref, MateRowKeys.block, MateRowKeys.keys).where(key.in_(chunk))
            for ref, b, blob in self.conn.execute(q):
                read[(ref, b)] = np.frombuffer(blob, "<u8").reshape(-1, self.spec.words)
        if self.held is not None:
            self.held.hold(self.version, read)
        return {**out, **read}

    def tables(self, refs: Iterable[int]) -> dict[int, tuple[str, str]]:
        wanted = sorted(set(refs))
        out: dict[int, tuple[str, str]] = {}
        for i in range(0, len(wanted), _CHUNK):
            q = select(MateTable.table_ref, MateTable.table_id, MateTable.headers).where(
                MateTable.table_ref.in_(wanted[i : i + _CHUNK])
            )
            out.update((ref, (tid, h)) for ref, tid, h in self.conn.execute(q).tuples())
        return out


# ---------------------------------------------------------------------- memory
@dataclass
class MemorySource:
    """The index of a few tables held in memory, built by `build_memory_source`."""

    spec: XashSpec
    version: str = "memory"
    lists: dict[str, dict[int, Postings]] = field(default_factory=dict)
    keys: dict[int, np.ndarray] = field(default_factory=dict)
    info: dict[int, tuple[str, str]] = field(default_factory=dict)

    def list_lengths(self, tokens: Sequence[str]) -> dict[str, int]:
        return {t: sum(len(p.rows) for p in self.lists[t].values()) for t in tokens if t in self.lists}

    def postings(self, tokens: Sequence[str], table_refs: Collection[int] | None = None) -> list[Postings]:
        out: list[Postings] = []
        for t in tokens:
            by_table = self.lists.get(t, {})
            refs = by_table if table_refs is None else [r for r in table_refs if r in by_table]
            out.extend(by_table[r] for r in refs)
        return out

    def row_keys(self, rows: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]:
        return {ref: self.keys[ref][r] for ref, r in rows.items()}

    def tables(self, refs: Iterable[int]) -> dict[int, tuple[str, str]]:
        return {r: self.info[r] for r in refs}


def build_memory_source(
    tables: Sequence[tuple[str, Sequence[str], Sequence[Sequence[str | None]]]], spec: XashSpec | None = None
) -> MemorySource:
    """An index of `tables` ((table_id, headers, data rows of raw cells) each): every cell normalized
    with the lake's `normalize_token`, hashed with `xash`, OR'd per row with `super_keys`."""
    spec = spec or XashSpec()
    source = MemorySource(spec)
    for ref, (table_id, headers, rows) in enumerate(tables):
        source.info[ref] = (table_id, json.dumps(list(headers)))
        cells: dict[str, list[tuple[int, int]]] = defaultdict(list)
        owners: list[int] = []
        tokens: list[str] = []
        for r, row in enumerate(rows):
            for c, raw in enumerate(row, start=1):
                token = normalize_token(raw)
                if token is not None:
                    cells[token].append((r, c))
                    owners.append(r)
                    tokens.append(token)
        hashes = xash(tokens, spec) if tokens else np.zeros((0, spec.words), np.uint64)
        source.keys[ref] = super_keys(hashes, np.asarray(owners, np.int64), len(rows))
        for token, items in cells.items():
            arr = np.asarray(sorted(items), np.int32)
            source.lists.setdefault(token, {})[ref] = Postings(token, ref, arr[:, 0], arr[:, 1])
    return source
