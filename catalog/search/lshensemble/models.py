"""LSH Ensemble in the catalog database: what `catalog.search.lshensemble` loads to answer
containment searches online, without Spark.

Published from the lake's `lshe_*` tables by `spark_jobs.lshensemble.publish`: one row per column
with its distinct-token count and MinHash signature (num_perm little-endian uint32, as the lake
holds it), and key/value facts (index version, the MinHash spec every signature was made with,
the partition upper bounds). A column's partition follows from its size and the bounds; band keys
are derived from the signatures when the index is loaded (`catalog.search.lshensemble.index`).
Exact containment for verification comes from JOSIE's stored sets (`josie_sets`), published in
the same transaction.
"""

from __future__ import annotations

from sqlalchemy import Integer, LargeBinary, Text
from sqlalchemy.orm import Mapped, mapped_column

from catalog.db.models.base import Base, text_index


class LsheColumn(Base):
    """A column's MinHash signature and size (distinct tokens)."""

    __tablename__ = "lshe_columns"
    row_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    column_id: Mapped[str] = mapped_column(Text)
    table_id: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(Integer)
    signature: Mapped[bytes] = mapped_column(LargeBinary)

    __table_args__ = (
        text_index("ix_lshe_columns_column_id", "column_id"),
        text_index("ix_lshe_columns_table_id", "table_id"),
    )


class LsheMeta(Base):
    """Key/value facts about the published index: index_version, spec (JSON), uppers (JSON), ..."""

    __tablename__ = "lshe_meta"
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[str] = mapped_column(Text)
