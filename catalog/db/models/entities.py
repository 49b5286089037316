"""Catalog entities: sources, tables, columns, column profiles, keys, and publish runs.

Ids are the DESIGN.md strings (`table_id`, `column_id`), never row ids, so a catalog can be rebuilt
from the lake and still answer with the same ids. Deleting a table cascades to its columns, their
profiles and its keys.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from catalog.db.models.base import Base


class Source(Base):
    """A configured portal or lake folder that tables are crawled from."""

    __tablename__ = "sources"
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    location: Mapped[str] = mapped_column(Text)
    created_at: Mapped[dt.datetime]


class CatalogTable(Base):
    """A table of the lake as the catalog knows it."""

    __tablename__ = "tables"
    table_id: Mapped[str] = mapped_column(String(2048), primary_key=True)
    source_name: Mapped[str | None] = mapped_column(String(200), index=True)
    name: Mapped[str] = mapped_column(Text)
    title: Mapped[str | None] = mapped_column(Text)
    format: Mapped[str | None] = mapped_column(String(32))
    n_rows: Mapped[int] = mapped_column(Integer, default=0)
    n_columns: Mapped[int] = mapped_column(Integer, default=0)
    content_sha256: Mapped[str | None] = mapped_column(String(64))
    source_updated_at: Mapped[str | None] = mapped_column(String(64))
    keys_search_complete: Mapped[bool | None] = mapped_column(Boolean)
    batch_id: Mapped[str | None] = mapped_column(String(64))
    index_version: Mapped[int] = mapped_column(Integer, default=0)
    published_at: Mapped[dt.datetime]

    columns: Mapped[list[CatalogColumn]] = relationship(
        back_populates="table", cascade="all, delete-orphan", passive_deletes=True, order_by="CatalogColumn.position"
    )


class CatalogColumn(Base):
    __tablename__ = "columns"
    column_id: Mapped[str] = mapped_column(String(4096), primary_key=True)
    table_id: Mapped[str] = mapped_column(ForeignKey("tables.table_id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)  # 1-based, as in the source table
    header: Mapped[str] = mapped_column(Text)
    portal_type: Mapped[str | None] = mapped_column(String(64))

    table: Mapped[CatalogTable] = relationship(back_populates="columns")

    __table_args__ = (Index("ix_columns_table_id_position", "table_id", "position"),)


class ColumnProfile(Base):
    """What a column holds, inferred from its values (issue: profiling)."""

    __tablename__ = "column_profiles"
    column_id: Mapped[str] = mapped_column(ForeignKey("columns.column_id", ondelete="CASCADE"), primary_key=True)
    row_count: Mapped[int] = mapped_column(Integer)
    null_count: Mapped[int] = mapped_column(Integer)
    empty_count: Mapped[int] = mapped_column(Integer)
    distinct_count: Mapped[int] = mapped_column(Integer)
    distinct_exact: Mapped[bool] = mapped_column(Boolean)
    distinct_error: Mapped[float | None] = mapped_column(Float)
    inferred_type: Mapped[str] = mapped_column(String(32))
    type_share: Mapped[float] = mapped_column(Float)
    portal_type: Mapped[str | None] = mapped_column(String(64))
    min_value: Mapped[str | None] = mapped_column(Text)
    max_value: Mapped[str | None] = mapped_column(Text)
    length_min: Mapped[int | None] = mapped_column(Integer)
    length_mean: Mapped[float | None] = mapped_column(Float)
    length_max: Mapped[int | None] = mapped_column(Integer)
    top_values: Mapped[Any] = mapped_column(JSON)  # [[value, count], ...]
    histogram: Mapped[Any] = mapped_column(JSON)  # {"edges": [...], "counts": [...]} or null
    uniqueness: Mapped[float] = mapped_column(Float)
    token_count: Mapped[int] = mapped_column(Integer)
    batch_id: Mapped[str | None] = mapped_column(String(64))


class TableKey(Base):
    """A unique (exact) or near-unique (approximate) column combination of a table."""

    __tablename__ = "keys"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    table_id: Mapped[str] = mapped_column(ForeignKey("tables.table_id", ondelete="CASCADE"), index=True)
    columns: Mapped[list[str]] = mapped_column(JSON)
    exact: Mapped[bool] = mapped_column(Boolean)
    uniqueness: Mapped[float] = mapped_column(Float)
    score: Mapped[float] = mapped_column(Float)
    batch_id: Mapped[str | None] = mapped_column(String(64))


class PublishRun(Base):
    """One publish of a change batch into the catalog; `committed` runs make re-publishing a no-op."""

    __tablename__ = "publish_runs"
    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    batch_id: Mapped[str] = mapped_column(String(64), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))  # running | committed | failed
    started_at: Mapped[dt.datetime]
    finished_at: Mapped[dt.datetime | None]
    counts: Mapped[Any] = mapped_column(JSON, default=dict)
    index_version: Mapped[int] = mapped_column(Integer, default=0)
    message: Mapped[str | None] = mapped_column(Text)
