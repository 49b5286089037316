"""Lookups of the precomputed catalog: the one module that queries the catalog's entity tables.

Every function takes a SQLAlchemy `Session`, `Connection` or `Engine` and returns plain
dataclasses, so the CLI (`--json`), the HTTP API and the Airflow plugin serialise the very same
objects. Unknown ids raise `UnknownIdError`.

Each answer is read with ONE SELECT (the subject outer-joined with its rows), so it comes from one
snapshot of the catalog on SQLite (WAL) and PostgreSQL (READ COMMITTED) alike: a lookup running
while a batch is published sees the whole old answer or the whole new one, never a mix, and an
unknown id is told apart from an empty answer by the same statement.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection, Engine, Table, and_, bindparam, exists, func, or_, select
from sqlalchemy.orm import Session

from catalog.core.errors import UnknownIdError, UserError
from catalog.db.models import CatalogColumn, CatalogTable, ColumnProfile, JoinableColumn, TableKey, UnionableTable
from catalog.db.prepared import PreparedSelect, driver_rows

Catalog = Session | Connection | Engine  # what a lookup reads from (an engine: a pooled connection per lookup)
MAX_K = 1000  # answers per page; the precomputed lists are shorter (settings.index.*_k)


@dataclass(frozen=True)
class TableInfo:
    table_id: str
    name: str
    title: str | None
    source: str | None
    format: str | None
    n_rows: int
    n_columns: int
    content_sha256: str | None
    source_updated_at: str | None
    batch_id: str | None
    index_version: int
    published_at: str


@dataclass(frozen=True)
class ColumnInfo:
    column_id: str
    table_id: str
    column: str  # the header, as in every result of the CLI contract
    position: int
    portal_type: str | None


@dataclass(frozen=True)
class ProfileInfo:
    column_id: str
    table_id: str
    column: str
    row_count: int
    null_count: int
    empty_count: int
    distinct_count: int
    distinct_exact: bool
    distinct_error: float | None
    inferred_type: str
    type_share: float
    portal_type: str | None
    min_value: str | None
    max_value: str | None
    length_min: int | None
    length_mean: float | None
    length_max: int | None
    top_values: Any
    histogram: Any
    uniqueness: float
    token_count: int


@dataclass(frozen=True)
class KeyInfo:
    columns: list[str]
    exact: bool
    uniqueness: float
    score: float


def as_dict(obj: Any) -> Any:
    """A result (or list of results) as JSON-ready data. A shallow walk into dataclasses and lists
    only, not `dataclasses.asdict` (which deep-copies every value and dominated an HTTP lookup's
    cost); the JSON values read from the catalog are already plain data."""
    kind = type(obj)
    if kind is list:
        return [as_dict(o) for o in obj]
    names = _field_names(kind)
    if names is None:
        return obj
    return {
        name: as_dict(value) if type(value) is list or _field_names(type(value)) is not None else value
        for name, value in zip(names, map(obj.__getattribute__, names), strict=True)
    }


_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}


def _field_names(kind: type) -> tuple[str, ...] | None:
    """The field names of a dataclass type, None for any other type (cached per type)."""
    if kind not in _FIELD_NAMES:
        _FIELD_NAMES[kind] = tuple(f.name for f in dataclasses.fields(kind)) if dataclasses.is_dataclass(kind) else None
    return _FIELD_NAMES[kind]


# The statements are built and wrapped once (`PreparedSelect`: compiled once per dialect): each
# lookup binds its parameters and reads plain rows (Core, no ORM identity map), so a lookup costs
# one indexed read and little Python around it.
_TABLES = cast(Table, CatalogTable.__table__)
_COLUMNS = cast(Table, CatalogColumn.__table__)
_PROFILES = cast(Table, ColumnProfile.__table__)
_KEYS = cast(Table, TableKey.__table__)
_JOINABLE = cast(Table, JoinableColumn.__table__)
_UNIONABLE = cast(Table, UnionableTable.__table__)


def _answer_columns(table: Table, answer: type, renamed: dict[str, str]) -> list[Any]:
    """The `answer` dataclass's fields in order as columns of `table`, each labelled with its field
    name (a field reads the column of the same name, or the one `renamed` gives)."""
    return [table.c[renamed.get(f.name, f.name)].label(f.name) for f in dataclasses.fields(answer)]


_TABLE_FIELDS = _answer_columns(_TABLES, TableInfo, {"source": "source_name"})
_TABLE = PreparedSelect(select(*_TABLE_FIELDS).where(_TABLES.c.table_id == bindparam("ident")))
_ALL_TABLES = select(*_TABLE_FIELDS).order_by(_TABLES.c.table_id).limit(bindparam("limit")).offset(bindparam("offset"))
_TABLE_LIST = PreparedSelect(_ALL_TABLES)
_TABLE_LIST_OF_SOURCE = PreparedSelect(_ALL_TABLES.where(_TABLES.c.source_name == bindparam("source")))
_COLUMN_LIST = PreparedSelect(
    select(*_COLUMNS.c)
    .select_from(_TABLES.outerjoin(_COLUMNS, _COLUMNS.c.table_key == _TABLES.c.table_key))
    .where(_TABLES.c.table_id == bindparam("ident"))
    .order_by(_COLUMNS.c.position)
)
_PROFILE_FIELDS = [f.name for f in dataclasses.fields(ProfileInfo) if f.name not in ("column_id", "table_id", "column")]
_PROFILE = PreparedSelect(
    select(
        _COLUMNS.c.column_id, _COLUMNS.c.table_id, _COLUMNS.c.header, *(_PROFILES.c[name] for name in _PROFILE_FIELDS)
    )
    .select_from(_COLUMNS.join(_PROFILES, _PROFILES.c.column_key == _COLUMNS.c.column_key))
    .where(_COLUMNS.c.column_id == bindparam("ident"))
)
_KEY_LIST = PreparedSelect(
    select(*_KEYS.c)
    .select_from(_TABLES.outerjoin(_KEYS, _KEYS.c.table_key == _TABLES.c.table_key))
    .where(_TABLES.c.table_id == bindparam("ident"))
    .order_by(_KEYS.c.score.desc(), _KEYS.c.id)
)


def _rows(catalog: Catalog, prepared: PreparedSelect, **params: Any) -> Sequence[Any]:
    """The statement's rows, with attribute access by column name.

    On the API's reader connections (autocommit) on PostgreSQL the rows are read straight through
    psycopg (`catalog.db.prepared`): SQLAlchemy's execution asks the cursor for its description on
    every statement, and psycopg builds a column object per column each time, which with the
    execution context was about 40% of a lookup's time. The lookup tables' types (text, integers,
    floats, booleans, JSON, timestamptz) come out of psycopg exactly as SQLAlchemy returns them on
    this dialect; `tests/relations` compares both ways. In a transaction (the CLI, a Session), on
    SQLite (whose driver leaves timestamps and JSON as text), or when the driver raises, the
    statement runs the SQLAlchemy way, which raises the error as SQLAlchemy does and replaces a dead
    connection."""
    if isinstance(catalog, Engine):
        with catalog.connect() as connection:
            return _rows(connection, prepared, **params)
    connection = catalog.connection() if isinstance(catalog, Session) else catalog
    if connection.dialect.driver == "psycopg":
        dbapi = connection.connection.dbapi_connection
        if dbapi is not None and getattr(dbapi, "autocommit", False):
            try:
                return driver_rows(connection, prepared, params)
            except connection.dialect.loaded_dbapi.Error:  # rerun the SQLAlchemy way, which reports it
                pass
    return connection.execute(prepared.statement, params).all()


def _table_info(r: Any) -> TableInfo:
    return TableInfo(**{**r._asdict(), "published_at": r.published_at.isoformat()})


def table(catalog: Catalog, table_id: str) -> TableInfo:
    return _table_info(_subject_rows(catalog, _TABLE, "table_id", table_id)[0])


def tables(catalog: Catalog, *, source: str | None = None, limit: int = 100, offset: int = 0) -> list[TableInfo]:
    if source is None:
        rows = _rows(catalog, _TABLE_LIST, limit=limit, offset=offset)
    else:
        rows = _rows(catalog, _TABLE_LIST_OF_SOURCE, limit=limit, offset=offset, source=source)
    return [_table_info(r) for r in rows]


@dataclass(frozen=True)
class TableQuery:
    """What `find_tables` looks for: `text` in a table's id, name, title or any column header
    (case-insensitive), of one `source`, with or without a detected key, and a row count in
    [`min_rows`, `max_rows`]. Every part is optional; an empty query lists every table."""

    text: str = ""
    source: str | None = None
    has_key: bool | None = None
    min_rows: int | None = None
    max_rows: int | None = None


def _like(text: str) -> str:
    """A LIKE pattern matching `text` anywhere, its own `%`, `_` and `\\` taken literally."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


_SEARCHED = (_TABLES.c.table_id, _TABLES.c.name, _TABLES.c.title)


def find_tables(catalog: Catalog, query: TableQuery, *, limit: int = 20, offset: int = 0) -> list[TableInfo]:
    """The tables matching `query`, by table_id, ranks offset+1 .. offset+limit.

    Built per call (the filters vary) but still one SELECT: the header match and the key filter are
    EXISTS subqueries on the indexed `table_key`, so a page costs one read whatever the lake's size."""
    _check_page(limit, offset)
    statement = select(*_TABLE_FIELDS)
    if query.text:
        pattern = _like(query.text)
        header_match = exists().where(
            _COLUMNS.c.table_key == _TABLES.c.table_key, func.lower(_COLUMNS.c.header).like(pattern, escape="\\")
        )
        statement = statement.where(
            or_(
                *(func.lower(c).like(pattern, escape="\\") for c in _SEARCHED),
                header_match,
            )
        )
    if query.source is not None:
        statement = statement.where(_TABLES.c.source_name == query.source)
    if query.has_key is not None:
        keyed = exists().where(_KEYS.c.table_key == _TABLES.c.table_key)
        statement = statement.where(keyed if query.has_key else ~keyed)
    if query.min_rows is not None:
        statement = statement.where(_TABLES.c.n_rows >= query.min_rows)
    if query.max_rows is not None:
        statement = statement.where(_TABLES.c.n_rows <= query.max_rows)
    statement = statement.order_by(_TABLES.c.table_id).limit(limit).offset(offset)
    connection_rows = _plain_rows(catalog, statement)
    return [_table_info(r) for r in connection_rows]


def sources(catalog: Catalog) -> list[str]:
    """The names of the sources the catalog's tables come from, sorted (for a filter's choices)."""
    statement = select(_TABLES.c.source_name).where(_TABLES.c.source_name.is_not(None)).distinct()
    return sorted(r[0] for r in _plain_rows(catalog, statement))


def _plain_rows(catalog: Catalog, statement: Any) -> Sequence[Any]:
    """A statement built per call, run the SQLAlchemy way (no precompiled form to reuse)."""
    if isinstance(catalog, Engine):
        with catalog.connect() as connection:
            return connection.execute(statement).all()
    return catalog.execute(statement).all()


def _subject_rows(catalog: Catalog, statement: PreparedSelect, kind: str, ident: str, **params: Any) -> Sequence[Any]:
    """The rows a statement reads about `ident`; none at all means the catalog does not hold it.
    Statements of lists outer-join the subject with its rows (one row of NULLs for a subject
    without any), so its existence and its rows come from the same snapshot."""
    rows = _rows(catalog, statement, ident=ident, **params)
    if not rows:
        raise UnknownIdError(kind, ident)
    return rows


def columns(catalog: Catalog, table_id: str) -> list[ColumnInfo]:
    rows = _subject_rows(catalog, _COLUMN_LIST, "table_id", table_id)
    return [
        ColumnInfo(r.column_id, r.table_id, r.header, r.position, r.portal_type)
        for r in rows
        if r.column_id is not None
    ]


def profile(catalog: Catalog, column_id: str) -> ProfileInfo:
    r = _subject_rows(catalog, _PROFILE, "column_id", column_id)[0]
    return ProfileInfo(
        column_id=r.column_id,
        table_id=r.table_id,
        column=r.header,
        **{name: getattr(r, name) for name in _PROFILE_FIELDS},
    )


def keys(catalog: Catalog, table_id: str) -> list[KeyInfo]:
    rows = _subject_rows(catalog, _KEY_LIST, "table_id", table_id)
    return [KeyInfo(list(r.columns), r.exact, r.uniqueness, r.score) for r in rows if r.id is not None]


@dataclass(frozen=True)
class JoinableInfo:
    """A column that joins with the query column: the candidate's ids and the pair's measures."""

    table_id: str
    column: str
    column_id: str
    rank: int
    overlap: int  # distinct values shared
    containment: float  # overlap / distinct values of the query column
    candidate_containment: float  # overlap / distinct values of the candidate
    jaccard: float
    size: int
    candidate_size: int
    est_join_size: float  # rows an equi-join would produce, from average value multiplicities
    query_is_key: bool
    candidate_is_key: bool
    direction: str  # one-to-one | many-to-one | one-to-many | many-to-many (query -> candidate)
    exact: bool
    method: str
    index_version: int


@dataclass(frozen=True)
class AlignedColumn:
    column: str
    column_id: str
    candidate_column: str
    candidate_column_id: str
    score: float
    signals: dict[str, float]


@dataclass(frozen=True)
class UnionableInfo:
    """A table whose rows could be stacked under the query table's, with the column alignment."""

    table_id: str
    rank: int
    score: float
    n_aligned: int
    alignment: list[AlignedColumn]
    exact: bool
    method: str
    index_version: int


def _check_page(k: int, offset: int) -> None:
    if not 1 <= k <= MAX_K:
        raise UserError(f"k must be between 1 and {MAX_K}, got {k}")
    if offset < 0:
        raise UserError(f"offset must not be negative, got {offset}")


def _ranked_list(
    subject: Table, ident: str, key: str, relation: Table, answer: type, renamed: dict[str, str]
) -> PreparedSelect:
    """Ranks lo+1 .. hi of a subject's precomputed list: the subject outer-joined with that range
    of its rows, so an unknown id (no row at all) is told apart from an empty list (one row of
    NULLs). The columns are the `answer`'s fields in order, so a row builds its answer positionally."""
    return PreparedSelect(
        select(*_answer_columns(relation, answer, renamed))
        .select_from(
            subject.outerjoin(
                relation,
                and_(
                    relation.c[key] == subject.c[key],
                    relation.c.rank > bindparam("lo"),
                    relation.c.rank <= bindparam("hi"),
                ),
            )
        )
        .where(subject.c[ident] == bindparam("ident"))
        .order_by(relation.c.rank)
    )


_JOINABLE_PAGE = _ranked_list(
    _COLUMNS,
    "column_id",
    "column_key",
    _JOINABLE,
    JoinableInfo,
    {
        "table_id": "candidate_table_id",
        "column": "candidate_header",
        "column_id": "candidate_column_id",
        "query_is_key": "is_key",
    },
)
_UNIONABLE_PAGE = _ranked_list(
    _TABLES, "table_id", "table_key", _UNIONABLE, UnionableInfo, {"table_id": "candidate_table_id"}
)


def _ranked_page(catalog: Catalog, statement: PreparedSelect, kind: str, ident: str, k: int, offset: int) -> list[Any]:
    """A page of a precomputed list, read in ONE statement so that it comes from one snapshot even
    while a publish runs."""
    _check_page(k, offset)
    rows = _subject_rows(catalog, statement, kind, ident, lo=offset, hi=offset + k)
    return [r for r in rows if r.rank is not None]


def joinable(catalog: Catalog, column_id: str, k: int = 10, *, offset: int = 0) -> list[JoinableInfo]:
    """The precomputed top joinable columns of `column_id`, ranks offset+1 .. offset+k."""
    return [JoinableInfo(*r) for r in _ranked_page(catalog, _JOINABLE_PAGE, "column_id", column_id, k, offset)]


def _aligned_column(a: dict[str, Any]) -> AlignedColumn:
    return AlignedColumn(
        column=a["column"],
        column_id=a["column_id"],
        candidate_column=a["candidate_column"],
        candidate_column_id=a["candidate_column_id"],
        score=a["score"],
        signals=dict(a.get("signals") or {}),
    )


def unionable(catalog: Catalog, table_id: str, k: int = 10, *, offset: int = 0) -> list[UnionableInfo]:
    """The precomputed top unionable tables of `table_id`, ranks offset+1 .. offset+k."""
    rows = _ranked_page(catalog, _UNIONABLE_PAGE, "table_id", table_id, k, offset)
    return [UnionableInfo(**{**r._asdict(), "alignment": [_aligned_column(a) for a in r.alignment]}) for r in rows]
