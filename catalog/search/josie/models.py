"""JOSIE index in the catalog database: what `catalog.search.josie` reads to answer join searches online.

Published from the lake's josie_* tables by `spark_jobs.josie.publish` (incrementally: only the
tokens, posting lists and sets an index version changed). Arrays are little-endian int32 BLOBs
(PackedInt32Array) on SQLite and PostgreSQL alike. `group_id >= DIRTY_GROUP_BASE` (2**30) marks a
list changed since the last rebuild, alone in its group (spark_jobs/josie/tables.py).
"""

from __future__ import annotations

import datetime as dt

import numpy as np
from sqlalchemy import Float, Integer, Text
from sqlalchemy.orm import Mapped, mapped_column

from catalog.db.models.base import Base, PackedInt32Array


class JosieToken(Base):
    """The dictionary: a token, its id (= rank in the global order), document frequency, group."""

    __tablename__ = "josie_tokens"
    token: Mapped[str] = mapped_column(Text, primary_key=True)
    token_id: Mapped[int] = mapped_column(Integer, unique=True, index=True)
    frequency: Mapped[int] = mapped_column(Integer)
    group_id: Mapped[int] = mapped_column(Integer)


class JosieSet(Base):
    """A column's set as token ids sorted ascending."""

    __tablename__ = "josie_sets"
    set_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    column_id: Mapped[str] = mapped_column(Text, unique=True, index=True)
    table_id: Mapped[str] = mapped_column(Text, index=True)
    size: Mapped[int] = mapped_column(Integer)
    tokens: Mapped[np.ndarray] = mapped_column(PackedInt32Array)


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
