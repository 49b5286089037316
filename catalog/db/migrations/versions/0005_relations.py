"""relations: joinable and unionable answers

Revision ID: 0005_relations
Revises: 0004_josie
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_relations"
down_revision: str | Sequence[str] | None = "0004_josie"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "joinable",
        sa.Column("column_id", sa.String(length=4096), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("table_id", sa.String(length=2048), nullable=False),
        sa.Column("candidate_column_id", sa.String(length=4096), nullable=False),
        sa.Column("candidate_table_id", sa.String(length=2048), nullable=False),
        sa.Column("candidate_header", sa.Text(), nullable=False),
        sa.Column("overlap", sa.BigInteger(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("candidate_size", sa.BigInteger(), nullable=False),
        sa.Column("containment", sa.Float(), nullable=False),
        sa.Column("candidate_containment", sa.Float(), nullable=False),
        sa.Column("jaccard", sa.Float(), nullable=False),
        sa.Column("est_join_size", sa.Float(), nullable=False),
        sa.Column("is_key", sa.Boolean(), nullable=False),
        sa.Column("candidate_is_key", sa.Boolean(), nullable=False),
        sa.Column("direction", sa.String(length=16), nullable=False),
        sa.Column("exact", sa.Boolean(), nullable=False),
        sa.Column("method", sa.String(length=32), nullable=False),
        sa.Column("index_version", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["column_id"], ["columns.column_id"], name=op.f("fk_joinable_column_id_columns"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("column_id", "rank", name=op.f("pk_joinable")),
    )
    with op.batch_alter_table("joinable", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_joinable_candidate_table_id"), ["candidate_table_id"], unique=False)

    op.create_table(
        "unionable",
        sa.Column("table_id", sa.String(length=2048), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("candidate_table_id", sa.String(length=2048), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("n_aligned", sa.Integer(), nullable=False),
        sa.Column("alignment", sa.JSON(), nullable=False),
        sa.Column("exact", sa.Boolean(), nullable=False),
        sa.Column("method", sa.String(length=32), nullable=False),
        sa.Column("index_version", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["table_id"], ["tables.table_id"], name=op.f("fk_unionable_table_id_tables"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("table_id", "rank", name=op.f("pk_unionable")),
    )
    with op.batch_alter_table("unionable", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_unionable_candidate_table_id"), ["candidate_table_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("unionable", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_unionable_candidate_table_id"))
    op.drop_table("unionable")
    with op.batch_alter_table("joinable", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_joinable_candidate_table_id"))
    op.drop_table("joinable")
