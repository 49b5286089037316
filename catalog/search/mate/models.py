"""MATE in the catalog database: what `catalog.search.mate` reads to answer n-ary join searches
online, without Spark (docs/algorithms/mate.md).

Published from the lake's `mate_*` tables by `spark_jobs.mate.publish`:

* `mate_tables`: each indexed table's number (`table_ref`, the compact id the other two tables
  use), its `table_id` and its headers (JSON; a column's position is its 1-based index);
* `mate_postings`: the inverted index, one row per (token, table): the rows and the 1-based column
  positions of the cells holding that token in that table, as two packed int32 arrays sorted by
  row (`n` items). A search fetches the lists of its initial column's values, and verifies a
  candidate row with the lists of its other key values in the same table;
* `mate_row_keys`: the row super keys (OR of the XASH of every cell of the row), per row, packed
  `ROW_BLOCK` rows to a blob (row r of the table is row r % ROW_BLOCK of block r // ROW_BLOCK;
  a row with no cell has key 0). Per row, not per cell: 5-6 times smaller than the paper's layout;
* `mate_meta`: key/value facts: the index version and the XASH spec (JSON), checked on every read;
* `mate_lists`: the precomputed n-ary lists (`catalog.search.mate.lists`): per table and detected
  composite key, its top tables by n-ary joinability with the column mapping.
"""

from __future__ import annotations

import numpy as np
from sqlalchemy import BigInteger, Index, Integer, LargeBinary, Text
from sqlalchemy.orm import Mapped, mapped_column

from catalog.db.models.base import Base, PackedInt32Array, dialect_index, text_index

ROW_BLOCK = 1024  # rows per `mate_row_keys` blob


class MateTable(Base):
    __tablename__ = "mate_tables"
    table_ref: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    table_id: Mapped[str] = mapped_column(Text)
    headers: Mapped[str] = mapped_column(Text)  # JSON list
    n_rows: Mapped[int] = mapped_column(Integer)

    __table_args__ = (text_index("ix_mate_tables_table_id", "table_id"),)


class MatePosting(Base):
    __tablename__ = "mate_postings"
    row_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    token: Mapped[str] = mapped_column(Text)
    table_ref: Mapped[int] = mapped_column(Integer)
    n: Mapped[int] = mapped_column(Integer)
    rows: Mapped[np.ndarray] = mapped_column(PackedInt32Array)
    cols: Mapped[np.ndarray] = mapped_column(PackedInt32Array)

    # A search reads a token's lists in some tables and sums a token's items (`list_lengths`): on
    # SQLite, rows hold their packed arrays inline, so an index on the token alone made each of those
    # reads visit every list's row; the index holding (token, table_ref, n) answers both from the
    # index. PostgreSQL keeps the arrays out of line (TOAST) and cannot B-tree an unbounded token.
    __table_args__ = (
        dialect_index("ix_mate_postings_token", "token", dialect="postgresql", postgresql_using="hash"),
        dialect_index("ix_mate_postings_token_table", "token", "table_ref", "n", dialect="sqlite"),
        Index("ix_mate_postings_table_ref", "table_ref"),
    )


class MateRowKeys(Base):
    __tablename__ = "mate_row_keys"
    table_ref: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    block: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    keys: Mapped[bytes] = mapped_column(LargeBinary)


class MateMeta(Base):
    """index_version, spec (JSON), n_tables, n_rows, n_postings."""

    __tablename__ = "mate_meta"
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class MateList(Base):
    """One entry of a precomputed n-ary list: `table_id` on `key` (its columns as a JSON list, in
        the detected key's order) joins `candidate_table_id` on `joinability` distinct key tuples with
        `mapping` (JSON: key column -> candidate column). Rank 0 marks that the list was computed (it
        has no candidate), so a key whose list is empty is told apart from one never computed. `version`
    is the MATE index version that last changed the list in the lake: the publish copies a list when
    its version differs."""

    __tablename__ = "mate_lists"
    table_id: Mapped[str] = mapped_column(Text, primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    rank: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    candidate_table_id: Mapped[str | None] = mapped_column(Text)
    joinability: Mapped[int] = mapped_column(Integer)
    mapping: Mapped[str | None] = mapped_column(Text)
    version: Mapped[int | None] = mapped_column(BigInteger)  # the lake's list version (on every row)

    __table_args__ = (text_index("ix_mate_lists_candidate", "candidate_table_id"),)
