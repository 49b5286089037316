"""Lookups of the precomputed catalog: the one module that queries the catalog's entity tables.

Every function takes a SQLAlchemy `Session` and returns plain dataclasses, so the CLI (`--json`),
the HTTP API and the Airflow plugin serialise the very same objects. Unknown ids raise
`UnknownIdError`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from catalog.errors import UnknownIdError
from catalog.models import CatalogColumn, CatalogTable, ColumnProfile, TableKey


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
    _table_row(session, table_id)
    rows = session.scalars(select(CatalogColumn).where(CatalogColumn.table_id == table_id)
                           .order_by(CatalogColumn.position))
    return [ColumnInfo(r.column_id, r.table_id, r.header, r.position, r.portal_type) for r in rows]


def profile(session: Session, column_id: str) -> ProfileInfo:
    col = session.get(CatalogColumn, column_id)
    prof = session.get(ColumnProfile, column_id) if col is not None else None
    if col is None or prof is None:
        raise UnknownIdError("column_id", column_id)
    return ProfileInfo(
        column_id=col.column_id, table_id=col.table_id, column=col.header,
        **{f.name: getattr(prof, f.name) for f in dataclasses.fields(ProfileInfo)
           if f.name not in ("column_id", "table_id", "column")},
    )


def keys(session: Session, table_id: str) -> list[KeyInfo]:
    _table_row(session, table_id)
    rows = session.scalars(select(TableKey).where(TableKey.table_id == table_id)
                           .order_by(TableKey.score.desc(), TableKey.id))
    return [KeyInfo(list(r.columns), r.exact, r.uniqueness, r.score) for r in rows]
