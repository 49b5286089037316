"""Precomputed relations: each column's top-k joinable columns and each table's top-k unionable
tables with their column alignment (gold `joinable` / `unionable`, published per batch).

A list is keyed by its subject and dense ranks 1..n, so a page of answers is one indexed range read
(`rank > offset AND rank <= offset + k`). Deleting a table cascades to its columns' lists and to its
own unionable list; lists of other subjects that name it are replaced by the same publish. As in
`entities`, ids are unbounded text and the keys are their digests (`column_key`, `table_key`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from catalog.db.models.base import Base, key_default, text_index


class JoinableColumn(Base):
    """One answer of "what joins with this column?": the candidate at `rank` in `column_id`'s list."""

    __tablename__ = "joinable"
    column_key: Mapped[str] = mapped_column(
        ForeignKey("columns.column_key", ondelete="CASCADE"), primary_key=True, default=key_default("column_id")
    )
    rank: Mapped[int] = mapped_column(Integer, primary_key=True)  # 1-based, dense
    column_id: Mapped[str] = mapped_column(Text)
    table_id: Mapped[str] = mapped_column(Text)
    candidate_column_id: Mapped[str] = mapped_column(Text)
    candidate_table_id: Mapped[str] = mapped_column(Text)
    candidate_header: Mapped[str] = mapped_column(Text)
    overlap: Mapped[int] = mapped_column(BigInteger)
    size: Mapped[int] = mapped_column(BigInteger)
    candidate_size: Mapped[int] = mapped_column(BigInteger)
    containment: Mapped[float] = mapped_column(Float)  # overlap / size
    candidate_containment: Mapped[float] = mapped_column(Float)  # overlap / candidate_size
    jaccard: Mapped[float] = mapped_column(Float)
    est_join_size: Mapped[float] = mapped_column(Float)
    is_key: Mapped[bool] = mapped_column(Boolean)
    candidate_is_key: Mapped[bool] = mapped_column(Boolean)
    direction: Mapped[str] = mapped_column(String(16))  # one-to-one | many-to-one | one-to-many | many-to-many
    exact: Mapped[bool] = mapped_column(Boolean)
    method: Mapped[str] = mapped_column(String(32))
    index_version: Mapped[int] = mapped_column(BigInteger)

    __table_args__ = (
        text_index("ix_joinable_column_id", "column_id"),
        text_index("ix_joinable_candidate_table_id", "candidate_table_id"),
    )


class UnionableTable(Base):
    """One answer of "what can I union with this table?", with the column alignment behind its score."""

    __tablename__ = "unionable"
    table_key: Mapped[str] = mapped_column(
        ForeignKey("tables.table_key", ondelete="CASCADE"), primary_key=True, default=key_default("table_id")
    )
    rank: Mapped[int] = mapped_column(Integer, primary_key=True)
    table_id: Mapped[str] = mapped_column(Text)
    candidate_table_id: Mapped[str] = mapped_column(Text)
    score: Mapped[float] = mapped_column(Float)
    n_aligned: Mapped[int] = mapped_column(Integer)
    alignment: Mapped[Any] = mapped_column(JSON)  # [{column_id, column, candidate_column_id, ...}]
    exact: Mapped[bool] = mapped_column(Boolean)
    method: Mapped[str] = mapped_column(String(32))
    index_version: Mapped[int] = mapped_column(BigInteger)

    __table_args__ = (
        text_index("ix_unionable_table_id", "table_id"),
        text_index("ix_unionable_candidate_table_id", "candidate_table_id"),
    )
