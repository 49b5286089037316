"""pexeso: precomputed semantic join lists per embedded column

Revision ID: 0012_pexeso_lists
Revises: 0011_crawl_runs
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_pexeso_lists"
down_revision: str | Sequence[str] | None = "0011_crawl_runs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "pexeso_lists",
        sa.Column("column_key", sa.String(length=32), nullable=False),
        sa.Column("rank", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("column_id", sa.Text(), nullable=False),
        sa.Column("table_id", sa.Text(), nullable=False),
        sa.Column("candidate_column_id", sa.Text(), nullable=True),
        sa.Column("candidate_table_id", sa.Text(), nullable=True),
        sa.Column("candidate_header", sa.Text(), nullable=True),
        sa.Column("n_matched", sa.Integer(), nullable=False),
        sa.Column("joinability", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("column_key", "rank", name=op.f("pk_pexeso_lists")),
    )
    op.create_index("ix_pexeso_lists_table_id", "pexeso_lists", ["table_id"], postgresql_using="hash")
    op.create_index("ix_pexeso_lists_candidate", "pexeso_lists", ["candidate_table_id"], postgresql_using="hash")


def downgrade() -> None:
    op.drop_table("pexeso_lists")
