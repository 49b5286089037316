"""The toy family's catalog table, on its own metadata (the core schema test never sees it)."""

from __future__ import annotations

from sqlalchemy import Integer, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class ToyBase(DeclarativeBase):
    pass


class ToyColumn(ToyBase):
    __tablename__ = "toy_columns"

    column_id: Mapped[str] = mapped_column(Text, primary_key=True)
    table_id: Mapped[str] = mapped_column(Text, index=True)
    n_tokens: Mapped[int] = mapped_column(Integer)
    tokens: Mapped[str] = mapped_column(Text)  # JSON array of the column's distinct tokens
