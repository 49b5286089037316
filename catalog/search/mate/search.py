"""N-ary join search (MATE, Esmailoghli et al., VLDB 2022): the lake tables that share the most
distinct key tuples with a query table on a composite key, each with its best column mapping.

Joinability is the paper's Eq. 1-2: J(t) = the number of distinct query key tuples (normalized,
rows with a null key value dropped) found in some row of t under one injective mapping of the key
columns to t's columns, maximised over mappings. Answers are ordered by J descending, then table_id;
of mappings with the same J the one with the smallest column positions (in key order) is reported;
a table with J = 0 is never listed. Every method gives exactly these answers:

* `mate`: Algorithm 1. The initial column is the key column whose values give the fewest (query
  tuple, lake row) pairs: list lengths from one count per key column, each times the query tuples
  holding the value (the paper's fewest-distinct-values rule misjudges columns of common values).
  Its lists are fetched and grouped by table; tables are taken by their number of items L_t,
  largest first. A row passes only if its super key has every bit of the query
  tuple's (no false negatives: a row holding the tuple's values has their XASH bits), and the
  survivors are verified against the table's posting lists of the other key values;
* `scr`: the same without the super-key filter (every fetched row is verified), the paper's SCR;
* `mcr`: the lists of every key column fetched up front and intersected row by row (MCR);
* `brute`: every table holding an initial value verified, no pruning, no filter.

Work is bounded before it is done: a row may hold a key value in many columns and every choice of
them is a mapping to count, so each table's choices are counted first (in floats: 7 key values in
1,000 columns each is 10^21 choices for one row). A table past MAX_TABLE_MATCHES is left out of the
ranking and named in `NaryOutcome.skipped`; the others are ranked exactly. A table's count does not
depend on the method (a pair the super-key filter drops misses a value: it has no choice to count),
so a table one method skips is skipped by every method that verifies it, and the methods' answers
stay equal; brute force, which verifies every table, may name more. A search whose counted tables
together pass MAX_SEARCH_MATCHES is refused (`TooManyMatchesError`).

Pruning is exact under the tie rule: with k answers, J_k the k-th's joinability, a table can enter
only with J > J_k, or J = J_k and a smaller table_id. L_t bounds J (each matched tuple needs its own
row, hence its own item), so the scan stops at the first L_t < J_k (Rule 1, strict where the paper's
is not: a table at L_t = J_k can still win a tie); a table whose passed tuples cannot beat the k-th
is not verified (Rule 2, applied after the filter).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from catalog.core.errors import UserError
from catalog.core.identity import normalize_token
from catalog.core.xash import XashSpec, xash
from catalog.search.mate import METHODS
from catalog.search.mate.mappings import Choices, best_mapping
from catalog.search.mate.source import MateSource, Postings

MAX_KEY_COLUMNS = 8
VERIFY_BATCH = 32  # tables whose candidate rows are verified with one read of their lists
# Column choices are enumerated at about 10 million a second. One table's, at most (half a minute;
# ChickWeight's `Time, Chick` against a 1,504-column table of 0/1 is 2.5 * 10^8): a table past it is
# skipped and named, so that one wide table of 0/1 columns does not cost the answers of all the
# others. One search's, at most (about two minutes), over the tables it enumerates.
MAX_TABLE_MATCHES = 300_000_000
MAX_SEARCH_MATCHES = 1_000_000_000


class TooManyMatchesError(UserError):
    """The key values repeat across so many columns of many tables' rows that checking every choice
    of columns (each one a mapping the search must count exactly) is beyond MAX_SEARCH_MATCHES, even
    with each table under MAX_TABLE_MATCHES."""

    def __init__(self, table_id: str, matches: float) -> None:
        super().__init__(
            f"the query's key values fill many columns of the same rows in many tables: with table "
            f"{table_id!r} the search has {matches:.3g} column choices to check, more than "
            f"{MAX_SEARCH_MATCHES:,}; search on fewer or more distinctive key columns"
        )
        self.table_id, self.matches = table_id, matches


@dataclass(frozen=True)
class SkippedTable:
    """A table left out of the ranking: checking it would enumerate `matches` column choices, more
    than MAX_TABLE_MATCHES. Its joinability is unknown; every other table's is exact."""

    table_id: str
    matches: float

    def as_dict(self) -> dict[str, object]:
        return {"table_id": self.table_id, "column_choices": self.matches}

    def describe(self) -> str:
        return (
            f"skipped table {self.table_id!r}: it holds the key values in many columns of the same rows "
            f"({self.matches:.3g} column choices to check, more than {MAX_TABLE_MATCHES:,}); the answers "
            "rank the other tables"
        )


@dataclass(frozen=True)
class NaryRequest:
    headers: Sequence[str]  # the query table's column names
    rows: Sequence[Sequence[str | None]]  # its data rows, raw cell values
    key: Sequence[str]  # the key columns, by name (at least 2)
    k: int = 10
    method: str = "mate"
    spec: XashSpec | None = None  # the XASH spec to hash the query with (None: the index's)
    # a long-running process (the API, the web page) asks: keep the row keys read between searches
    hold_index: bool = False


@dataclass(frozen=True)
class NaryResult:
    table_id: str
    joinability: int
    mapping: dict[str, str]  # query key column -> the table's column
    positions: tuple[int, ...]  # the table's 1-based column positions, in key order

    def as_dict(self) -> dict[str, object]:
        return {"table_id": self.table_id, "joinability": self.joinability, "mapping": self.mapping}


@dataclass
class NaryStats:
    """What a search did: for the benchmark and `--json`'s curious reader."""

    initial_column: str = ""
    tuples: int = 0
    tables: int = 0  # tables holding an initial value
    tables_read: int = 0  # ... not pruned by Rule 1
    items: int = 0  # posting items of the initial column in the tables read
    pairs: int = 0  # (query tuple, lake row) pairs those items give
    passed: int = 0  # ... that passed the super-key filter (all of them without one)
    verified: int = 0  # ... verified (Rule 2 spares the others)
    matched: int = 0  # ... that hold the whole tuple
    pair_bound: int = 0  # (query tuple, lake row) pairs the initial column's lists can give at most
    matches: float = 0.0  # column choices of the verified pairs (mappings x pairs), enumerated


@dataclass
class NaryOutcome:
    results: list[NaryResult]
    stats: NaryStats = field(default_factory=NaryStats)
    skipped: list[SkippedTable] = field(default_factory=list)  # by table_id; not ranked (MAX_TABLE_MATCHES)


def query_tuples(
    headers: Sequence[str], rows: Sequence[Sequence[str | None]], key: Sequence[str]
) -> list[tuple[str, ...]]:
    """The query's distinct normalized key tuples, sorted; rows with a null key value are dropped."""
    if len(key) < 2:
        raise UserError(f"an n-ary key needs at least 2 columns, got {list(key)}")
    if len(key) > MAX_KEY_COLUMNS:
        raise UserError(f"an n-ary key has at most {MAX_KEY_COLUMNS} columns, got {len(key)}")
    if len(set(key)) != len(key):
        raise UserError(f"a key column is named twice: {list(key)}")
    positions = []
    for name in key:
        if name not in headers:
            raise UserError(f"no column {name!r} in the query table (columns: {', '.join(headers)})")
        positions.append(list(headers).index(name))
    out = set()
    for row in rows:
        values = tuple(normalize_token(row[p]) if p < len(row) else None for p in positions)
        if None not in values:
            out.add(values)
    return sorted(out)  # type: ignore[arg-type]


def search_nary(source: MateSource, request: NaryRequest) -> NaryOutcome:
    """Top-k lake tables by n-ary joinability with the query table on `request.key`."""
    if request.method not in METHODS:
        raise UserError(f"unknown method {request.method!r} (choose from {', '.join(METHODS)})")
    if request.k < 1:
        raise UserError(f"--k must be at least 1, got {request.k}")
    if request.spec is not None:
        source.spec.check(request.spec, what="query")
    tuples = query_tuples(request.headers, request.rows, request.key)
    return _Search(source, list(request.key), tuples, request.k, request.method).run()


class _Search:
    """One search's state: the query tuples, the top k so far (pruning reads it as it grows) and the
    work counters; `run` walks the initial column's tables in Algorithm 1's order."""

    def __init__(self, source: MateSource, key: list[str], tuples: list[tuple[str, ...]], k: int, method: str) -> None:
        self.source, self.key, self.tuples, self.k, self.method = source, key, tuples, k, method
        self.stats = NaryStats(tuples=len(tuples))
        self.top: list[NaryResult] = []
        self.skipped: list[SkippedTable] = []
        self.stopped = False
        self._costs: list[int] | None = None

    def run(self) -> NaryOutcome:
        if not self.tuples:
            return NaryOutcome([], self.stats)
        m = len(self.key)
        distinct = [sorted({t[i] for t in self.tuples}) for i in range(m)]
        init = self._initial_column()
        self.stats.initial_column = self.key[init]
        by_table: dict[int, list[Postings]] = defaultdict(list)
        for p in self.source.postings(distinct[init]):
            by_table[p.table_ref].append(p)
        info = self.source.tables(by_table)
        length = {ref: sum(len(p.rows) for p in ps) for ref, ps in by_table.items()}
        order = sorted(by_table, key=lambda ref: (-length[ref], info[ref][0]))
        self.stats.tables = len(order)
        tuple_ids = _tuples_by_value(self.tuples, init)
        query_keys = self._query_keys(distinct) if self.method == "mate" else None
        others = self._all_other_lists(distinct, init) if self.method == "mcr" else None
        pending = iter(order)
        while not self.stopped:
            candidates = self._candidates(pending, info, length)
            if not candidates:
                break
            pairs = {ref: _pairs(by_table[ref], tuple_ids) for ref in candidates}  # only tables Rule 1 keeps
            chunk = self._worth_verifying(candidates, info, pairs, query_keys)
            lists = others if others is not None else self._other_lists(chunk, pairs, init) if chunk else {}
            for ref in chunk:
                joined, positions = self._joinability(pairs[ref], lists.get(ref, {}), init, info[ref][0])
                if joined:
                    table_id, headers = info[ref][0], json.loads(info[ref][1])
                    mapping = {name: headers[pos - 1] for name, pos in zip(self.key, positions, strict=True)}
                    self._offer(NaryResult(table_id, joined, mapping, positions))
        return NaryOutcome(self.top, self.stats, sorted(self.skipped, key=lambda s: s.table_id))

    def _candidates(
        self, pending: Iterator[int], info: dict[int, tuple[str, str]], length: dict[int, int]
    ) -> list[int]:
        """The next tables Rule 1 keeps, in order, at most VERIFY_BATCH (their row keys and other
        lists are read in one query each). The rules are checked against the answers so far: a
        chunk's own answers are not in yet, so it may read a table it could have skipped, never skip
        one it must read."""
        out: list[int] = []
        for ref in pending:
            if self.method != "brute" and self._cannot_enter(length[ref], info[ref][0]):
                if length[ref] < self._kth()[0]:
                    self.stopped = True  # Rule 1: no later table has more items
                    break
                continue
            out.append(ref)
            self.stats.tables_read += 1
            self.stats.items += length[ref]
            if len(out) >= VERIFY_BATCH:
                break
        return out

    def _worth_verifying(
        self,
        candidates: list[int],
        info: dict[int, tuple[str, str]],
        pairs: dict[int, _Pairs],
        query_keys: np.ndarray | None,
    ) -> list[int]:
        """The candidates whose pairs (filtered by the super keys, with `query_keys`) can still make
        the top k (Rule 2)."""
        n_pairs = {ref: len(pairs[ref][0]) for ref in candidates}
        if query_keys is not None:
            pairs.update(self._filtered({ref: pairs[ref] for ref in candidates}, query_keys))
        chunk = []
        for ref in candidates:
            self.stats.pairs += n_pairs[ref]
            self.stats.passed += len(pairs[ref][0])
            if self.method != "brute" and self._cannot_enter(len(np.unique(pairs[ref][0])), info[ref][0]):
                continue  # Rule 2
            self.stats.verified += len(pairs[ref][0])
            chunk.append(ref)
        return chunk

    # ------------------------------------------------------------------ steps
    def _initial_column(self) -> int:
        """The key column whose values give the fewest (query tuple, lake row) pairs: the sum over its
        values of their posting-list length times the number of query tuples holding them (for a
        column of distinct values, the summed list length; a column of a few common values, a
        country or a small integer, pairs each of its many items with many tuples)."""
        costs = self._pair_costs()
        self.stats.pair_bound = min(costs)
        return int(np.argmin(costs))

    def _pair_costs(self) -> list[int]:
        if self._costs is None:
            self._costs = []
            for i in range(len(self.key)):
                tuples_with = Counter(t[i] for t in self.tuples)
                lengths = self.source.list_lengths(sorted(tuples_with))
                self._costs.append(sum(n * tuples_with[v] for v, n in lengths.items()))
        return self._costs

    def _query_keys(self, distinct: list[list[str]]) -> np.ndarray:
        """(tuples, words) uint64: each query tuple's super key, the OR of its values' XASH."""
        spec = self.source.spec
        out = np.zeros((len(self.tuples), spec.words), np.uint64)
        for i, values in enumerate(distinct):
            at = {v: j for j, v in enumerate(values)}
            hashes = xash(values, spec)
            out |= hashes[[at[t[i]] for t in self.tuples]]
        return out

    def _filtered(self, pairs: dict[int, _Pairs], query_keys: np.ndarray) -> dict[int, _Pairs]:
        """The pairs whose row's super key covers the query tuple's (the paper's subset test); the
        row keys of all these tables are read at once."""
        keys = self.source.row_keys({ref: p[1] for ref, p in pairs.items()})
        out = {}
        for ref, (tuple_of, rows, cols) in pairs.items():
            q = query_keys[tuple_of]
            keep = np.all((keys[ref] & q) == q, axis=1)
            out[ref] = (tuple_of[keep], rows[keep], cols[keep])
        return out

    def _other_lists(self, chunk: list[int], pairs: dict[int, _Pairs], init: int) -> dict[int, dict[str, Postings]]:
        """These tables' posting lists of the other key values of their pairs' tuples, in one read."""
        ids = np.unique(np.concatenate([pairs[ref][0] for ref in chunk])).tolist()
        needed = sorted({self.tuples[j][i] for j in ids for i in range(len(self.key)) if i != init})
        return _by_table(self.source.postings(needed, table_refs=chunk))

    def _all_other_lists(self, distinct: list[list[str]], init: int) -> dict[int, dict[str, Postings]]:
        """MCR's retrieval: every other key column's lists over the whole lake, by table."""
        values = sorted({v for i, vs in enumerate(distinct) if i != init for v in vs})
        return _by_table(self.source.postings(values))

    def _joinability(
        self, pairs: _Pairs, lists: dict[str, Postings], init: int, table_id: str
    ) -> tuple[int, tuple[int, ...]]:
        """Verify each (tuple, row) pair: the columns of the row holding each other key value, every
        injective choice of them a mapping; J = the most distinct tuples one mapping matches
        (`mappings.best_mapping`, in numpy blocks). J = 0 for a table skipped by `_count_matches`."""
        tuple_of, rows, cols = pairs
        m = len(self.key)
        items = _Items(lists, rows)
        ids, inverse = np.unique(tuple_of, return_inverse=True)  # the tuples these pairs hold, once each
        start = np.zeros((len(rows), m), np.int64)
        count = np.ones((len(rows), m), np.int64)
        start[:, init] = len(items.columns) + np.arange(len(rows))  # the pair's own column, after the items'
        for i in range(m):
            if i != init:
                start[:, i], count[:, i] = items.find([self.tuples[j][i] for j in ids.tolist()], inverse, rows)
        if not self._count_matches(count, table_id):
            return 0, ()
        choices = Choices(tuple_of, start, count, np.concatenate([items.columns, cols]))
        best = best_mapping(choices, init)
        self.stats.matched += best.matched
        return best.joinability, best.positions

    def _count_matches(self, count: np.ndarray, table_id: str) -> bool:
        """Whether a table's column choices (per pair, the product of its counts) are to be
        enumerated: not past MAX_TABLE_MATCHES (the table is skipped and named), and the search
        refused once those it enumerates pass MAX_SEARCH_MATCHES. Counted in floats: a pair's
        product can pass int64 (7 key values in 1,000 columns each) where numpy's integers would
        wrap silently."""
        matches = float(np.prod(count, axis=1, dtype=np.float64).sum())
        if matches > MAX_TABLE_MATCHES:
            self.skipped.append(SkippedTable(table_id, matches))
            return False
        self.stats.matches += matches
        if self.stats.matches > MAX_SEARCH_MATCHES:
            raise TooManyMatchesError(table_id, self.stats.matches)
        return True

    # ------------------------------------------------------------------ top k
    def _kth(self) -> tuple[int, str]:
        last = self.top[-1]
        return last.joinability, last.table_id

    def _cannot_enter(self, bound: int, table_id: str) -> bool:
        """Whether a table whose joinability is at most `bound` cannot make the top k."""
        if len(self.top) < self.k:
            return bound == 0
        j_k, id_k = self._kth()
        return bound < j_k or (bound == j_k and table_id > id_k)

    def _offer(self, result: NaryResult) -> None:
        self.top.append(result)
        self.top.sort(key=lambda r: (-r.joinability, r.table_id))
        del self.top[self.k :]


_Pairs = tuple[np.ndarray, np.ndarray, np.ndarray]  # (query tuple, lake row, column of the initial value)


class _Items:
    """One table's posting items of some tokens in the candidate rows, sorted by (token, row), for
    lookups by (value, row). Items of other rows are dropped first: a common value's list spans
    the whole table, and the filtered pairs of a search with super keys name only a few rows."""

    def __init__(self, lists: dict[str, Postings], rows: np.ndarray) -> None:
        self.code = {token: i for i, token in enumerate(lists)}
        self.stride = int(rows.max()) + 1 if len(rows) else 1
        if lists:
            sizes = [len(p.rows) for p in lists.values()]
            tok = np.repeat(np.arange(len(lists), dtype=np.int64), sizes)
            at = np.concatenate([p.rows for p in lists.values()]).astype(np.int64)
            columns = np.concatenate([p.cols for p in lists.values()]).astype(np.int64)
            candidate = np.zeros(self.stride + 1, bool)  # the last slot: every row past the candidates
            candidate[rows] = True
            keep = candidate[np.minimum(at, self.stride)]
            keys, columns = tok[keep] * self.stride + at[keep], columns[keep]
        else:
            keys, columns = np.empty(0, np.int64), np.empty(0, np.int64)
        order = np.argsort(keys, kind="stable")
        self.keys, self.columns = keys[order], columns[order]

    def find(self, values: list[str], value_of: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each pair p: where the columns of row rows[p] holding the value values[value_of[p]]
        start in `columns`, and how many there are."""
        codes = np.asarray([self.code.get(v, -1) for v in values], np.int64)[value_of]
        wanted = codes * self.stride + rows
        lo = np.searchsorted(self.keys, wanted, "left")
        n = np.searchsorted(self.keys, wanted, "right") - lo
        n[codes < 0] = 0
        return lo, n


def _by_table(postings: list[Postings]) -> dict[int, dict[str, Postings]]:
    out: dict[int, dict[str, Postings]] = defaultdict(dict)
    for p in postings:
        out[p.table_ref][p.token] = p
    return out


def _tuples_by_value(tuples: list[tuple[str, ...]], init: int) -> dict[str, np.ndarray]:
    out: dict[str, list[int]] = defaultdict(list)
    for j, t in enumerate(tuples):
        out[t[init]].append(j)
    return {v: np.asarray(ids, np.int64) for v, ids in out.items()}


def _pairs(lists: list[Postings], tuple_ids: dict[str, np.ndarray]) -> _Pairs:
    """Every (query tuple, lake row, column) an item of the initial column's lists gives: the item's
    row paired with each query tuple holding its value."""
    tuple_parts, row_parts, col_parts = [], [], []
    for p in lists:
        ids = tuple_ids[p.token]
        tuple_parts.append(np.tile(ids, len(p.rows)))
        row_parts.append(np.repeat(p.rows.astype(np.int64), len(ids)))
        col_parts.append(np.repeat(p.cols.astype(np.int64), len(ids)))
    if not tuple_parts:
        empty = np.empty(0, np.int64)
        return empty, empty, empty
    return np.concatenate(tuple_parts), np.concatenate(row_parts), np.concatenate(col_parts)
