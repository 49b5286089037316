"""Precomputed n-ary join lists: for every table with a detected composite key, the tables it joins
best with on that key (`juncture lookup joinable TABLE --key a,b`, `GET /v1/joinable/TABLE?key=a,b`).

Which lists: each table's detected keys (the catalog's `keys`) of 2 to `MAX_LIST_KEY` columns, the
best `KEYS_PER_TABLE` of them by score; each list holds the top `LIST_K` other tables by n-ary
joinability, ranked and tie-broken exactly as `juncture search nary` ranks them. A list is the
search of its table's own key tuples, read back from the published index (the tuples of the
table's rows whose key cells are all non-null, normalized as the lake normalizes), so it needs no
Spark and equals the search a user would run with the table's CSV.

The lists are refreshed in the MATE publisher's transaction, after the index itself, so a lookup
sees the lists of the index it can search. A batch refreshes only what it can change, exactly:
* lists of the batch's touched tables (deleted or changed) go; a list naming a touched table is
  searched again in full (its k+1-th table is unknown), as is every list of an added table;
* every other list can only gain added tables: its table is searched against the added tables
  alone and the answers merged into the list (a table outside the list was beaten by k tables that
  are all still there). Only tables sharing a value with an added table are searched.
"""

from __future__ import annotations

import json
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection, Row, and_, delete, insert, select, tuple_

from catalog.core.errors import UnknownIdError, UserError
from catalog.db.models import CatalogTable, TableKey
from catalog.search.mate.models import MateList, MatePosting, MateTable
from catalog.search.mate.search import NaryResult, search_tuples
from catalog.search.mate.source import CatalogSource, MateSource, Postings, assemble_row_keys, blocks_of

LIST_K = 10  # tables per list
MAX_LIST_KEY = 3  # key columns of a listed key, at most
KEYS_PER_TABLE = 2  # listed keys per table, the best by score
# A list whose key values are so common that its search could pair more (key tuple, lake row) than
# this is not precomputed (the lookup says so; `search nary` answers it): one such key (a year and
# a month over a lake of monthly series) would hold up every publish.
MAX_LIST_PAIRS = 2_000_000
OVER_BUDGET = -1  # the joinability of a list's rank-0 row when it was not precomputed
_CHUNK = 500
# Posting cells and row-key rows a refresh keeps in memory between its searches (each kind; a
# posting cell is two int32s, a row key four uint64s at 256 bits).
REMEMBERED_CELLS = 4_000_000

Listed = tuple[str, tuple[str, ...]]  # (table_id, key columns)


@dataclass(frozen=True)
class NaryJoinableInfo:
    """A table that joins with the subject table on one of its composite keys."""

    table_id: str
    rank: int
    joinability: int  # distinct key tuples of the subject found in the table under `mapping`
    mapping: dict[str, str]  # subject key column -> the table's column
    key: list[str]


# ---------------------------------------------------------------------- refresh (publish)
def listed_keys(conn: Connection) -> dict[str, list[tuple[str, ...]]]:
    """The keys that get a list, per table."""
    rows = conn.execute(
        select(TableKey.table_id, TableKey.columns).order_by(TableKey.table_id, TableKey.score.desc(), TableKey.id)
    ).tuples()
    out: dict[str, list[tuple[str, ...]]] = defaultdict(list)
    for table_id, columns in rows:
        if 2 <= len(columns) <= MAX_LIST_KEY and len(out[table_id]) < KEYS_PER_TABLE:
            out[table_id].append(tuple(columns))
    return out


def refresh_lists(conn: Connection, added: Collection[str] | None, touched: Collection[str] = ()) -> dict[str, int]:
    """Bring `mate_lists` to the published index: every list (`added` None), or a batch's share."""
    wanted = {(t, k) for t, keys in listed_keys(conn).items() for k in keys}
    if added is None:
        conn.execute(delete(MateList))
        existing: set[Listed] = set()
    else:
        _delete_lists(conn, [(t, None) for t in sorted(touched)])
        naming = select(MateList.table_id, MateList.key).distinct()
        stale = _listed(conn, naming.where(MateList.candidate_table_id.in_(sorted(touched)))) if touched else set()
        existing = _listed(conn, select(MateList.table_id, MateList.key).where(MateList.rank == 0))
        gone = (existing - wanted) | (existing & stale)
        _delete_lists(conn, [(t, _key_text(k)) for t, k in sorted(gone)])
        existing -= gone
    tables = _tables(conn)
    source, postings = _Remembering(CatalogSource(conn), REMEMBERED_CELLS), _TablePostings(conn)
    searched = 0
    for table_id, key in sorted(wanted - existing):
        if table_id in tables:
            _write(conn, table_id, key, _search(source, postings, tables, table_id, key, None))
            searched += 1
    over = _listed(conn, select(MateList.table_id, MateList.key).where(MateList.joinability == OVER_BUDGET))
    partial = 0
    added_refs = {tables[t][0] for t in added or () if t in tables}
    if added_refs:
        sharing = _sharing_tables(conn, added_refs)
        for table_id, key in sorted((existing & wanted) - over):
            if table_id in tables and tables[table_id][0] in sharing:
                new = _search(source, postings, tables, table_id, key, added_refs)
                if new:  # never None: a search of some tables has no budget
                    _merge(conn, table_id, key, new)
                partial += 1
    return {"mate_lists_searched": searched, "mate_lists_merged": partial, "mate_lists_over_budget": len(over)}


def _listed(conn: Connection, statement: Any) -> set[Listed]:
    return {(t, tuple(json.loads(k))) for t, k in conn.execute(statement).tuples()}


def _key_text(key: Sequence[str]) -> str:
    return json.dumps(list(key))


def _delete_lists(conn: Connection, lists: list[tuple[str, str | None]]) -> None:
    """Delete these lists ((table_id, key JSON), or every list of the table with key None)."""
    whole = [t for t, k in lists if k is None]
    for i in range(0, len(whole), _CHUNK):
        conn.execute(delete(MateList).where(MateList.table_id.in_(whole[i : i + _CHUNK])))
    some = [(t, k) for t, k in lists if k is not None]
    for i in range(0, len(some), _CHUNK):
        conn.execute(delete(MateList).where(tuple_(MateList.table_id, MateList.key).in_(some[i : i + _CHUNK])))


def _tables(conn: Connection) -> dict[str, tuple[int, list[str], int]]:
    """table_id -> (table_ref, headers, n_rows) of every indexed table."""
    rows = conn.execute(select(MateTable.table_id, MateTable.table_ref, MateTable.headers, MateTable.n_rows))
    return {t: (ref, json.loads(h), n) for t, ref, h, n in rows.tuples()}


def _sharing_tables(conn: Connection, refs: Collection[int]) -> set[int]:
    """The tables holding a value one of `refs` holds (only they can gain one of them)."""
    tokens = select(MatePosting.token).where(MatePosting.table_ref.in_(sorted(refs)))
    return set(conn.execute(select(MatePosting.table_ref).distinct().where(MatePosting.token.in_(tokens))).scalars())


def key_tuples(
    postings: Iterable[tuple[str, np.ndarray, np.ndarray]], positions: Sequence[int]
) -> list[tuple[str, ...]]:
    """A table's distinct key tuples, sorted, from its posting lists ((token, rows, 1-based cols)
    each): the tokens at `positions` of every row whose key cells all hold one."""
    lists = list(postings)
    m = len(positions)
    if not lists:
        return []
    code = np.repeat(np.arange(len(lists)), [len(p[1]) for p in lists])
    rows = np.concatenate([np.asarray(p[1], np.int64) for p in lists])
    cols = np.concatenate([np.asarray(p[2], np.int64) for p in lists])
    slot = np.full(max(int(cols.max()), *positions) + 1, -1, np.int64)
    slot[list(positions)] = np.arange(m)
    keep = slot[cols] >= 0
    grid = np.full((int(rows.max()) + 1, m), -1, np.int64)
    grid[rows[keep], slot[cols[keep]]] = code[keep]
    complete = np.unique(grid[(grid >= 0).all(axis=1)], axis=0)
    return sorted(tuple(lists[c][0] for c in row) for row in complete.tolist())


class _TablePostings:
    """A table's posting lists ((token, rows, cols) each), read once for all its listed keys: the
    lists are refreshed in table order, and reading all of a large table's postings costs as much
    as searching its list."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._ref: int | None = None
        self._rows: list[tuple[str, np.ndarray, np.ndarray]] = []

    def of(self, ref: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
        if ref != self._ref:
            columns = select(MatePosting.token, MatePosting.rows, MatePosting.cols)
            self._ref, self._rows = (
                ref,
                [(t, r, c) for t, r, c in self.conn.execute(columns.where(MatePosting.table_ref == ref))],
            )
        return self._rows


def _search(
    source: MateSource,
    postings: _TablePostings,
    tables: Mapping[str, tuple[int, list[str], int]],
    table_id: str,
    key: tuple[str, ...],
    only: Collection[int] | None,
) -> list[NaryResult] | None:
    """The table's list on `key` (against the tables `only`, else the whole lake); None when a
    search of the whole lake would exceed MAX_LIST_PAIRS."""
    ref, headers, _ = tables[table_id]
    if any(name not in headers for name in key):
        return []
    positions = [headers.index(name) + 1 for name in key]
    tuples = key_tuples(postings.of(ref), positions)
    searched: MateSource = source if only is None else _Restricted(source, only)
    outcome = search_tuples(searched, key, tuples, LIST_K + 1, max_pairs=MAX_LIST_PAIRS if only is None else None)
    if outcome is None:
        return None
    return [r for r in outcome.results if r.table_id != table_id][:LIST_K]


def _write(conn: Connection, table_id: str, key: tuple[str, ...], results: Sequence[NaryResult] | None) -> None:
    """The list's rows: its rank-0 marker (joinability OVER_BUDGET when `results` is None), then
    its answers."""
    text = _key_text(key)
    marker = OVER_BUDGET if results is None else 0
    rows: list[dict[str, Any]] = [
        {
            "table_id": table_id,
            "key": text,
            "rank": 0,
            "candidate_table_id": None,
            "joinability": marker,
            "mapping": None,
        }
    ]
    rows += [
        {
            "table_id": table_id,
            "key": text,
            "rank": rank,
            "candidate_table_id": r.table_id,
            "joinability": r.joinability,
            "mapping": json.dumps(r.mapping),
        }
        for rank, r in enumerate(results or (), start=1)
    ]
    conn.execute(insert(MateList), rows)


def _merge(conn: Connection, table_id: str, key: tuple[str, ...], new: Sequence[NaryResult]) -> None:
    """The list with `new` answers merged in, ranked as a search ranks them, cut to LIST_K."""
    text = _key_text(key)
    where = and_(MateList.table_id == table_id, MateList.key == text, MateList.rank > 0)
    rows = conn.execute(select(MateList.candidate_table_id, MateList.joinability, MateList.mapping).where(where))
    old = [NaryResult(str(c), j, json.loads(str(m)), ()) for c, j, m in rows.tuples()]
    merged = sorted([*old, *new], key=lambda r: (-r.joinability, r.table_id))[:LIST_K]
    conn.execute(delete(MateList).where(and_(MateList.table_id == table_id, MateList.key == text)))
    _write(conn, table_id, key, merged)


class _Lru:
    """Values by key, the least recently used dropped once their cells exceed `budget`."""

    def __init__(self, budget: int, cells: Callable[[Any], int]) -> None:
        self.budget, self.cells = budget, cells
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._held = 0

    def get(self, key: Any) -> Any | None:
        if key not in self._items:
            return None
        self._items.move_to_end(key)
        return self._items[key]

    def put(self, key: Any, value: Any) -> None:
        self._items[key] = value
        self._held += self.cells(value)
        while self._held > self.budget and len(self._items) > 1:
            _, dropped = self._items.popitem(last=False)
            self._held -= self.cells(dropped)


class _Remembering:
    """The catalog's index for one refresh, each token's posting lists, row-key block and table
    read once (up to REMEMBERED_CELLS cells of each kind, the least recently used dropped first).

    A refresh searches hundreds of keys whose common values (years, months, small counts, codes)
    hold the same long posting lists: read again for every search, those reads were most of a
    full seed's publish. The index does not change during the refresh (the publisher wrote it
    before, in the same transaction), so what is read once holds for every search. A read of some
    tables' share of the lists (verification's) is passed through: reading whole lists for it was
    slower than reading the share again."""

    def __init__(self, source: CatalogSource, budget: int) -> None:
        self.source = source
        self.spec, self.version = source.spec, source.version
        self._lengths: dict[str, int] = {}  # 0: the token has no list
        self._lists = _Lru(budget, lambda ps: sum(len(p.rows) for p in ps))
        self._blocks = _Lru(budget, len)
        self._tables: dict[int, tuple[str, str]] = {}

    def list_lengths(self, tokens: Sequence[str]) -> dict[str, int]:
        missing = [t for t in dict.fromkeys(tokens) if t not in self._lengths]
        if missing:
            found = self.source.list_lengths(missing)
            self._lengths.update((t, found.get(t, 0)) for t in missing)
        return {t: self._lengths[t] for t in tokens if self._lengths[t]}

    def postings(self, tokens: Sequence[str], table_refs: Collection[int] | None = None) -> list[Postings]:
        if table_refs is not None:  # a few tables' share of the lists: read as asked
            return self.source.postings(tokens, table_refs)
        wanted = list(dict.fromkeys(tokens))
        held: dict[str, list[Postings]] = {t: ps for t in wanted if (ps := self._lists.get(t)) is not None}
        fetched: dict[str, list[Postings]] = {t: [] for t in wanted if t not in held}
        for p in self.source.postings(list(fetched)) if fetched else ():
            fetched[p.token].append(p)
        for t, ps in fetched.items():
            self._lists.put(t, ps)
        held.update(fetched)
        return [p for t in wanted for p in held[t]]

    def row_keys(self, rows: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]:
        blocks = {b: self._blocks.get(b) for b in blocks_of(rows)}
        fetched = self.source.row_key_blocks([b for b, block in blocks.items() if block is None])
        for b, block in fetched.items():
            self._blocks.put(b, block)
        blocks.update(fetched)
        return assemble_row_keys(rows, {b: v for b, v in blocks.items() if v is not None}, self.spec.words)

    def tables(self, refs: Iterable[int]) -> dict[int, tuple[str, str]]:
        wanted = set(refs)
        self._tables.update(self.source.tables(wanted - self._tables.keys()))
        return {r: self._tables[r] for r in wanted if r in self._tables}


class _Restricted:
    """A source whose posting lists come from some tables only (a search against the added tables)."""

    def __init__(self, source: MateSource, refs: Collection[int]) -> None:
        self.source, self.refs = source, set(refs)
        self.spec, self.version = source.spec, source.version

    def list_lengths(self, tokens: Sequence[str]) -> dict[str, int]:
        return self.source.list_lengths(tokens)

    def postings(self, tokens: Sequence[str], table_refs: Collection[int] | None = None) -> list[Postings]:
        refs = self.refs if table_refs is None else self.refs & set(table_refs)
        return self.source.postings(tokens, table_refs=refs) if refs else []

    def row_keys(self, rows: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]:
        return self.source.row_keys(rows)

    def tables(self, refs: Iterable[int]) -> dict[int, tuple[str, str]]:
        return self.source.tables(refs)


# ---------------------------------------------------------------------- lookup
@dataclass(frozen=True)
class NaryList:
    """One of a table's precomputed lists: its key, its best tables (`over_budget`: not computed)."""

    key: list[str]
    tables: list[NaryJoinableInfo]
    over_budget: bool


def nary_lists(conn: Connection, table_id: str, k: int = 10) -> list[NaryList]:
    """Every precomputed list of `table_id` (its first k tables each), in key order."""
    return [
        NaryList(list(key), _infos(rows, key, 0, k), rows[0].joinability == OVER_BUDGET)
        for key, rows in sorted(_table_lists(conn, table_id).items())
    ]


def nary_joinable(
    conn: Connection, table_id: str, key: Sequence[str], k: int = 10, *, offset: int = 0
) -> list[NaryJoinableInfo]:
    """Ranks offset+1 .. offset+k of `table_id`'s precomputed list on `key` (its columns in any
    order)."""
    lists = _table_lists(conn, table_id)
    match = [listed for listed in lists if set(listed) == set(key) and len(listed) == len(key)]
    if not match:
        have = "; ".join(",".join(listed) for listed in sorted(lists)) or "none"
        raise UserError(
            f"no precomputed n-ary list of {table_id!r} on ({', '.join(key)}): lists exist for its detected "
            f"composite keys of 2-{MAX_LIST_KEY} columns ({have}); `juncture search nary` answers any key"
        )
    listed = match[0]
    if lists[listed][0].joinability == OVER_BUDGET:
        raise UserError(
            f"the list of {table_id!r} on ({', '.join(listed)}) is not precomputed: its key values are too common "
            f"(more than {MAX_LIST_PAIRS:,} candidate rows); `juncture search nary` answers it"
        )
    return _infos(lists[listed], listed, offset, k)


def _table_lists(conn: Connection, table_id: str) -> dict[tuple[str, ...], list[Row[Any]]]:
    """The table's lists by key, each from its rank-0 marker on, read in one statement (one
    snapshot while a publish runs); UnknownIdError for a table the catalog does not hold."""
    statement = (
        select(CatalogTable.table_id, MateList.key, MateList.rank, MateList.candidate_table_id, MateList.joinability)
        .add_columns(MateList.mapping)
        .select_from(CatalogTable)
        .outerjoin(MateList, MateList.table_id == CatalogTable.table_id)
        .where(CatalogTable.table_id == table_id)
        .order_by(MateList.key, MateList.rank)
    )
    rows = conn.execute(statement).all()
    if not rows:
        raise UnknownIdError("table_id", table_id)
    lists: dict[tuple[str, ...], list[Row[Any]]] = defaultdict(list)
    for r in rows:
        if r.key is not None:
            lists[tuple(json.loads(r.key))].append(r)
    return lists


def _infos(rows: list[Row[Any]], key: tuple[str, ...], offset: int, k: int) -> list[NaryJoinableInfo]:
    return [
        NaryJoinableInfo(r.candidate_table_id, r.rank, r.joinability, json.loads(r.mapping), list(key))
        for r in rows
        if offset < r.rank <= offset + k
    ]
