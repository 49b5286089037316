"""PEXESO in the catalog database: what `catalog.search.pexeso` reads to answer semantic join
searches online, without Spark (docs/algorithms/pexeso.md).

Published from the lake's `pexeso_*` tables by `spark_jobs.pexeso.publish`:

* `pexeso_columns`: each embedded column: its ids and header, its distinct values (JSON list, for
  the example pairs of an answer) and their unit vectors, packed little-endian float32, one row of
  `dimension` floats per value, in the values' order;
* `pexeso_partitions`: the partitions the columns are clustered into under the memory budget
  (each column's `partition` says which), with what a search needs to skip one unloaded;
* `pexeso_lists`: each embedded column's precomputed semantic join list (`catalog.search.pexeso.lists`);
* `pexeso_meta`: key/value facts: the index version, the embedder (name, version, dimension; JSON),
  the index shape (pivots, levels, selection; JSON) and the pivots (packed float32, base64), checked
  and used on every load. A search maps the vectors with these pivots into the grid: the pivots are
  re-selected only by a rebuild.
"""

from __future__ import annotations

from sqlalchemy import Float, Index, Integer, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from catalog.db.models.base import TEXT_KEY_LENGTH, Base, key_default, text_index


class PexesoColumn(Base):
    __tablename__ = "pexeso_columns"
    column_ref: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    column_id: Mapped[str] = mapped_column(Text)
    table_id: Mapped[str] = mapped_column(Text)
    header: Mapped[str] = mapped_column(Text)
    n_values: Mapped[int] = mapped_column(Integer)
    value_list: Mapped[str] = mapped_column(Text)  # JSON list
    vectors: Mapped[bytes] = mapped_column(LargeBinary)
    # its partition (`pexeso_partitions`) and its histogram's Jensen-Shannon divergence from the
    # partition's centre when it was assigned (their mean is the partitioning's quality)
    partition: Mapped[int | None] = mapped_column(Integer)
    divergence: Mapped[float | None] = mapped_column(Float)

    __table_args__ = (
        text_index("ix_pexeso_columns_table_id", "table_id"),
        Index("ix_pexeso_columns_partition", "partition"),
    )


class PexesoPartition(Base):
    """One partition of the columns (JSD clustering under the memory budget, `partitioning`): the
    box of its vectors' pivot mappings (packed float64 low and high corners: a search skips the
    partition when no query vector comes within τ of it) and its centre histogram (packed int64 cell
    keys and float64 probabilities: where an added column goes)."""

    __tablename__ = "pexeso_partitions"
    partition: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    low: Mapped[bytes] = mapped_column(LargeBinary)
    high: Mapped[bytes] = mapped_column(LargeBinary)
    centre_bins: Mapped[bytes] = mapped_column(LargeBinary)
    centre_probs: Mapped[bytes] = mapped_column(LargeBinary)


class PexesoMeta(Base):
    """index_version, spec (JSON), shape (JSON), pivots (base64 float32), n_columns, n_vectors."""

    __tablename__ = "pexeso_meta"
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class PexesoList(Base):
    """One entry of a column's precomputed semantic join list: `column_id` (of `table_id`) matches
    `n_matched` of its values in `candidate_column_id`, `joinability` = n_matched / its values.
    Rank 0 marks that the list was computed (it has no candidate), so a column whose list is empty
    is told apart from one never computed; its joinability is -1 when the list was over the work
    bound (`lists.OVER_BUDGET`)."""

    __tablename__ = "pexeso_lists"
    # ids are unbounded text: the key is column_id's digest (`text_key`), as in the entity tables
    column_key: Mapped[str] = mapped_column(String(TEXT_KEY_LENGTH), primary_key=True, default=key_default("column_id"))
    rank: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    column_id: Mapped[str] = mapped_column(Text)
    table_id: Mapped[str] = mapped_column(Text)
    candidate_column_id: Mapped[str | None] = mapped_column(Text)
    candidate_table_id: Mapped[str | None] = mapped_column(Text)
    candidate_header: Mapped[str | None] = mapped_column(Text)
    n_matched: Mapped[int] = mapped_column(Integer)
    joinability: Mapped[float] = mapped_column(Float)

    __table_args__ = (
        text_index("ix_pexeso_lists_table_id", "table_id"),
        text_index("ix_pexeso_lists_candidate", "candidate_table_id"),
    )
