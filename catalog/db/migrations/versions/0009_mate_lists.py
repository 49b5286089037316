"""mate: precomputed n-ary join lists per table and composite key

Revision ID: 0009_mate_lists
Revises: 0008_mate
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_mate_lists"
down_revision: str | Sequence[str] | None = "0008_mate"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mate_lists",
        sa.Column("table_id", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("rank", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("candidate_table_id", sa.Text(), nullable=True),
        sa.Column("joinability", sa.Integer(), nullable=False),
        sa.Column("mapping", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("table_id", "key", "rank", name=op.f("pk_mate_lists")),
    )
    op.create_index("ix_mate_lists_candidate", "mate_lists", ["candidate_table_id"], postgresql_using="hash")


def downgrade() -> None:
    op.drop_table("mate_lists")
