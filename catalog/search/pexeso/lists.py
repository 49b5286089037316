"""Precomputed semantic join lists: for each column PEXESO embeds, the columns whose values its own
values match in embedding space at the default thresholds (τ = 0.06, T = 0.6). Served by
`juncture lookup joinable COLUMN --semantic`, `GET /v1/joinable/COLUMN?semantic=true` and the table
page, without the columns already in the column's exact joinable list: what only the embedding finds.

**What a list is.** The column's distinct values (the tokens the index holds, each once) searched as
`juncture search semantic --values` searches them, with `search`'s decision rule for every pair
(`close_pairs`, brute force's rule, so both methods agree with it): the best `LIST_K` columns by
n_matched, then table and column id, the column itself left out. The exact-list filter is applied
when a list is read, so it follows the exact lists as batches change them; `LIST_K` is twice a
page, so a page survives the filter unless the exact list names most of the semantic one.

**How.** One range join of the batch's columns' vectors against every vector of the lake
(`range_join`: exact, with the pairs brute force would find, but it computes the distances of only the
pairs that share a prefix key and survive a projection bound): a pair (a, x) within 2τ counts a's value
for a's list and x's value for x's list, so the one join gives both directions.

**Refresh**, in the PEXESO publisher's transaction after the index, exact and local as MATE's lists:
* lists of the touched tables' columns go; a list naming a touched table is computed again in full
  (its LIST_K+1-th column is unknown), as is every list of an added table's column;
* every other list can only gain added columns: its matches with them come out of the same join
  (the added columns are on one side of it), and are merged.

**Memory budget.** The lake is read in blocks of whole columns of at most half
`[index.pexeso] memory_budget_mb` each (`vector_blocks`), cut along the partitions; the join takes
one block's computed vectors against one block at a time, and skips a pair of blocks whose boxes
are more than 2τ apart on some pivot. A lake within half the budget is one block, read once.

**Work bound.** Before any distance, every block is keyed and the join priced in brute-force
distances (`RangeJoin.cost`: about ten a keyed pair). When a refresh would exceed `MAX_LIST_WORK`, no
list is kept (a list left behind would be wrong after the batch) and the state says why; the lookup
says so and points to `search semantic`, which answers any column at any threshold. The next refresh
within the bound (a smaller batch cannot repair them: a full one is needed; the weekly rebuild does
one) brings them back. Hashed n-grams are sparse, so the keys leave about a hundredth of brute
force's work; a model's dense vectors leave all of it, and a large lake embedded by a model may be
over the bound.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection, delete, insert, select

from catalog.core.errors import UnknownIdError, UserError
from catalog.db.models import CatalogColumn, JoinableColumn
from catalog.db.models.base import text_key
from catalog.search.family import published_facts
from catalog.search.pexeso.family import DEFAULT_T, DEFAULT_TAU
from catalog.search.pexeso.models import PexesoList, PexesoMeta
from catalog.search.pexeso.range_join import PrefixKeys, RangeJoin
from catalog.search.pexeso.search import need_count
from catalog.search.pexeso.vector_blocks import LakeBlocks

log = logging.getLogger(__name__)

LIST_TAU, LIST_T = DEFAULT_TAU, DEFAULT_T  # the thresholds of every list: `search semantic`'s defaults
LIST_K = 20  # columns stored per list (a page is 10; the exact-list filter runs when read)
# Work a refresh may do, in brute-force distances (`RangeJoin.cost`): about a minute of numpy on two
# cores. Brute force would reach it at 80,000 embedded values; the range join's keys take the lists
# of the 500,000 values of the 2,300-table seed well within it.
MAX_LIST_WORK = 6_000_000_000
LISTS_FACT = "lists"  # pexeso_meta key: {"tau", "T", "k", "state": "current" | "over_bound", ...}
_CHUNK = 500


@dataclass(frozen=True)
class SemanticJoinableInfo:
    """A column whose values the subject column's values match in embedding space."""

    table_id: str
    column: str
    column_id: str
    rank: int
    n_matched: int  # the subject's distinct values within 2τ of one of the column's values
    joinability: float  # n_matched / the subject's distinct values
    tau: float
    threshold: float


# ---------------------------------------------------------------------- refresh (publish)
def refresh_semantic_lists(
    conn: Connection,
    load: Callable[[], LakeBlocks],
    added: Collection[str] | None,
    touched: Collection[str] = (),
) -> dict[str, int]:
    """Bring `pexeso_lists` to the index just published (`load` gives it): every list (`added` None,
    or when the lists are not current), or a batch's share. The work bound is checked once the lake
    is keyed, before any distance."""
    if added is None or not lists_current(conn):
        conn.execute(delete(PexesoList))
        kept: set[str] = set()
    else:
        kept = _drop_stale(conn, sorted(touched))
    index = load()
    position = {c.column_id: i for i, c in enumerate(index.columns)}
    listed = {position[c] for c in kept if c in position}
    compute = np.array(sorted(set(range(len(index.columns))) - listed), np.int64)
    new = {i for i, c in enumerate(index.columns) if c.table_id in set(added or ())} - listed
    plan = _plan(index, compute)
    if plan.work > MAX_LIST_WORK:
        conn.execute(delete(PexesoList))
        _write_state(conn, "over_bound", work=plan.work)
        log.warning("semantic lists over the work bound", extra={"work": plan.work, "bound": MAX_LIST_WORK})
        return {"pexeso_lists_computed": 0, "pexeso_lists_merged": 0, "pexeso_lists_over_bound": 1}
    forward, reverse = _match_counts(index, plan, listed, new)
    column_sizes = index.sizes
    _write_lists(conn, index, column_sizes, compute.tolist(), forward)
    merged = _merge_lists(conn, index, column_sizes, reverse) if len(reverse) else 0
    _write_state(conn, "current", work=plan.work)
    return {"pexeso_lists_computed": len(compute), "pexeso_lists_merged": merged, "pexeso_lists_over_bound": 0}


def lists_current(conn: Connection) -> bool:
    """Whether the published lists are those of the published index with this build's parameters."""
    state = _state(conn)
    return state.get("state") == "current" and _params(state) == _params()


def _params(state: dict[str, Any] | None = None) -> tuple[Any, ...]:
    """The list parameters recorded in `state`, or this build's (lists made otherwise are redone)."""
    if state is None:
        return (LIST_TAU, LIST_T, LIST_K)
    return (state.get("tau"), state.get("T"), state.get("k"))


def _state(conn: Connection) -> dict[str, Any]:
    text = conn.execute(select(PexesoMeta.value).where(PexesoMeta.key == LISTS_FACT)).scalar()
    out: dict[str, Any] = json.loads(text) if text else {}
    return out


def _write_state(conn: Connection, state: str, *, work: int) -> None:
    fact = {"tau": LIST_TAU, "T": LIST_T, "k": LIST_K, "state": state, "work": work, "bound": MAX_LIST_WORK}
    conn.execute(delete(PexesoMeta).where(PexesoMeta.key == LISTS_FACT))
    conn.execute(insert(PexesoMeta), [{"key": LISTS_FACT, "value": json.dumps(fact)}])


def _drop_stale(conn: Connection, touched: Sequence[str]) -> set[str]:
    """Delete the lists a batch invalidates (of a touched table's column, or naming a touched
    table); returns the columns whose lists remain."""
    naming: set[str] = set()
    for i in range(0, len(touched), _CHUNK):
        part = touched[i : i + _CHUNK]
        conn.execute(delete(PexesoList).where(PexesoList.table_id.in_(part)))
        where = PexesoList.candidate_table_id.in_(part)
        naming.update(conn.execute(select(PexesoList.column_id).distinct().where(where)).scalars())
    keys = sorted(text_key(c) for c in naming)
    for i in range(0, len(keys), _CHUNK):
        conn.execute(delete(PexesoList).where(PexesoList.column_key.in_(keys[i : i + _CHUNK])))
    return set(conn.execute(select(PexesoList.column_id).where(PexesoList.rank == 0)).scalars())


@dataclass(frozen=True)
class _Plan:
    """The refresh's range join, keyed before any distance is computed: its work decides whether
    the lists are computed at all."""

    join: RangeJoin
    read: Callable[[int], np.ndarray]  # a block's vectors (the last two read are kept)
    rows: list[np.ndarray]  # per block: the rows of the columns whose lists are computed
    a_keys: list[PrefixKeys]  # per block: those rows' keys
    x_keys: list[PrefixKeys]  # per block: every row's keys
    pairs: list[tuple[int, int]]  # the blocks joined: (a side, x side), boxes within reach
    work: int  # brute-force distances the join costs, about


def _plan(index: LakeBlocks, compute: np.ndarray) -> _Plan:
    """Key every block (each read once; the order and directions from the first block read) and
    price the join of the `compute` columns' vectors with the lake."""
    n = max(1, len(index.columns))
    is_compute = np.zeros(n, bool)
    is_compute[compute] = True
    radius = 2.0 * LIST_TAU
    read = functools.lru_cache(maxsize=2)(index.read)
    owners = [index.owners(b) for b in range(len(index.block_columns))]
    rows = [np.flatnonzero(is_compute[owner]) for owner in owners]
    sample = next((read(b) for b, owner in enumerate(owners) if len(owner)), np.zeros((0, 1), np.float32))
    join = RangeJoin.fit(sample, radius)
    a_keys, x_keys = [], []
    for b in range(len(owners)):
        vectors = read(b) if len(owners[b]) else sample[:0]
        x_keys.append(join.keys(vectors))
        a_keys.append(x_keys[-1].subset(rows[b]))
    pairs = [
        (i, j) for i in range(len(owners)) for j in range(len(owners)) if len(rows[i]) and not index.apart(i, j, radius)
    ]
    work = sum(join.cost(a_keys[i], x_keys[j]) for i, j in pairs)
    return _Plan(join, read, rows, a_keys, x_keys, pairs, work)


def _match_counts(
    index: LakeBlocks, plan: _Plan, listed: Collection[int], new: Collection[int]
) -> tuple[np.ndarray, np.ndarray]:
    """(column, other column, values of column matched in other column) rows, from every pair
    (a, x) of a vector a of a computed column and any lake vector x within 2τ: `forward` counts
    a's values (every list computed), `reverse` x's values where x is of a `listed` column and a
    of a `new` one (what a kept list can gain). The lake is joined a pair of blocks at a time, by
    the plan's range join."""
    n = max(1, len(index.columns))
    is_listed, is_new = np.zeros(n, bool), np.zeros(n, bool)
    is_listed[list(listed)] = True
    is_new[list(new)] = True
    offsets = index.offsets()
    owners = [index.owners(b) for b in range(len(index.block_columns))]
    forward: list[np.ndarray] = []
    reverse: list[np.ndarray] = []
    for i, j in plan.pairs:
        rows = plan.rows[i]
        a_vectors = plan.read(i)[rows]
        for ia, ix in plan.join.pairs(a_vectors, plan.a_keys[i], plan.read(j), plan.x_keys[j]):
            a = rows[ia]
            forward.append(np.unique((offsets[i] + a) * n + owners[j][ix]))
            keep = is_listed[owners[j][ix]] & is_new[owners[i][a]]
            reverse.append(np.unique((offsets[j] + ix[keep]) * n + owners[i][a[keep]]))
    column_of = np.concatenate(owners) if owners else np.zeros(0, np.int64)
    return _per_column_pair(forward, column_of, n), _per_column_pair(reverse, column_of, n)


def _per_column_pair(codes: list[np.ndarray], column_of: np.ndarray, n: int) -> np.ndarray:
    """(value row * n + other column) codes -> (column, other column, values matched) rows, sorted."""
    if not codes:
        return np.zeros((0, 3), np.int64)
    unique = np.unique(np.concatenate(codes))
    pairs, counts = np.unique(column_of[unique // n] * n + unique % n, return_counts=True)
    return np.stack([pairs // n, pairs % n, counts], axis=1)


def _groups(matches: np.ndarray) -> dict[int, np.ndarray]:
    """Rows of `matches` (sorted by column) per column."""
    if not len(matches):
        return {}
    columns, starts = np.unique(matches[:, 0], return_index=True)
    return dict(zip(columns.tolist(), np.split(matches, starts[1:]), strict=True))


def _ranked(index: LakeBlocks, sizes: np.ndarray, subject: int, matches: np.ndarray) -> list[tuple[int, int]]:
    """The subject's joinable columns among `matches` rows ((candidate, n_matched) at LIST_T, the
    subject itself left out), best LIST_K first, ranked as `search` ranks."""
    need = need_count(LIST_T, int(sizes[subject]))
    found = [(int(c), int(m)) for _, c, m in matches.tolist() if c != subject and m >= need]
    found.sort(key=lambda p: (-p[1], index.columns[p[0]].table_id, index.columns[p[0]].column_id))
    return found[:LIST_K]


def _write_lists(
    conn: Connection, index: LakeBlocks, sizes: np.ndarray, subjects: Sequence[int], forward: np.ndarray
) -> None:
    """Each subject's list (its rank-0 marker, then its ranked columns) from its `forward` rows."""
    groups = _groups(forward)
    empty = np.zeros((0, 3), np.int64)
    rows: list[dict[str, Any]] = []
    for subject in subjects:
        rows += _list_rows(index, sizes, subject, _ranked(index, sizes, subject, groups.get(subject, empty)))
        if len(rows) >= 5_000:
            conn.execute(insert(PexesoList), rows)
            rows = []
    if rows:
        conn.execute(insert(PexesoList), rows)


def _merge_lists(conn: Connection, index: LakeBlocks, sizes: np.ndarray, reverse: np.ndarray) -> int:
    """Merge each kept list with its matches among the added columns (`reverse`); returns how many
    lists changed."""
    position = {c.column_id: i for i, c in enumerate(index.columns)}
    merged = 0
    for subject, matches in _groups(reverse).items():
        gained = _ranked(index, sizes, subject, matches)
        if not gained:
            continue
        column_id = index.columns[subject].column_id
        where = (PexesoList.column_key == text_key(column_id)) & (PexesoList.rank > 0)
        old = conn.execute(select(PexesoList.candidate_column_id, PexesoList.n_matched).where(where)).tuples()
        stored = np.array([(subject, position[c], m) for c, m in old if c in position], np.int64).reshape(-1, 3)
        fresh = np.array([(subject, c, m) for c, m in gained], np.int64)
        ranked = _ranked(index, sizes, subject, np.concatenate([stored, fresh]))
        _delete_column_list(conn, column_id)
        conn.execute(insert(PexesoList), _list_rows(index, sizes, subject, ranked))
        merged += 1
    return merged


def _delete_column_list(conn: Connection, column_id: str) -> None:
    conn.execute(delete(PexesoList).where(PexesoList.column_key == text_key(column_id)))


def _list_rows(
    index: LakeBlocks, sizes: np.ndarray, subject: int, ranked: list[tuple[int, int]]
) -> list[dict[str, Any]]:
    """A list's rows: the rank-0 marker, then its columns."""
    ref = index.columns[subject]
    base = {"column_key": text_key(ref.column_id), "column_id": ref.column_id, "table_id": ref.table_id}
    rows: list[dict[str, Any]] = [
        {**base, "rank": 0, "candidate_column_id": None, "candidate_table_id": None, "candidate_header": None}
        | {"n_matched": 0, "joinability": 0.0}
    ]
    for rank, (candidate, matched) in enumerate(ranked, start=1):
        other = index.columns[candidate]
        rows.append(
            {
                **base,
                "rank": rank,
                "candidate_column_id": other.column_id,
                "candidate_table_id": other.table_id,
                "candidate_header": other.column,
                "n_matched": matched,
                "joinability": matched / int(sizes[subject]),
            }
        )
    return rows


# ---------------------------------------------------------------------- lookup
def semantic_joinable(conn: Connection, column_id: str, k: int = 10, *, offset: int = 0) -> list[SemanticJoinableInfo]:
    """Ranks offset+1 .. offset+k of `column_id`'s precomputed semantic list, without the columns of
    its exact joinable list (ranked again 1, 2, …)."""
    facts = published_facts(conn, PexesoMeta, "PEXESO")
    state = json.loads(facts.get(LISTS_FACT, "{}"))
    key = text_key(column_id)
    statement = (
        select(PexesoList.rank, PexesoList.candidate_table_id, PexesoList.candidate_header)
        .add_columns(PexesoList.candidate_column_id, PexesoList.n_matched, PexesoList.joinability)
        .where(PexesoList.column_key == key)
        .order_by(PexesoList.rank)
    )
    rows = conn.execute(statement).all()
    if not rows:
        _explain_missing(conn, column_id, state)
    exact = set(
        conn.execute(select(JoinableColumn.candidate_column_id).where(JoinableColumn.column_key == key)).scalars()
    )
    only = [r for r in rows if r.rank > 0 and r.candidate_column_id not in exact]
    return [
        SemanticJoinableInfo(
            r.candidate_table_id,
            r.candidate_header,
            r.candidate_column_id,
            rank,
            r.n_matched,
            r.joinability,
            state["tau"],
            state["T"],
        )
        for rank, r in enumerate(only, start=1)
        if offset < rank <= offset + k
    ]


def semantic_lists(conn: Connection, table_id: str, k: int = 10) -> dict[str, list[SemanticJoinableInfo]]:
    """The first k entries of every precomputed semantic list of `table_id`'s columns, by column_id,
    without each column's exact joinable columns, in one statement (the table page); empty when the
    catalog has no PEXESO index or its lists are not current."""
    try:
        facts = published_facts(conn, PexesoMeta, "PEXESO")
    except UserError:
        return {}
    state = json.loads(facts.get(LISTS_FACT, "{}"))
    if state.get("state") != "current":
        return {}
    exact = select(JoinableColumn.column_key, JoinableColumn.candidate_column_id).subquery()
    statement = (
        select(PexesoList.column_id, PexesoList.candidate_table_id, PexesoList.candidate_header)
        .add_columns(PexesoList.candidate_column_id, PexesoList.n_matched, PexesoList.joinability)
        .outerjoin(
            exact,
            (exact.c.column_key == PexesoList.column_key)
            & (exact.c.candidate_column_id == PexesoList.candidate_column_id),
        )
        .where(PexesoList.table_id == table_id, PexesoList.rank > 0, exact.c.column_key.is_(None))
        .order_by(PexesoList.column_id, PexesoList.rank)
    )
    out: dict[str, list[SemanticJoinableInfo]] = {}
    for r in conn.execute(statement):
        answers = out.setdefault(r.column_id, [])
        if len(answers) < k:
            answers.append(
                SemanticJoinableInfo(
                    r.candidate_table_id,
                    r.candidate_header,
                    r.candidate_column_id,
                    len(answers) + 1,
                    r.n_matched,
                    r.joinability,
                    state["tau"],
                    state["T"],
                )
            )
    return out


def _explain_missing(conn: Connection, column_id: str, state: dict[str, Any]) -> None:
    """Raise what a user needs to know about a column that has no list (no column has one while the
    lists are over the work bound)."""
    if state.get("state") == "over_bound":
        raise UserError(
            f"semantic lists are not precomputed: joining the last batch with the lake would cost "
            f"{state['work']:,} distances' work (bound {state['bound']:,}); "
            "`juncture search semantic` answers any column"
        )
    if (
        conn.execute(select(CatalogColumn.column_key).where(CatalogColumn.column_key == text_key(column_id))).first()
        is None
    ):
        raise UnknownIdError("column_id", column_id)
    raise UserError(
        f"{column_id!r} has no semantic list: only the columns PEXESO embeds have one (textual columns with "
        f"a value to embed; `[index.pexeso] types`)"
    )
