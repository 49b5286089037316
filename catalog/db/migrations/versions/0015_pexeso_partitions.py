"""pexeso: the columns' partitions by JSD clustering under the memory budget

Each column records its partition and its divergence from the partition's centre; each partition
its box in pivot space and its centre histogram. An index published before has no partitions:
the next publish partitions it.

Revision ID: 0015_pexeso_partitions
Revises: 0014_mate_list_versions
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_pexeso_partitions"
down_revision: str | Sequence[str] | None = "0014_mate_list_versions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("pexeso_columns") as batch:
        batch.add_column(sa.Column("partition", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("divergence", sa.Float(), nullable=True))
    op.create_index("ix_pexeso_columns_partition", "pexeso_columns", ["partition"])
    op.create_table(
        "pexeso_partitions",
        sa.Column("partition", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("low", sa.LargeBinary(), nullable=False),
        sa.Column("high", sa.LargeBinary(), nullable=False),
        sa.Column("centre_bins", sa.LargeBinary(), nullable=False),
        sa.Column("centre_probs", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("partition", name=op.f("pk_pexeso_partitions")),
    )


def downgrade() -> None:
    op.drop_table("pexeso_partitions")
    op.drop_index("ix_pexeso_columns_partition", table_name="pexeso_columns")
    with op.batch_alter_table("pexeso_columns") as batch:
        batch.drop_column("divergence")
        batch.drop_column("partition")
