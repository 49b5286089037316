"""JOSIE index in the catalog database: what `catalog.search.josie` reads to answer join searches online.

Published from the lake's josie_* tables by `spark_jobs.josie.publish` (incrementally: only the
tokens, posting lists and sets an index version changed). Arrays are little-endian int32 BLOBs
(PackedInt32Array) on SQLite and PostgreSQL alike. `group_id >= DIRTY_GROUP_BASE` (2**30) marks a
list changed since the last rebuild, alone in its group (spark_jobs/josie/tables.py).

Tokens have no length limit, so the dictionary is keyed by `token_key`, a fixed-size digest of the
token (`text_key`), with the token itself stored unindexed: a lookup reads the rows of the query
tokens' keys and keeps those whose stored token equals the query token exactly, so even a digest
collision can never return a wrong id. Column and table ids are looked up through hash indexes on
PostgreSQL for the same reason (`text_index`).
"""

from __future__ import annotations

import datetime as dt

import numpy as np
from sqlalchemy import Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from catalog.db.models.base import TEXT_KEY_LENGTH, Base, PackedInt32Array, key_default, text_index


class JosieToken(Base):
    """The dictionary: a token, its id (= rank in the global order), document frequency, group."""

    __tablename__ = "josie_tokens"
    token_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    token_key: Mapped[str] = mapped_column(String(TEXT_KEY_LENGTH), default=key_default("token"))
    token: Mapped[str] = mapped_column(Text)
    frequency: Mapped[int] = mapped_column(Integer)
    group_id: Mapped[int] = mapped_column(Integer)

    __table_args__ = (Index("ix_josie_tokens_token_key", "token_key"),)


class JosieSet(Base):
    """A column's set as token ids sorted ascending."""

    __tablename__ = "josie_sets"
    set_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    column_id: Mapped[str] = mapped_column(Text)
    table_id: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(Integer)
    tokens: Mapped[np.ndarray] = mapped_column(PackedInt32Array)

    __table_args__ = (
        text_index("ix_josie_sets_column_id", "column_id"),
        text_index("ix_josie_sets_table_id", "table_id"),
    )


class JosiePosting(Base):
    """A token's posting list: parallel arrays sorted by set id; positions 0-based."""

    __tablename__ = "josie_postings"
    token_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    set_ids: Mapped[np.ndarray] = mapped_column(PackedInt32Array)
    positions: Mapped[np.ndarray] = mapped_column(PackedInt32Array)
    sizes: Mapped[np.ndarray] = mapped_column(PackedInt32Array)


class JosieCostModel(Base):
    """Read-cost lines fitted on one database: list of length f costs a + b*f, m set tokens a + b*m (s)."""

    __tablename__ = "josie_cost_model"
    database: Mapped[str] = mapped_column(Text, primary_key=True)
    read_list_a: Mapped[float] = mapped_column(Float)
    read_list_b: Mapped[float] = mapped_column(Float)
    read_set_a: Mapped[float] = mapped_column(Float)
    read_set_b: Mapped[float] = mapped_column(Float)
    fitted_at: Mapped[dt.datetime]


class JosieMeta(Base):
    """Key/value facts about the published index (index_version, n_lists, dirty_share, ...)."""

    __tablename__ = "josie_meta"
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[str] = mapped_column(Text)
