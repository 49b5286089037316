"""Precomputed transformation join lists: for each textual column of the lake, the columns it joins
with only after a transformation, each with the program Auto-Join learned and its coverage. Served
by `juncture lookup joinable COLUMN --transform`, `GET /v1/joinable/COLUMN?transform=true` and the
table page; `search transform` answers any table online, at the cost of learning while one waits.

**What a list is.** The column's candidates (`candidates.py`: rare q-grams shared, little exact
overlap, at most `list_candidates`, numeric-only columns left out), each with what `autojoin`
learns from the pair as two one-column tables (`learn_pair`; both directions, the side the
program produces must be a key): the program, the column it reads, the key rows it covers, and
whether the fuzzy step added pairs. A candidate with no program stays in the list (a later batch
then knows it was tried) and is not answered. A program reading two columns (first + last name)
is outside a pair's reach: `search transform` and `autojoin` learn those from whole tables.

**Refresh**, in the publish's one transaction (`spark_jobs.autojoin.publish`), so a kill leaves the
previous lists and a rerun makes them: the candidates of every column are ranked again from the
lake's token samples (cheap: numpy over at most `list_tokens` tokens a column); a pair keeps the
program stored for it unless a batch touched one of its tables, and only the other pairs are
learned. Lists that come out the same are not rewritten; lists of deleted columns go. So a batch
learns the pairs of its added and changed columns (and of lists its new columns enter), and the
lists equal a full build's.

**Work bound.** Learning a pair reads two columns from bronze and runs Auto-Join on them
(hundredths of a second, seconds at most: examples are not learned from values past
`max_example_chars`). A batch's publish learns at most `list_max_pairs` pairs, the backlog's
(after every batch is published) or a rebuild's at most `list_backlog_pairs`, in column_id order
of the lists needing them; a list whose pairs would pass the bound is left *pending* (its rank-0
marker has coverage `PENDING`): the lookup says so and points to `search transform`, and the next
publish learns it first (pending lists are the only ones with nothing stored). So a small change
is published in seconds, and a first build's lists are learned by the backlog right after it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from sqlalchemy import Connection, delete, insert, inspect, select

from catalog.core.errors import UnknownIdError, UserError
from catalog.db.models import CatalogColumn
from catalog.db.models.base import text_key
from catalog.search.autojoin.candidates import Candidate, Listed, pair_key
from catalog.search.autojoin.join import Table, autojoin
from catalog.search.autojoin.models import AutojoinMeta, TransformList
from catalog.search.autojoin.qgrams import GramMemo
from catalog.search.autojoin.settings import AutojoinSettings

log = logging.getLogger(__name__)

LISTS_FACT = "lists"  # autojoin_meta key: {"params", "state": "current" | "partial", "n_pending", "bound"}
LISTS_VERSION = 2  # bumped when what a list holds changes: lists of another version are made again
PENDING = -1  # the rank-0 marker's coverage while the list waits for a publish within the bound
TO_CANDIDATE, FROM_CANDIDATE = "to_candidate", "from_candidate"
_CHUNK = 500

Row = tuple[Any, ...]  # (rank, candidate_column_id, candidate_table_id, candidate_header, n_shared,
#                         program, direction, coverage, fuzzy): a list row as compared and written


@dataclass(frozen=True)
class PairProgram:
    """What Auto-Join learned from a pair of columns: the program (None: none found), the column
    it reads (the other is the key it produces), the key rows covered, whether fuzzy added some."""

    program: str | None
    reads: str | None
    coverage: int
    fuzzy: bool


@dataclass(frozen=True)
class TransformJoinableInfo:
    """A column the subject column joins with after a transformation: `program` turns the
    subject's values into the column's (`direction` "to_candidate") or the column's into the
    subject's ("from_candidate"), joining `coverage` key rows."""

    table_id: str
    column: str
    column_id: str
    rank: int
    program: str
    direction: str
    coverage: int
    fuzzy: bool
    n_shared: int  # rare q-grams the two columns' samples share (why it was a candidate)


# ---------------------------------------------------------------------- learning
def header_of(column_id: str, table_id: str) -> str:
    """The header part of a column_id (`<table_id>#<header>`)."""
    return column_id[len(table_id) + 1 :]


def learn_pair(
    a: tuple[str, str, pa.Array], b: tuple[str, str, pa.Array], cfg: AutojoinSettings, memo: GramMemo | None = None
) -> PairProgram:
    """`autojoin` of two columns ((column_id, header, values) each) as one-column tables, in the
    pair's one order (`pair_key`), so both lists of a pair hold the same program."""
    first, second = (a, b) if pair_key(a[0], b[0]) == (a[0], b[0]) else (b, a)
    result = autojoin(Table((first[1],), (first[2],)), Table((second[1],), (second[2],)), cfg, memo=memo)
    if result.program is None:
        return PairProgram(None, None, 0, False)
    reads = second[0] if result.reversed else first[0]
    return PairProgram(str(result.program), reads, result.coverage, result.fuzzy)


# ---------------------------------------------------------------------- refresh (publish)
def refresh_transform_lists(
    conn: Connection,
    candidates: Mapping[str, Listed],
    load: Callable[[Collection[str]], Mapping[str, tuple[str, pa.Array]]],
    touched: Collection[str] | None,
    cfg: AutojoinSettings,
    *,
    backlog: bool = True,
) -> dict[str, int]:
    """Bring `autojoin_lists` to `candidates` (every listed column's, from `candidates.py`):
    programs stored for pairs of untouched tables are kept (`touched` None: none is), the others
    learned from the columns `load` reads ((header, values) by column_id) within
    `list_backlog_pairs`; only lists that changed are rewritten. Without `backlog` (a change
    batch), the bound is `list_max_pairs` and the lists an earlier publish left pending stay so,
    unless the batch touched their table: a batch learns what its own changes call for, and the
    backlog is learned after it is published."""
    state = _state(conn)
    stored = _stored_rows(conn)
    current = state.get("params") == _params(cfg)
    known = _known_pairs(stored, touched) if touched is not None and current else {}
    waiting = _waiting(stored, touched) if touched is not None and current and not backlog else set()
    bound = cfg.list_backlog_pairs if backlog else cfg.list_max_pairs
    learn, pending = _plan({c: v for c, v in candidates.items() if c not in waiting}, known, bound)
    pending |= waiting & candidates.keys()
    if learn:
        log.info("learning transformation pairs", extra={"pairs": len(learn), "bound": bound})
    columns = load({c for p in learn for c in p}) if learn else {}
    memo = GramMemo()  # a column is in up to 2 x list_candidates pairs, cut in both directions of each
    for first, second in sorted(learn):
        known[(first, second)] = learn_pair((first, *columns[first]), (second, *columns[second]), cfg, memo)
    fresh = {c: _list_rows(c, candidates[c].candidates, known, c in pending) for c in candidates}
    gone = sorted(set(stored) - set(fresh))
    changed = sorted(c for c, rows in fresh.items() if stored.get(c, (None, []))[1] != rows)
    _delete_lists(conn, gone + changed)
    _insert_lists(conn, {c: fresh[c] for c in changed}, {c: candidates[c].table_id for c in changed})
    _write_state(conn, cfg, len(pending), bound)
    if pending:
        log.warning("transformation lists over the work bound", extra={"pending": len(pending)})
    return {
        "autojoin_pairs_learned": len(learn),
        "autojoin_lists_written": len(changed),
        "autojoin_lists_dropped": len(gone),
        "autojoin_lists_pending": len(pending),
    }


def _waiting(stored: Mapping[str, tuple[str, list[Row]]], touched: Collection[str]) -> set[str]:
    """The stored lists left pending by an earlier publish, of tables not `touched`."""
    gone = set(touched)
    return {c for c, (table_id, rows) in stored.items() if _marker_coverage(rows) == PENDING and table_id not in gone}


def _marker_coverage(rows: list[Row]) -> int:
    """The rank-0 marker's coverage: PENDING or 0."""
    return int(rows[0][_FIELDS.index("coverage")])


def _plan(
    candidates: Mapping[str, Listed], known: Mapping[tuple[str, str], PairProgram], bound: int
) -> tuple[set[tuple[str, str]], set[str]]:
    """The pairs to learn (no program stored) within `bound`, and the lists left pending: lists
    take their pairs in column_id order; one whose pairs would pass the bound waits whole."""
    learn: set[tuple[str, str]] = set()
    pending: set[str] = set()
    for column_id in sorted(candidates):
        needed = {pair_key(column_id, c.column_id) for c in candidates[column_id].candidates} - known.keys() - learn
        if len(learn) + len(needed) > bound:
            pending.add(column_id)
        else:
            learn |= needed
    return learn, pending


def _list_rows(
    column_id: str, candidates: tuple[Candidate, ...], known: Mapping[tuple[str, str], PairProgram], pending: bool
) -> list[Row]:
    """A list's rows: the rank-0 marker, then its candidates with their pairs' programs."""
    marker: Row = (0, None, None, None, 0, None, None, PENDING if pending else 0, False)
    if pending:
        return [marker]
    rows = [marker]
    for rank, c in enumerate(candidates, start=1):
        learned = known[pair_key(column_id, c.column_id)]
        direction = None if learned.reads is None else TO_CANDIDATE if learned.reads == column_id else FROM_CANDIDATE
        header = header_of(c.column_id, c.table_id)
        rows.append(
            (
                rank,
                c.column_id,
                c.table_id,
                header,
                c.n_shared,
                learned.program,
                direction,
                learned.coverage,
                learned.fuzzy,
            )
        )
    return rows


def _known_pairs(
    stored: Mapping[str, tuple[str, list[Row]]], touched: Collection[str]
) -> dict[tuple[str, str], PairProgram]:
    """The programs stored for pairs whose tables no batch since touched."""
    gone = set(touched)
    out: dict[tuple[str, str], PairProgram] = {}
    for column_id, (table_id, rows) in stored.items():
        if table_id in gone:
            continue
        for _rank, candidate, candidate_table, _h, _n, program, direction, coverage, fuzzy in rows[1:]:
            if candidate_table in gone:
                continue
            reads = None if direction is None else column_id if direction == TO_CANDIDATE else candidate
            out[pair_key(column_id, candidate)] = PairProgram(program, reads, coverage, bool(fuzzy))
    return out


def _stored_rows(conn: Connection) -> dict[str, tuple[str, list[Row]]]:
    """Every stored list as (table_id, rows in rank order) by column_id."""
    t = TransformList
    statement = select(
        t.column_id, t.table_id, t.rank, t.candidate_column_id, t.candidate_table_id, t.candidate_header
    ).add_columns(t.n_shared, t.program, t.direction, t.coverage, t.fuzzy)
    out: dict[str, tuple[str, list[Row]]] = {}
    for r in conn.execute(statement.order_by(t.column_key, t.rank)).tuples():
        column_id, table_id, *row = r
        row[-1] = bool(row[-1])
        out.setdefault(column_id, (table_id, []))[1].append(tuple(row))
    return out


def _delete_lists(conn: Connection, column_ids: list[str]) -> None:
    keys = [text_key(c) for c in column_ids]
    for i in range(0, len(keys), _CHUNK):
        conn.execute(delete(TransformList).where(TransformList.column_key.in_(keys[i : i + _CHUNK])))


_FIELDS = (
    "rank",
    "candidate_column_id",
    "candidate_table_id",
    "candidate_header",
    "n_shared",
    "program",
    "direction",
    "coverage",
    "fuzzy",
)


def _insert_lists(conn: Connection, lists: Mapping[str, list[Row]], tables: Mapping[str, str]) -> None:
    rows: list[dict[str, Any]] = []
    for column_id, entries in lists.items():
        base = {"column_key": text_key(column_id), "column_id": column_id, "table_id": tables[column_id]}
        rows += [{**base, **dict(zip(_FIELDS, entry, strict=True))} for entry in entries]
        if len(rows) >= 5_000:
            conn.execute(insert(TransformList), rows)
            rows = []
    if rows:
        conn.execute(insert(TransformList), rows)


def _params(cfg: AutojoinSettings) -> dict[str, Any]:
    """What a list depends on: the settings (the bounds aside: they decide when, not what)."""
    settings = dataclasses.asdict(cfg)
    settings.pop("list_max_pairs")
    settings.pop("list_backlog_pairs")
    return {"version": LISTS_VERSION, **settings}


def lists_pending(conn: Connection) -> bool:
    """Whether some lists wait for a publish within the work bound."""
    return bool(_state(conn).get("n_pending"))


def _state(conn: Connection) -> dict[str, Any]:
    if not inspect(conn).has_table(AutojoinMeta.__tablename__):
        return {}
    text = conn.execute(select(AutojoinMeta.value).where(AutojoinMeta.key == LISTS_FACT)).scalar()
    out: dict[str, Any] = json.loads(text) if text else {}
    return out


def _write_state(conn: Connection, cfg: AutojoinSettings, n_pending: int, bound: int) -> None:
    fact = {
        "params": _params(cfg),
        "state": "partial" if n_pending else "current",
        "n_pending": n_pending,
        "bound": bound,
    }
    conn.execute(delete(AutojoinMeta).where(AutojoinMeta.key == LISTS_FACT))
    conn.execute(insert(AutojoinMeta), [{"key": LISTS_FACT, "value": json.dumps(fact)}])


# ---------------------------------------------------------------------- lookup
def transform_joinable(
    conn: Connection, column_id: str, k: int = 10, *, offset: int = 0
) -> list[TransformJoinableInfo]:
    """Answers offset+1 .. offset+k of `column_id`'s precomputed transformation list: its
    candidates with a program, best coverage first (then the candidates' rank)."""
    t = TransformList
    statement = (
        select(t.rank, t.candidate_table_id, t.candidate_header, t.candidate_column_id, t.program)
        .add_columns(t.direction, t.coverage, t.fuzzy, t.n_shared)
        .where(t.column_key == text_key(column_id))
        .order_by(t.rank)
    )
    rows = conn.execute(statement).all() if _state(conn) else []
    if not rows:
        _explain_missing(conn, column_id)
    if rows[0].coverage == PENDING:
        raise UserError(
            f"{column_id!r}: its transformation list is not precomputed yet (the last publish reached its "
            f"bound of pairs learned; the next one learns it); `juncture search transform` answers any table"
        )
    answers = _answers([r for r in rows if r.rank > 0 and r.program is not None])
    return answers[offset : offset + k]


def transform_lists(conn: Connection, table_id: str, k: int = 10) -> dict[str, list[TransformJoinableInfo]]:
    """The first k answers of every precomputed transformation list of `table_id`'s columns, by
    column_id (a column whose list is empty maps to []), in one statement (the table page); empty
    when the table has no list, or only pending ones."""
    if not _state(conn):
        return {}
    t = TransformList
    statement = (
        select(t.column_id, t.rank, t.candidate_table_id, t.candidate_header, t.candidate_column_id, t.program)
        .add_columns(t.direction, t.coverage, t.fuzzy, t.n_shared)
        .where(t.table_id == table_id)
        .order_by(t.column_id, t.rank)
    )
    by_column: dict[str, list[Any]] = {}
    for r in conn.execute(statement):
        if r.rank == 0 and r.coverage != PENDING:
            by_column[r.column_id] = []
        elif r.rank > 0 and r.program is not None and r.column_id in by_column:
            by_column[r.column_id].append(r)
    return {c: _answers(rows)[:k] for c, rows in by_column.items()}


def _answers(rows: list[Any]) -> list[TransformJoinableInfo]:
    """List rows with a program as answers, best coverage first, then the candidates' rank."""
    ordered = sorted(rows, key=lambda r: (-r.coverage, r.rank))
    return [
        TransformJoinableInfo(
            r.candidate_table_id,
            r.candidate_header,
            r.candidate_column_id,
            rank,
            r.program,
            r.direction,
            r.coverage,
            bool(r.fuzzy),
            r.n_shared,
        )
        for rank, r in enumerate(ordered, start=1)
    ]


def _explain_missing(conn: Connection, column_id: str) -> None:
    """Raise what a user needs to know about a column that has no list."""
    if not _state(conn):
        raise UserError("the catalog holds no transformation lists yet (run `juncture index`)")
    where = CatalogColumn.column_key == text_key(column_id)
    if conn.execute(select(CatalogColumn.column_key).where(where)).first() is None:
        raise UnknownIdError("column_id", column_id)
    raise UserError(
        f"{column_id!r} has no transformation list: only textual columns have one (numeric-only columns "
        f"are left out, as are tables over `[index.autojoin] list_max_rows` rows); "
        f"`juncture search transform` answers any table"
    )
