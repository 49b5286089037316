"""Auto-Join in the catalog database: the precomputed transformation lists (`lists.py`), published
by `lake_index` (`spark_jobs.autojoin.publish`) and read by `juncture lookup joinable --transform`.

* `autojoin_lists`: per textual column, its candidate columns (rare q-grams shared, little exact
  overlap) with the program Auto-Join learned for the pair, if any, and its coverage;
* `autojoin_meta`: key/value facts: the lists' state (current, or partial over the work bound)
  and the settings they were made with (lists made with other settings are made again).
"""

from __future__ import annotations

from sqlalchemy import Boolean, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from catalog.db.models.base import TEXT_KEY_LENGTH, Base, key_default, text_index


class TransformList(Base):
    """One entry of a column's precomputed transformation list: `candidate_column_id` shares
    `n_shared` rare q-grams with `column_id`; `program` (None: Auto-Join found none) turns the
    subject's values into the candidate's (`direction` "to_candidate") or the candidate's into the
    subject's ("from_candidate"), joining `coverage` key rows, `fuzzy` when the fuzzy step added
    some. Rank 0 marks that the list was computed; its coverage is -1 while the list waits for a
    publish within the work bound (`lists.PENDING`)."""

    __tablename__ = "autojoin_lists"
    column_key: Mapped[str] = mapped_column(String(TEXT_KEY_LENGTH), primary_key=True, default=key_default("column_id"))
    rank: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    column_id: Mapped[str] = mapped_column(Text)
    table_id: Mapped[str] = mapped_column(Text)
    candidate_column_id: Mapped[str | None] = mapped_column(Text)
    candidate_table_id: Mapped[str | None] = mapped_column(Text)
    candidate_header: Mapped[str | None] = mapped_column(Text)
    n_shared: Mapped[int] = mapped_column(Integer)
    program: Mapped[str | None] = mapped_column(Text)
    direction: Mapped[str | None] = mapped_column(String(16))
    coverage: Mapped[int] = mapped_column(Integer)
    fuzzy: Mapped[bool] = mapped_column(Boolean)

    __table_args__ = (
        text_index("ix_autojoin_lists_table_id", "table_id"),
        text_index("ix_autojoin_lists_candidate", "candidate_table_id"),
    )


class AutojoinMeta(Base):
    """`lists`: the lists' state and parameters (JSON)."""

    __tablename__ = "autojoin_meta"
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[str] = mapped_column(Text)
