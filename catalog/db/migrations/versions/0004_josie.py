"""josie: token dictionary, integer sets, posting lists, cost constants

Revision ID: 0004_josie
Revises: 0003_profiles_keys
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from catalog.db.models.base import PackedInt32Array

revision: str = "0004_josie"
down_revision: str | Sequence[str] | None = "0003_profiles_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "josie_tokens",
        sa.Column("token", sa.Text(), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=False),
        sa.Column("frequency", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("token", name=op.f("pk_josie_tokens")),
    )
    with op.batch_alter_table("josie_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_josie_tokens_token_id"), ["token_id"], unique=True)

    op.create_table(
        "josie_sets",
        sa.Column("set_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("column_id", sa.Text(), nullable=False),
        sa.Column("table_id", sa.Text(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("tokens", PackedInt32Array(), nullable=False),
        sa.PrimaryKeyConstraint("set_id", name=op.f("pk_josie_sets")),
    )
    with op.batch_alter_table("josie_sets", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_josie_sets_column_id"), ["column_id"], unique=True)
        batch_op.create_index(batch_op.f("ix_josie_sets_table_id"), ["table_id"], unique=False)

    op.create_table(
        "josie_postings",
        sa.Column("token_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("set_ids", PackedInt32Array(), nullable=False),
        sa.Column("positions", PackedInt32Array(), nullable=False),
        sa.Column("sizes", PackedInt32Array(), nullable=False),
        sa.PrimaryKeyConstraint("token_id", name=op.f("pk_josie_postings")),
    )
    op.create_table(
        "josie_cost_model",
        sa.Column("database", sa.Text(), nullable=False),
        sa.Column("read_list_a", sa.Float(), nullable=False),
        sa.Column("read_list_b", sa.Float(), nullable=False),
        sa.Column("read_set_a", sa.Float(), nullable=False),
        sa.Column("read_set_b", sa.Float(), nullable=False),
        sa.Column("fitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("database", name=op.f("pk_josie_cost_model")),
    )
    op.create_table(
        "josie_meta",
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_josie_meta")),
    )


def downgrade() -> None:
    op.drop_table("josie_meta")
    op.drop_table("josie_cost_model")
    op.drop_table("josie_postings")
    with op.batch_alter_table("josie_sets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_josie_sets_table_id"))
        batch_op.drop_index(batch_op.f("ix_josie_sets_column_id"))
    op.drop_table("josie_sets")
    with op.batch_alter_table("josie_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_josie_tokens_token_id"))
    op.drop_table("josie_tokens")
