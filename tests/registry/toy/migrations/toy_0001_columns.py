"""toy family: its catalog table (a branch of its own).

Revision ID: toy_0001
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "toy_0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = ("toy",)
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "toy_columns",
        sa.Column("column_id", sa.Text(), primary_key=True),
        sa.Column("table_id", sa.Text(), nullable=False, index=True),
        sa.Column("n_tokens", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("toy_columns")
