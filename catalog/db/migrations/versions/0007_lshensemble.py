"""lshensemble: column signatures and index facts

Revision ID: 0007_lshensemble
Revises: 0006_pg_clean
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_lshensemble"
down_revision: str | Sequence[str] | None = "0006_pg_clean"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "lshe_columns",
        sa.Column("row_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("column_id", sa.Text(), nullable=False),
        sa.Column("table_id", sa.Text(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("signature", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("row_id", name=op.f("pk_lshe_columns")),
    )
    op.create_index("ix_lshe_columns_column_id", "lshe_columns", ["column_id"], postgresql_using="hash")
    op.create_index("ix_lshe_columns_table_id", "lshe_columns", ["table_id"], postgresql_using="hash")
    op.create_table(
        "lshe_meta",
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_lshe_meta")),
    )


def downgrade() -> None:
    op.drop_table("lshe_meta")
    op.drop_index("ix_lshe_columns_table_id", table_name="lshe_columns")
    op.drop_index("ix_lshe_columns_column_id", table_name="lshe_columns")
    op.drop_table("lshe_columns")
