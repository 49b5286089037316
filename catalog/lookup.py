"""Lookups of the precomputed catalog: the one module that queries the catalog's entity tables.

Every function takes a SQLAlchemy `Session` and returns plain dataclasses, so the CLI (`--json`),
the HTTP API and the Airflow plugin serialise the very same objects. Unknown ids raise
`UnknownIdError`.

Each answer is read with ONE SELECT (the subject outer-joined with its rows), so it comes from one
snapshot of the catalog on SQLite (WAL) and PostgreSQL (READ COMMITTED) alike: a lookup running
while a batch is published sees the whole old answer or the whole new one, never a mix, and an
unknown id is told apart from an empty answer by the same statement.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from catalog.errors import UnknownIdError, UserError
from catalog.models import CatalogColumn, CatalogTable, ColumnProfile, JoinableColumn, TableKey, UnionableTable

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
    """A result (or list of results) as JSON-ready data."""
    if isinstance(obj, list):
        return [as_dict(o) for o in obj]
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj


def _table_row(session: Session, table_id: str) -> CatalogTable:
    row = session.get(CatalogTable, table_id)
    if row is None:
        raise UnknownIdError("table_id", table_id)
    return row


def table(session: Session, table_id: str) -> TableInfo:
    row = _table_row(session, table_id)
    return TableInfo(
        table_id=row.table_id, name=row.name, title=row.title, source=row.source_name, format=row.format,
        n_rows=row.n_rows, n_columns=row.n_columns, content_sha256=row.content_sha256,
        source_updated_at=row.source_updated_at, batch_id=row.batch_id, index_version=row.index_version,
        published_at=row.published_at.isoformat(),
    )


def tables(session: Session, *, source: str | None = None, limit: int = 100, offset: int = 0) -> list[TableInfo]:
    stmt = select(CatalogTable.table_id).order_by(CatalogTable.table_id).limit(limit).offset(offset)
    if source is not None:
        stmt = stmt.where(CatalogTable.source_name == source)
    return [table(session, tid) for tid in session.scalars(stmt)]


def columns(session: Session, table_id: str) -> list[ColumnInfo]:
    rows = session.execute(
        select(CatalogTable.table_id, CatalogColumn)
        .outerjoin(CatalogColumn, CatalogColumn.table_id == CatalogTable.table_id)
        .where(CatalogTable.table_id == table_id).order_by(CatalogColumn.position)).all()
    if not rows:
        raise UnknownIdError("table_id", table_id)
    return [ColumnInfo(r.column_id, r.table_id, r.header, r.position, r.portal_type) for _, r in rows if r is not None]


def profile(session: Session, column_id: str) -> ProfileInfo:
    row = session.execute(select(CatalogColumn, ColumnProfile).join(
        ColumnProfile, ColumnProfile.column_id == CatalogColumn.column_id).where(
        CatalogColumn.column_id == column_id)).first()
    if row is None:
        raise UnknownIdError("column_id", column_id)
    col, prof = row
    return ProfileInfo(
        column_id=col.column_id, table_id=col.table_id, column=col.header,
        **{f.name: getattr(prof, f.name) for f in dataclasses.fields(ProfileInfo)
           if f.name not in ("column_id", "table_id", "column")},
    )


def keys(session: Session, table_id: str) -> list[KeyInfo]:
    rows = session.execute(
        select(CatalogTable.table_id, TableKey).outerjoin(TableKey, TableKey.table_id == CatalogTable.table_id)
        .where(CatalogTable.table_id == table_id).order_by(TableKey.score.desc(), TableKey.id)).all()
    if not rows:
        raise UnknownIdError("table_id", table_id)
    return [KeyInfo(list(r.columns), r.exact, r.uniqueness, r.score) for _, r in rows if r is not None]


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


def _ranked_page(session: Session, subject: Any, model: Any, ident: str, k: int, offset: int) -> list[Any]:
    """Ranks offset+1 .. offset+k of `ident`'s precomputed list, read in ONE statement (the subject
    outer-joined with its rows), so the answer comes from one snapshot even while a publish runs,
    and an unknown id (no subject row) is told apart from an empty list."""
    _check_page(k, offset)
    key = getattr(model, subject.key)
    rows = session.execute(
        select(subject, model).outerjoin(model, (key == subject) & (model.rank > offset) & (model.rank <= offset + k))
        .where(subject == ident).order_by(model.rank)).all()
    if not rows:
        raise UnknownIdError(subject.key, ident)
    return [r for _, r in rows if r is not None]


def joinable(session: Session, column_id: str, k: int = 10, *, offset: int = 0) -> list[JoinableInfo]:
    """The precomputed top joinable columns of `column_id`, ranks offset+1 .. offset+k."""
    rows = _ranked_page(session, CatalogColumn.column_id, JoinableColumn, column_id, k, offset)
    return [JoinableInfo(
        table_id=r.candidate_table_id, column=r.candidate_header, column_id=r.candidate_column_id, rank=r.rank,
        overlap=r.overlap, containment=r.containment, candidate_containment=r.candidate_containment,
        jaccard=r.jaccard, size=r.size, candidate_size=r.candidate_size, est_join_size=r.est_join_size,
        query_is_key=r.is_key, candidate_is_key=r.candidate_is_key, direction=r.direction, exact=r.exact,
        method=r.method, index_version=r.index_version,
    ) for r in rows]


def unionable(session: Session, table_id: str, k: int = 10, *, offset: int = 0) -> list[UnionableInfo]:
    """The precomputed top unionable tables of `table_id`, ranks offset+1 .. offset+k."""
    rows = _ranked_page(session, CatalogTable.table_id, UnionableTable, table_id, k, offset)
    return [UnionableInfo(
        table_id=r.candidate_table_id, rank=r.rank, score=r.score, n_aligned=r.n_aligned,
        alignment=[AlignedColumn(column=a["column"], column_id=a["column_id"], candidate_column=a["candidate_column"],
                                 candidate_column_id=a["candidate_column_id"], score=a["score"],
                                 signals=dict(a.get("signals") or {})) for a in r.alignment],
        exact=r.exact, method=r.method, index_version=r.index_version,
    ) for r in rows]
