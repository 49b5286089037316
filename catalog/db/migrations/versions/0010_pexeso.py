"""pexeso: semantic join index (embedded columns, facts)

Revision ID: 0010_pexeso
Revises: 0009_mate_lists
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_pexeso"
down_revision: str | Sequence[str] | None = "0009_mate_lists"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "pexeso_columns",
        sa.Column("column_ref", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("column_id", sa.Text(), nullable=False),
        sa.Column("table_id", sa.Text(), nullable=False),
        sa.Column("header", sa.Text(), nullable=False),
        sa.Column("n_values", sa.Integer(), nullable=False),
        sa.Column("value_list", sa.Text(), nullable=False),
        sa.Column("vectors", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("column_ref", name=op.f("pk_pexeso_columns")),
    )
    op.create_index("ix_pexeso_columns_table_id", "pexeso_columns", ["table_id"], postgresql_using="hash")
    op.create_table(
        "pexeso_meta",
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_pexeso_meta")),
    )


def downgrade() -> None:
    op.drop_table("pexeso_meta")
    op.drop_index("ix_pexeso_columns_table_id", table_name="pexeso_columns")
    op.drop_table("pexeso_columns")
