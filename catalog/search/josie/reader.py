"""How the online search reads a JOSIE index: the token dictionary, posting lists and integer sets.

`IndexReader` is the one interface the search algorithms (`josie`, `mergelist`, `probeset`, the
brute-force scan) use. Two implementations:

- `DbIndexReader` reads the catalog tables the index job publishes (`josie_tokens`, `josie_sets`,
  `josie_postings`; models in catalog/search/josie/models.py) with `select()` and bound parameters; packed
  int32 arrays are decoded with numpy, and a set suffix is cut out of the BLOB in the database
  (`substr`), so only the bytes after the match position travel. Many posting lists travel in one
  round trip and come back concatenated (`read_lists_packed`, one `frombuffer` per column).
  Long-running processes pass `cache_dictionary=True`: the token dictionary is then held in the
  process per engine (`TokenDictionary`, as the reference implementation does) and reloaded
  when `josie_meta.index_version` changes.
- `InMemoryIndex`, built from plain Python sets by `build_memory_index`, follows the same global
  order as the Spark build (JOSIE, SIGMOD 2019, App. 7.1.2; docs/algorithms/josie.md): posting lists sorted by
  (length, mmh3 of the little-endian int64 set ids, the list itself, then the token); token id = rank in that order;
  duplicate groups are maximal runs of *exactly* equal adjacent lists (never decided by hash alone).
  Tests and benchmarks use it as an index that needs no database.

Positions are 0-based everywhere (the paper's formulas are 1-based; docs/algorithms/josie.md, erratum A1).
"""

from __future__ import annotations

import operator
import random
import threading
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import mmh3
import numpy as np
from sqlalchemy import Connection, Engine, LargeBinary, bindparam, func, select, type_coerce

from catalog.core.identity import split_column_id
from catalog.db.models.base import text_key
from catalog.db.prepared import BoundSelect, DriverCursor, PreparedSelect
from catalog.search.josie.models import JosieMeta, JosiePosting, JosieSet, JosieToken
from catalog.search.josie.token_table import TokenTable


class QueryToken(NamedTuple):
    """A query token found in the dictionary (a NamedTuple: thousands are made per large query)."""

    token_id: int
    frequency: int  # posting-list length
    group_id: int  # duplicate group; adjacent tokens with equal group_id have identical lists


@dataclass(frozen=True)
class PostingList:
    """Parallel int32 arrays sorted by set id: the set, the token's 0-based position in it, its size."""

    set_ids: np.ndarray
    positions: np.ndarray
    sizes: np.ndarray


class PackedLists(NamedTuple):
    """Several posting lists concatenated: list t is [offsets[t], offsets[t + 1]) of each array."""

    set_ids: np.ndarray
    positions: np.ndarray
    sizes: np.ndarray
    offsets: np.ndarray  # int64, one more than the number of lists


def pack_lists(lists: Sequence[PostingList]) -> PackedLists:
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    if not lists:
        empty = np.empty(0, dtype="<i4")
        return PackedLists(empty, empty, empty, offsets)
    np.cumsum([len(pl.set_ids) for pl in lists], out=offsets[1:])
    return PackedLists(
        np.concatenate([pl.set_ids for pl in lists]),
        np.concatenate([pl.positions for pl in lists]),
        np.concatenate([pl.sizes for pl in lists]),
        offsets,
    )


@dataclass(frozen=True)
class SetRef:
    set_id: int
    table_id: str
    column_id: str


def _token_id(q: QueryToken) -> int:
    return q.token_id


_TOKEN_ID = _token_id


class IndexReader(Protocol):
    """What a search needs from an index; every method answers from one consistent index version."""

    @property
    def database(self) -> str:
        """The storage the reads go to (`sqlite`, `postgresql`, `memory`): the cost model's key."""
        ...

    def lookup_tokens(self, tokens: Iterable[str]) -> list[QueryToken]:
        """The tokens present in the dictionary, sorted by token_id (= global order); others dropped."""
        ...

    def lookup_arrays(self, tokens: Iterable[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`lookup_tokens` as three parallel arrays (token_id ascending as int64, frequency, group_id):
        no per-token Python object for large queries."""
        ...

    def read_list(self, token_id: int) -> PostingList: ...

    def read_lists(self, token_ids: Sequence[int]) -> list[PostingList]:
        """Several posting lists in one read (a batch of λ lists is one round trip)."""
        ...

    def read_lists_packed(self, token_ids: list[int]) -> PackedLists:
        """The lists of `token_ids` (Python ints, ascending in the hot path) concatenated in that
        order (one round trip per block)."""
        ...

    def read_set_suffix(self, set_id: int, start: int) -> np.ndarray:
        """Token ids of the set from 0-based position `start` on (ascending)."""
        ...

    def describe_sets(self, set_ids: Collection[int]) -> dict[int, SetRef]: ...

    def column_ranks(self, set_ids: np.ndarray) -> np.ndarray | None:
        """Each set's rank in column_id order (code-point order, as `results.rank` compares), or None
        when the reader keeps no such order: ties at the k-th overlap are then broken by describing
        every tied set. Ranks let a search describe only the k sets it returns."""
        ...

    def set_id_of(self, column_id: str) -> int | None: ...

    def iter_sets(self) -> Iterator[tuple[int, np.ndarray]]:
        """Every (set_id, token ids) of the index: the brute-force scan."""
        ...

    def sample_lists(self, n: int, rng: random.Random) -> list[tuple[int, int]]:
        """Up to n (token_id, frequency) pairs spread over list lengths, for fitting read costs."""
        ...

    def sample_sets(self, n: int, rng: random.Random) -> list[tuple[int, int]]:
        """Up to n (set_id, size) pairs spread over set sizes, for fitting read costs."""
        ...


# --- in memory ---------------------------------------------------------------------------------------


class InMemoryIndex:
    """A JOSIE index held in numpy arrays (see `build_memory_index`)."""

    database = "memory"

    def __init__(
        self,
        *,
        dictionary: Mapping[str, QueryToken],
        lists: Sequence[PostingList],
        sets: Mapping[int, np.ndarray],
        refs: Mapping[int, SetRef],
    ) -> None:
        self.dictionary = dict(dictionary)
        self.lists = list(lists)  # indexed by token_id
        self.sets = dict(sets)
        self.refs = dict(refs)
        self._by_column = {r.column_id: sid for sid, r in self.refs.items()}
        self._ranks: np.ndarray | None = None

    def lookup_tokens(self, tokens: Iterable[str]) -> list[QueryToken]:
        d = self.dictionary
        return sorted([d[t] for t in set(tokens) if t in d], key=_TOKEN_ID)

    def lookup_arrays(self, tokens: Iterable[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return _token_arrays(self.lookup_tokens(tokens))

    def read_list(self, token_id: int) -> PostingList:
        return self.lists[token_id]

    def read_lists(self, token_ids: Sequence[int]) -> list[PostingList]:
        return [self.lists[t] for t in token_ids]

    def read_lists_packed(self, token_ids: list[int]) -> PackedLists:
        return pack_lists([self.lists[t] for t in token_ids])

    def read_set_suffix(self, set_id: int, start: int) -> np.ndarray:
        return self.sets[set_id][start:]

    def describe_sets(self, set_ids: Collection[int]) -> dict[int, SetRef]:
        return {sid: self.refs[sid] for sid in set_ids}

    def column_ranks(self, set_ids: np.ndarray) -> np.ndarray:
        if self._ranks is None:
            self._ranks = ranks_by_column([(sid, r.column_id) for sid, r in self.refs.items()])
        return self._ranks[set_ids]

    def set_id_of(self, column_id: str) -> int | None:
        return self._by_column.get(column_id)

    def iter_sets(self) -> Iterator[tuple[int, np.ndarray]]:
        yield from self.sets.items()

    def sample_lists(self, n: int, rng: random.Random) -> list[tuple[int, int]]:
        ids = _spread(len(self.lists), n, rng)
        return [(t, len(self.lists[t].set_ids)) for t in ids]

    def sample_sets(self, n: int, rng: random.Random) -> list[tuple[int, int]]:
        by_size = sorted(self.sets, key=lambda s: (len(self.sets[s]), s))
        picked = [by_size[i] for i in _spread(len(by_size), n, rng)]
        return [(s, len(self.sets[s])) for s in picked]


def ranks_by_column(sets: Sequence[tuple[int, str]]) -> np.ndarray:
    """rank[set_id] = the set's position in column_id order over `sets` ((set_id, column_id) pairs)."""
    ordered = sorted(sets, key=lambda sc: sc[1])
    ids = np.fromiter((sid for sid, _ in ordered), dtype=np.int64, count=len(ordered))
    ranks = np.zeros(int(ids.max()) + 1 if len(ids) else 0, dtype=np.int64)
    ranks[ids] = np.arange(len(ids), dtype=np.int64)
    return ranks


def _token_arrays(found: Sequence[QueryToken]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parallel (token_id int64, frequency, group_id) arrays of tokens already sorted by token_id."""
    a = np.array(found, dtype=np.int64).reshape(-1, 3)
    return a[:, 0].copy(), a[:, 1].copy(), a[:, 2].copy()


def _spread(count: int, n: int, rng: random.Random) -> list[int]:
    """About n indexes of range(count): geometric steps down from the top (the long lists and big
    sets sit at the end of the order) plus uniform random ones."""
    if count <= n:
        return list(range(count))
    top: set[int] = set()
    step = 1
    while step <= count and len(top) < n // 2:
        top.add(count - step)
        step *= 2
    while len(top) < n:
        top.add(rng.randrange(count))
    return sorted(top)


HASH_SEED = 0x4A05  # the Spark build's seed (spark_jobs/josie/tables.py), not imported: no Spark here


def posting_list_hash(set_ids: Sequence[int]) -> int:
    """mmh3 (signed 32-bit, fixed seed) of the sorted set ids as little-endian int64: the sort key's
    second part, identical on every machine and in the Spark build."""
    return mmh3.hash(np.asarray(set_ids, dtype="<i8").tobytes(), HASH_SEED)


def build_memory_index(
    columns: Mapping[str, Iterable[str]],
    *,
    set_ids: Mapping[str, int] | None = None,
    token_order: Sequence[str] | None = None,
) -> InMemoryIndex:
    """An index of `columns` (column_id -> tokens), built in pure Python in the Spark build's order.

    Set ids default to the rank of the column_id in sorted order. Columns without tokens get an empty
    set and appear in no posting list. `token_order` imposes another global order (the paper's
    worked examples use the tokens' subscripts); duplicate groups are still runs of equal lists.
    """
    col_ids = sorted(columns)
    sid_of = dict(set_ids) if set_ids is not None else {c: i for i, c in enumerate(col_ids)}
    token_sets = {sid_of[c]: set(columns[c]) for c in col_ids}
    postings: dict[str, list[int]] = {}
    for sid in sorted(token_sets):
        for tok in token_sets[sid]:
            postings.setdefault(tok, []).append(sid)
    if token_order is None:
        ordered = sorted(postings, key=lambda t: (len(postings[t]), posting_list_hash(postings[t]), postings[t], t))
    else:
        ordered = [t for t in token_order if t in postings]
    token_id = {t: i for i, t in enumerate(ordered)}
    group_ids: list[int] = []
    for i, t in enumerate(ordered):
        if i == 0:
            group_ids.append(0)
        else:
            same = postings[t] == postings[ordered[i - 1]]  # exact comparison, not the hash
            group_ids.append(group_ids[-1] if same else group_ids[-1] + 1)
    sets = {sid: np.array(sorted(token_id[t] for t in toks), dtype=np.int32) for sid, toks in token_sets.items()}
    entries: list[list[tuple[int, int, int]]] = [[] for _ in ordered]
    for sid in sorted(sets):
        arr = sets[sid]
        for pos, tid in enumerate(arr.tolist()):
            entries[tid].append((sid, pos, len(arr)))
    lists = []
    for ent in entries:
        a = np.array(ent, dtype=np.int32).reshape(-1, 3)
        lists.append(PostingList(set_ids=a[:, 0].copy(), positions=a[:, 1].copy(), sizes=a[:, 2].copy()))
    dictionary = {t: QueryToken(token_id[t], len(postings[t]), group_ids[token_id[t]]) for t in ordered}
    refs = {sid_of[c]: SetRef(sid_of[c], split_column_id(c)[0], c) for c in col_ids}
    return InMemoryIndex(dictionary=dictionary, lists=lists, sets=sets, refs=refs)


# --- catalog database --------------------------------------------------------------------------------

# The index job's models (catalog/search/josie/models.py, migration 0004_josie); read with Core selects.
josie_tokens = JosieToken.__table__
josie_sets = JosieSet.__table__
josie_postings = JosiePosting.__table__
josie_meta = JosieMeta.__table__

# Compiled once per dialect and run on the driver's cursor (`catalog.db.prepared`): the per-read
# overhead of the hot single-row reads drops from ~100 µs to a few.
_READ_LIST = PreparedSelect(
    select(josie_postings.c.set_ids, josie_postings.c.positions, josie_postings.c.sizes).where(
        josie_postings.c.token_id == bindparam("token_id")
    )
)
_READ_SUFFIX = PreparedSelect(
    select(
        func.substr(type_coerce(josie_sets.c.tokens, LargeBinary), bindparam("byte_start"), type_=LargeBinary)
    ).where(josie_sets.c.set_id == bindparam("set_id"))
)
_SET_OF = PreparedSelect(select(josie_sets.c.set_id).where(josie_sets.c.column_id == bindparam("column_id")))
_INDEX_VERSION = PreparedSelect(select(josie_meta.c.value).where(josie_meta.c.key == bindparam("key")))
_ALL_SETS = PreparedSelect(select(josie_sets.c.set_id, josie_sets.c.column_id))
_ALL_TOKENS = PreparedSelect(
    select(josie_tokens.c.token, josie_tokens.c.token_id, josie_tokens.c.frequency, josie_tokens.c.group_id)
)


_EMPTY_LIST = PostingList(np.empty(0, dtype="<i4"), np.empty(0, dtype="<i4"), np.empty(0, dtype="<i4"))


def _i32(blob: bytes | memoryview | np.ndarray | None) -> np.ndarray:
    if isinstance(blob, np.ndarray):  # already decoded by the PackedInt32Array column type
        return blob
    return np.frombuffer(blob, dtype="<i4") if blob else np.empty(0, dtype="<i4")


_FIRST_ITEM = operator.itemgetter(0)


def _bytes(blob: bytes | memoryview | np.ndarray | None) -> bytes | memoryview:
    if blob is None:
        return b""
    return blob.astype("<i4").tobytes() if isinstance(blob, np.ndarray) else blob


_BLOCKS = (1, 4, 20, 64, 256)  # fixed IN-list sizes of batched reads (padded); 20 = JOSIE's batch of lists


def _in_statements(columns: Sequence[Any], key: Any) -> dict[int, PreparedSelect]:
    """`SELECT columns WHERE key IN (:p0 … :pN)` for each block size N in `_BLOCKS`."""
    return {b: PreparedSelect(select(*columns).where(key.in_([bindparam(f"p{i}") for i in range(b)]))) for b in _BLOCKS}


def _bind_all(cursor: DriverCursor, statements: dict[int, PreparedSelect]) -> dict[int, BoundSelect]:
    return {b: cursor.bind(s) for b, s in statements.items()}


_t, _st, _po = josie_tokens.c, josie_sets.c, josie_postings.c
_READ_LISTS_IN = _in_statements([_po.token_id, _po.set_ids, _po.positions, _po.sizes], _po.token_id)
_LOOKUP_IN = _in_statements([_t.token, _t.token_id, _t.frequency, _t.group_id], _t.token_key)
_DESCRIBE_IN = _in_statements([_st.set_id, _st.table_id, _st.column_id], _st.set_id)


def _run_in_blocks(statements: dict[int, BoundSelect], values: Sequence[Any], pad: Any) -> list[Any]:
    """Rows for all `values`, one round trip per block of up to 256 (the last block padded)."""
    rows: list[Any] = []
    i = 0
    while i < len(values):
        size = next((b for b in _BLOCKS if b >= len(values) - i), _BLOCKS[-1])
        chunk = list(values[i : i + size])
        rows.extend(statements[size].all_in(chunk + [pad] * (size - len(chunk))))
        i += size
    return rows


class TokenDictionary:
    """The whole token dictionary of one index version held in the process (as the
    reference implementation does): token -> token_id (`TokenTable`), and frequency / group_id arrays
    indexed by token_id."""

    def __init__(self, version: str, rows: Sequence[tuple[str, int, int, int]]) -> None:
        self.version = version
        size = 1 + max((r[1] for r in rows), default=-1)
        self.frequencies = np.zeros(size, dtype=np.int64)
        self.group_ids = np.zeros(size, dtype=np.int64)
        tokens, ids, freqs, groups = zip(*rows, strict=True) if rows else ((), (), (), ())
        at = np.fromiter(ids, dtype=np.int64, count=len(ids))
        self.table = TokenTable(tokens, at)
        self.frequencies[at] = np.fromiter(freqs, dtype=np.int64, count=len(ids))
        self.group_ids[at] = np.fromiter(groups, dtype=np.int64, count=len(ids))
        self._ranks: np.ndarray | None = None  # set ranks in column order, loaded with the first tie
        self._lock = threading.Lock()

    def column_ranks(self, load: Callable[[], Sequence[tuple[int, str]]]) -> np.ndarray:
        """`ranks_by_column` of this version's sets, from `load` (a read in the same snapshot) on first use."""
        ranks = self._ranks
        if ranks is None:
            with self._lock:
                if self._ranks is None:
                    self._ranks = ranks_by_column(load())
                ranks = self._ranks
        return ranks

    def lookup(self, tokens: Iterable[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ids = self.table.lookup(tokens if isinstance(tokens, set | frozenset) else set(tokens))
        ids = np.sort(ids[ids >= 0])
        return ids, self.frequencies[ids], self.group_ids[ids]


# One dictionary per engine (= per catalog database), replaced when josie_meta.index_version moves.
_DICTIONARIES: weakref.WeakKeyDictionary[Engine, TokenDictionary] = weakref.WeakKeyDictionary()
_DICTIONARIES_LOCK = threading.Lock()


def clear_dictionary_cache() -> None:
    """Forget every cached dictionary (tests; a process that rewrote an index without a new version)."""
    with _DICTIONARIES_LOCK:
        _DICTIONARIES.clear()


class DbIndexReader:
    """Reads the JOSIE catalog tables through one open connection (SQLite or PostgreSQL).

    With `cache_dictionary=True` (long-running processes: the API server, benchmarks) query tokens
    are looked up in a `TokenDictionary` loaded once per engine and reused by every reader on it; each
    lookup first reads `josie_meta.index_version` (one primary-key row) and reloads the dictionary
    when it changed, so a published index version is never answered from a stale dictionary. An
    index without an `index_version` row is never cached. Without it (the CLI: one query per
    process) the query's tokens are looked up in `josie_tokens` by their digest (`token_key`) and
    confirmed by exact comparison, which is cheaper than loading it all.
    """

    def __init__(self, conn: Connection, *, cache_dictionary: bool = False) -> None:
        self.conn = conn
        self.cache_dictionary = cache_dictionary
        self._cursor = cursor = DriverCursor(conn)  # one driver cursor for this connection's reads
        self._version = cursor.bind(_INDEX_VERSION)
        self._read_list = cursor.bind(_READ_LIST)
        self._read_suffix = cursor.bind(_READ_SUFFIX)
        self._read_lists = _bind_all(cursor, _READ_LISTS_IN)
        self._lookup = _bind_all(cursor, _LOOKUP_IN)
        self._describe = _bind_all(cursor, _DESCRIBE_IN)
        self._set_of = cursor.bind(_SET_OF)
        if conn.dialect.name == "sqlite":  # let SQLite map the file instead of copying pages per read
            conn.exec_driver_sql("PRAGMA mmap_size=268435456")

    @property
    def database(self) -> str:
        return self.conn.dialect.name

    def token_dictionary(self) -> TokenDictionary | None:
        """The cached dictionary of the index version this connection sees (loaded if needed), or None
        when caching is off or the index has no version."""
        if not self.cache_dictionary:
            return None
        row = self._version.first(key="index_version")
        if row is None:
            return None
        version = str(row[0])
        engine = self.conn.engine
        cached = _DICTIONARIES.get(engine)
        if cached is not None and cached.version == version:
            return cached
        with _DICTIONARIES_LOCK:
            cached = _DICTIONARIES.get(engine)
            if cached is None or cached.version != version:
                # same transaction as the version read: the dictionary belongs to that version
                cached = TokenDictionary(version, self._cursor.bind(_ALL_TOKENS).all({}))
                _DICTIONARIES[engine] = cached
        return cached

    def lookup_tokens(self, tokens: Iterable[str]) -> list[QueryToken]:
        d = self.token_dictionary()
        if d is not None:
            ids, freqs, groups = d.lookup(tokens)
            return list(map(QueryToken._make, zip(ids.tolist(), freqs.tolist(), groups.tolist(), strict=True)))
        wanted = set(tokens)
        keys = sorted({text_key(t) for t in wanted})
        rows = _run_in_blocks(self._lookup, keys, None)  # NULL matches no key
        # a row is a hit only if its token is exactly a query token: a shared digest is no match
        return sorted(QueryToken(tid, freq, group) for token, tid, freq, group in rows if token in wanted)

    def lookup_arrays(self, tokens: Iterable[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        d = self.token_dictionary()
        if d is not None:
            return d.lookup(tokens)
        return _token_arrays(self.lookup_tokens(tokens))

    def read_list(self, token_id: int) -> PostingList:
        row = self._read_list.first(token_id=int(token_id))
        if row is None:
            return _EMPTY_LIST
        return PostingList(_i32(row[0]), _i32(row[1]), _i32(row[2]))

    def read_lists(self, token_ids: Sequence[int]) -> list[PostingList]:
        ids = [int(t) for t in token_ids]
        found = {
            int(tid): PostingList(_i32(sids), _i32(poss), _i32(sizes))
            for tid, sids, poss, sizes in _run_in_blocks(self._read_lists, ids, -1)
        }
        return [found.get(t, _EMPTY_LIST) for t in ids]

    def read_lists_packed(self, token_ids: list[int]) -> PackedLists:
        ids = token_ids
        rows = _run_in_blocks(self._read_lists, ids, -1)
        rows.sort(key=_FIRST_ITEM)
        if len(rows) != len(ids) or list(map(_FIRST_ITEM, rows)) != ids:  # absent lists, or ids not ascending
            found = {int(r[0]): r for r in rows}
            rows = [found.get(t) or (t, b"", b"", b"") for t in ids]
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        if not rows:
            return PackedLists(offsets[:0].astype("<i4"), offsets[:0].astype("<i4"), offsets[:0].astype("<i4"), offsets)
        _, *columns = zip(*rows, strict=True)
        if not isinstance(columns[0][0], bytes | memoryview):
            columns = [tuple(map(_bytes, col)) for col in columns]
        sids, poss, sizes = columns
        np.cumsum(np.fromiter(map(len, sids), dtype=np.int64, count=len(sids)), out=offsets[1:])
        offsets //= 4
        return PackedLists(
            np.frombuffer(b"".join(sids), dtype="<i4"),
            np.frombuffer(b"".join(poss), dtype="<i4"),
            np.frombuffer(b"".join(sizes), dtype="<i4"),
            offsets,
        )

    def read_set_suffix(self, set_id: int, start: int) -> np.ndarray:
        row = self._read_suffix.first(set_id=int(set_id), byte_start=4 * int(start) + 1)
        return _i32(row[0] if row is not None else None)

    def describe_sets(self, set_ids: Collection[int]) -> dict[int, SetRef]:
        ids = sorted({int(s) for s in set_ids})
        return {int(sid): SetRef(int(sid), tid, cid) for sid, tid, cid in _run_in_blocks(self._describe, ids, -1)}

    def column_ranks(self, set_ids: np.ndarray) -> np.ndarray | None:
        d = self.token_dictionary()
        if d is None:
            return None
        return d.column_ranks(lambda: self._cursor.bind(_ALL_SETS).all({}))[set_ids]

    def set_id_of(self, column_id: str) -> int | None:
        row = self._set_of.first(column_id=column_id)
        return None if row is None else int(row[0])

    def iter_sets(self) -> Iterator[tuple[int, np.ndarray]]:
        for sid, blob in self.conn.execute(select(josie_sets.c.set_id, josie_sets.c.tokens)):
            yield int(sid), _i32(blob)

    def sample_lists(self, n: int, rng: random.Random) -> list[tuple[int, int]]:
        max_id = self.conn.execute(select(func.max(josie_tokens.c.token_id))).scalar()
        if max_id is None:
            return []
        wanted = [int(x) for x in _spread(int(max_id) + 1, n, rng)]
        stmt = select(josie_tokens.c.token_id, josie_tokens.c.frequency).where(
            josie_tokens.c.token_id.in_(bindparam("ids", expanding=True))
        )
        return [(int(t), int(f)) for t, f in self.conn.execute(stmt, {"ids": wanted})]

    def sample_sets(self, n: int, rng: random.Random) -> list[tuple[int, int]]:
        biggest = self.conn.execute(
            select(josie_sets.c.set_id, josie_sets.c.size)
            .order_by(josie_sets.c.size.desc(), josie_sets.c.set_id)
            .limit(n // 4 + 1)
        ).all()
        max_id = self.conn.execute(select(func.max(josie_sets.c.set_id))).scalar()
        if max_id is None:
            return []
        wanted = [rng.randrange(int(max_id) + 1) for _ in range(n - len(biggest))]
        stmt = select(josie_sets.c.set_id, josie_sets.c.size).where(
            josie_sets.c.set_id.in_(bindparam("ids", expanding=True))
        )
        rows = {int(s): int(z) for s, z in biggest}
        rows.update({int(s): int(z) for s, z in self.conn.execute(stmt, {"ids": wanted})})
        return sorted(rows.items())
