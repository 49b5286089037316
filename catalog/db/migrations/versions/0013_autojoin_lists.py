"""autojoin: precomputed transformation join lists per textual column

Revision ID: 0013_autojoin_lists
Revises: 0012_pexeso_lists
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_autojoin_lists"
down_revision: str | Sequence[str] | None = "0012_pexeso_lists"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "autojoin_lists",
        sa.Column("column_key", sa.String(length=32), nullable=False),
        sa.Column("rank", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("column_id", sa.Text(), nullable=False),
        sa.Column("table_id", sa.Text(), nullable=False),
        sa.Column("candidate_column_id", sa.Text(), nullable=True),
        sa.Column("candidate_table_id", sa.Text(), nullable=True),
        sa.Column("candidate_header", sa.Text(), nullable=True),
        sa.Column("n_shared", sa.Integer(), nullable=False),
        sa.Column("program", sa.Text(), nullable=True),
        sa.Column("direction", sa.String(length=16), nullable=True),
        sa.Column("coverage", sa.Integer(), nullable=False),
        sa.Column("fuzzy", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("column_key", "rank", name=op.f("pk_autojoin_lists")),
    )
    op.create_index("ix_autojoin_lists_table_id", "autojoin_lists", ["table_id"], postgresql_using="hash")
    op.create_index("ix_autojoin_lists_candidate", "autojoin_lists", ["candidate_table_id"], postgresql_using="hash")
    op.create_table(
        "autojoin_meta",
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_autojoin_meta")),
    )


def downgrade() -> None:
    op.drop_table("autojoin_meta")
    op.drop_table("autojoin_lists")
