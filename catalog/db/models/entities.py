"""Catalog entities: sources, tables, columns, column profiles, keys, and publish runs.

Ids are the contract's strings (`table_id`, `column_id`; docs/contracts.md), never row ids, so a catalog can be rebuilt
from the lake and still answer with the same ids. Deleting a table cascades to its columns, their
profiles and its keys.

Ids, headers and every other crawl-derived text are unbounded `Text`: a portal's 100-character
timestamp or a 10 KB header must not be truncated or refused. Primary and foreign keys are
therefore the ids' fixed-size digests (`table_key`, `column_key`, filled in from the id by a column
default), and the ids themselves are looked up through hash indexes on PostgreSQL (`text_index`).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from catalog.db.models.base import TEXT_KEY_LENGTH, Base, key_default, text_index

KEY = String(TEXT_KEY_LENGTH)


class Source(Base):
    """A configured portal or lake folder that tables are crawled from."""

    __tablename__ = "sources"
    name: Mapped[str] = mapped_column(Text, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    location: Mapped[str] = mapped_column(Text)
    created_at: Mapped[dt.datetime]


class CatalogTable(Base):
    """A table of the lake as the catalog knows it."""

    __tablename__ = "tables"
    table_key: Mapped[str] = mapped_column(KEY, primary_key=True, default=key_default("table_id"))
    table_id: Mapped[str] = mapped_column(Text)
    source_name: Mapped[str | None] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text)
    title: Mapped[str | None] = mapped_column(Text)
    format: Mapped[str | None] = mapped_column(Text)
    n_rows: Mapped[int] = mapped_column(Integer, default=0)
    n_columns: Mapped[int] = mapped_column(Integer, default=0)
    content_sha256: Mapped[str | None] = mapped_column(String(64))
    source_updated_at: Mapped[str | None] = mapped_column(Text)
    keys_search_complete: Mapped[bool | None] = mapped_column(Boolean)
    batch_id: Mapped[str | None] = mapped_column(Text)
    index_version: Mapped[int] = mapped_column(Integer, default=0)
    published_at: Mapped[dt.datetime]

    columns: Mapped[list[CatalogColumn]] = relationship(
        back_populates="table", cascade="all, delete-orphan", passive_deletes=True, order_by="CatalogColumn.position"
    )

    __table_args__ = (text_index("ix_tables_table_id", "table_id"), text_index("ix_tables_source_name", "source_name"))


class CatalogColumn(Base):
    __tablename__ = "columns"
    column_key: Mapped[str] = mapped_column(KEY, primary_key=True, default=key_default("column_id"))
    column_id: Mapped[str] = mapped_column(Text)
    table_key: Mapped[str] = mapped_column(
        ForeignKey("tables.table_key", ondelete="CASCADE"), default=key_default("table_id")
    )
    table_id: Mapped[str] = mapped_column(Text)
    position: Mapped[int] = mapped_column(Integer)  # 1-based, as in the source table
    header: Mapped[str] = mapped_column(Text)
    portal_type: Mapped[str | None] = mapped_column(Text)

    table: Mapped[CatalogTable] = relationship(back_populates="columns")

    __table_args__ = (
        Index("ix_columns_table_key_position", "table_key", "position"),
        text_index("ix_columns_column_id", "column_id"),
        text_index("ix_columns_table_id", "table_id"),
    )


class ColumnProfile(Base):
    """What a column holds, inferred from its values (written by spark_jobs/profile/profiles.py)."""

    __tablename__ = "column_profiles"
    column_key: Mapped[str] = mapped_column(
        ForeignKey("columns.column_key", ondelete="CASCADE"), primary_key=True, default=key_default("column_id")
    )
    column_id: Mapped[str] = mapped_column(Text)
    row_count: Mapped[int] = mapped_column(Integer)
    null_count: Mapped[int] = mapped_column(Integer)
    empty_count: Mapped[int] = mapped_column(Integer)
    distinct_count: Mapped[int] = mapped_column(Integer)
    distinct_exact: Mapped[bool] = mapped_column(Boolean)
    distinct_error: Mapped[float | None] = mapped_column(Float)
    inferred_type: Mapped[str] = mapped_column(String(32))
    type_share: Mapped[float] = mapped_column(Float)
    portal_type: Mapped[str | None] = mapped_column(Text)
    min_value: Mapped[str | None] = mapped_column(Text)
    max_value: Mapped[str | None] = mapped_column(Text)
    length_min: Mapped[int | None] = mapped_column(Integer)
    length_mean: Mapped[float | None] = mapped_column(Float)
    length_max: Mapped[int | None] = mapped_column(Integer)
    top_values: Mapped[Any] = mapped_column(JSON)  # [[value, count], ...]
    histogram: Mapped[Any] = mapped_column(JSON)  # {"edges": [...], "counts": [...]} or null
    uniqueness: Mapped[float] = mapped_column(Float)
    token_count: Mapped[int] = mapped_column(Integer)
    batch_id: Mapped[str | None] = mapped_column(Text)


class TableKey(Base):
    """A unique (exact) or near-unique (approximate) column combination of a table."""

    __tablename__ = "keys"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    table_key: Mapped[str] = mapped_column(
        ForeignKey("tables.table_key", ondelete="CASCADE"), index=True, default=key_default("table_id")
    )
    table_id: Mapped[str] = mapped_column(Text)
    columns: Mapped[list[str]] = mapped_column(JSON)
    exact: Mapped[bool] = mapped_column(Boolean)
    uniqueness: Mapped[float] = mapped_column(Float)
    score: Mapped[float] = mapped_column(Float)
    batch_id: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (text_index("ix_keys_table_id", "table_id"),)


class PublishRun(Base):
    """One publish of a change batch into the catalog; `committed` runs make re-publishing a no-op."""

    __tablename__ = "publish_runs"
    run_id: Mapped[str] = mapped_column(Text, primary_key=True)
    batch_id: Mapped[str] = mapped_column(Text, index=True)
    kind: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))  # running | committed | failed
    started_at: Mapped[dt.datetime]
    finished_at: Mapped[dt.datetime | None]
    counts: Mapped[Any] = mapped_column(JSON, default=dict)
    index_version: Mapped[int] = mapped_column(Integer, default=0)
    message: Mapped[str | None] = mapped_column(Text)


class CrawlRun(Base):
    """One crawl (`juncture crawl`, the `lake_crawl` DAG): what it found per kind, the batch it
    landed (None: nothing changed), and the sources it listed (JSON). Its failed datasets are
    `CrawlFailure` rows: the catalog is where a user looks for why a table is missing."""

    __tablename__ = "crawl_runs"
    run_id: Mapped[str] = mapped_column(Text, primary_key=True)
    finished_at: Mapped[dt.datetime] = mapped_column(index=True)
    sources: Mapped[Any] = mapped_column(JSON)  # names of the sources the crawl listed
    listed: Mapped[int] = mapped_column(Integer)
    new: Mapped[int] = mapped_column(Integer)
    changed: Mapped[int] = mapped_column(Integer)
    deleted: Mapped[int] = mapped_column(Integer)
    unchanged: Mapped[int] = mapped_column(Integer)
    failed: Mapped[int] = mapped_column(Integer)
    batch_id: Mapped[str | None] = mapped_column(Text)


class CrawlFailure(Base):
    """A dataset (or a whole source's listing) a crawl could not read, with the reason."""

    __tablename__ = "crawl_failures"
    run_id: Mapped[str] = mapped_column(ForeignKey("crawl_runs.run_id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    dataset: Mapped[str] = mapped_column(Text)
    reason: Mapped[str] = mapped_column(Text)
