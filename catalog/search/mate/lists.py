"""Precomputed n-ary join lists: for every table with a detected composite key, the tables it joins
best with on that key (`juncture lookup joinable TABLE --key a,b`, `GET /v1/joinable/TABLE?key=a,b`).

Which lists: each table's detected keys (the catalog's `keys`) of 2 to `MAX_LIST_KEY` columns, the
best `KEYS_PER_TABLE` of them by score; each list holds the top `LIST_K` other tables by n-ary
joinability, ranked and tie-broken exactly as `juncture search nary` ranks them, the query being
the table's own key tuples. The lists are computed in the lake with the index
(`spark_jobs.mate.lists`) and published with it, so a lookup sees the lists of the index it can
search; this module reads them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Row, select

from catalog.core.errors import UnknownIdError, UserError
from catalog.db.models import CatalogTable, TableKey
from catalog.search.mate.models import MateList

LIST_K = 10  # tables per list
MAX_LIST_KEY = 3  # key columns of a listed key, at most
KEYS_PER_TABLE = 2  # listed keys per table, the best by score
# A list whose key values are so common that its search could pair more (key tuple, lake row) than
# this is not precomputed (the lookup says so; `search nary` answers it): one such key (a year and
# a month over a lake of monthly series) would hold up every publish.
MAX_LIST_PAIRS = 2_000_000
# Nor is a list whose verified pairs would give more (tuple, table, row, column mapping) matches than
# this: a row holding a key value in many columns (a wide table of 0/1 columns) gives every choice
# of those columns, so a few pairs can give billions of matches.
MAX_LIST_MATCHES = 2_000_000
OVER_BUDGET = -1  # the joinability of a list's rank-0 row when it was not precomputed
# The pairs one index run spends on lists, the cheapest first; the others wait for the next run
# (their marker says so). A lake's first build would otherwise hold up its first answers: the
# 2,300-table portal seed's lists pair 2 x 10^8 in all, a tenth of them this much.
MAX_RUN_PAIRS = 20_000_000
# What a change batch spends on the lists its changes call for, and what each backlog run after the
# batches spends on the lists earlier runs left pending (a first build, a rebuild and the `lists`
# catch-up spend MAX_RUN_PAIRS): a small change stays quick, and the lists it leaves wait for the
# backlog (`spark_jobs.orchestration.backlog`) or the weekly rebuild.
MAX_BATCH_PAIRS = 2_000_000
PENDING = -2  # the joinability of a list's rank-0 row while it waits for a later run


@dataclass(frozen=True)
class NaryJoinableInfo:
    """A table that joins with the subject table on one of its composite keys."""

    table_id: str
    rank: int
    joinability: int  # distinct key tuples of the subject found in the table under `mapping`
    mapping: dict[str, str]  # subject key column -> the table's column
    key: list[str]


# ---------------------------------------------------------------------- which lists
def choose_listed(keys: Iterable[tuple[str, Sequence[str]]]) -> dict[str, list[tuple[str, ...]]]:
    """The keys that get a list, per table, from (table_id, columns) pairs in each table's order
    of preference (best score first)."""
    out: dict[str, list[tuple[str, ...]]] = defaultdict(list)
    for table_id, columns in keys:
        if 2 <= len(columns) <= MAX_LIST_KEY and len(out[table_id]) < KEYS_PER_TABLE:
            out[table_id].append(tuple(columns))
    return dict(out)


def listed_keys(conn: Connection) -> dict[str, list[tuple[str, ...]]]:
    """The keys that get a list, per table, as the catalog's `keys` hold them."""
    rows = conn.execute(
        select(TableKey.table_id, TableKey.columns).order_by(TableKey.table_id, TableKey.score.desc(), TableKey.id)
    ).tuples()
    return choose_listed(rows)


# ---------------------------------------------------------------------- lookup
@dataclass(frozen=True)
class NaryList:
    """One of a table's precomputed lists: its key, its best tables (`over_budget`: not computed;
    `pending`: not computed yet)."""

    key: list[str]
    tables: list[NaryJoinableInfo]
    over_budget: bool
    pending: bool = False


def nary_lists(conn: Connection, table_id: str, k: int = 10) -> list[NaryList]:
    """Every precomputed list of `table_id` (its first k tables each), in key order."""
    return [
        NaryList(list(key), _infos(rows, key, 0, k), rows[0].joinability == OVER_BUDGET, rows[0].joinability == PENDING)
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
            f"(more than {MAX_LIST_PAIRS:,} candidate rows, or more than {MAX_LIST_MATCHES:,} column matches to "
            "verify); `juncture search nary` answers it"
        )
    if lists[listed][0].joinability == PENDING:
        raise UserError(
            f"the list of {table_id!r} on ({', '.join(listed)}) is not computed yet: each index run computes "
            f"the cheapest lists first and the next run goes on; `juncture search nary` answers it now"
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
