"""crawl runs and the datasets they could not read, with the reason

Revision ID: 0011_crawl_runs
Revises: 0010_pexeso
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_crawl_runs"
down_revision: str | Sequence[str] | None = "0010_pexeso"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "crawl_runs",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sources", sa.JSON(), nullable=False),
        sa.Column("listed", sa.Integer(), nullable=False),
        sa.Column("new", sa.Integer(), nullable=False),
        sa.Column("changed", sa.Integer(), nullable=False),
        sa.Column("deleted", sa.Integer(), nullable=False),
        sa.Column("unchanged", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("batch_id", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_crawl_runs")),
    )
    op.create_index(op.f("ix_crawl_runs_finished_at"), "crawl_runs", ["finished_at"])
    op.create_table(
        "crawl_failures",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("dataset", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["crawl_runs.run_id"], name=op.f("fk_crawl_failures_run_id_crawl_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "position", name=op.f("pk_crawl_failures")),
    )


def downgrade() -> None:
    op.drop_table("crawl_failures")
    op.drop_index(op.f("ix_crawl_runs_finished_at"), table_name="crawl_runs")
    op.drop_table("crawl_runs")
