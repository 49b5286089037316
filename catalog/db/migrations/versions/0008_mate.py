"""mate: n-ary join index (tables, posting lists, row super keys, facts)

Revision ID: 0008_mate
Revises: 0007_lshensemble
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_mate"
down_revision: str | Sequence[str] | None = "0007_lshensemble"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mate_tables",
        sa.Column("table_ref", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("table_id", sa.Text(), nullable=False),
        sa.Column("headers", sa.Text(), nullable=False),
        sa.Column("n_rows", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("table_ref", name=op.f("pk_mate_tables")),
    )
    op.create_index("ix_mate_tables_table_id", "mate_tables", ["table_id"], postgresql_using="hash")
    op.create_table(
        "mate_postings",
        sa.Column("row_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("token", sa.Text(), nullable=False),
        sa.Column("table_ref", sa.Integer(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("rows", sa.LargeBinary(), nullable=False),
        sa.Column("cols", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("row_id", name=op.f("pk_mate_postings")),
    )
    op.create_index("ix_mate_postings_token", "mate_postings", ["token"], postgresql_using="hash")
    op.create_index("ix_mate_postings_table_ref", "mate_postings", ["table_ref"])
    op.create_table(
        "mate_row_keys",
        sa.Column("table_ref", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("block", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("keys", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("table_ref", "block", name=op.f("pk_mate_row_keys")),
    )
    op.create_table(
        "mate_meta",
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_mate_meta")),
    )


def downgrade() -> None:
    op.drop_table("mate_meta")
    op.drop_table("mate_row_keys")
    op.drop_index("ix_mate_postings_table_ref", table_name="mate_postings")
    op.drop_index("ix_mate_postings_token", table_name="mate_postings")
    op.drop_table("mate_postings")
    op.drop_index("ix_mate_tables_table_id", table_name="mate_tables")
    op.drop_table("mate_tables")
