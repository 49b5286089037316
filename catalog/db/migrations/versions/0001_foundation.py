"""foundation: sources, tables, columns, profiles, keys, publish runs

Revision ID: 0001_foundation
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001_foundation"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "publish_runs",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("batch_id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column("index_version", sa.Integer(), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_publish_runs")),
    )
    with op.batch_alter_table("publish_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_publish_runs_batch_id"), ["batch_id"], unique=False)

    op.create_table(
        "sources",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("location", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_sources")),
    )
    op.create_table(
        "tables",
        sa.Column("table_id", sa.String(length=2048), nullable=False),
        sa.Column("source_name", sa.String(length=200), nullable=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("format", sa.String(length=32), nullable=True),
        sa.Column("n_rows", sa.Integer(), nullable=False),
        sa.Column("n_columns", sa.Integer(), nullable=False),
        sa.Column("content_sha256", sa.String(length=64), nullable=True),
        sa.Column("source_updated_at", sa.String(length=64), nullable=True),
        sa.Column("keys_search_complete", sa.Boolean(), nullable=True),
        sa.Column("batch_id", sa.String(length=64), nullable=True),
        sa.Column("index_version", sa.Integer(), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("table_id", name=op.f("pk_tables")),
    )
    with op.batch_alter_table("tables", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tables_source_name"), ["source_name"], unique=False)

    op.create_table(
        "columns",
        sa.Column("column_id", sa.String(length=4096), nullable=False),
        sa.Column("table_id", sa.String(length=2048), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("header", sa.Text(), nullable=False),
        sa.Column("portal_type", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["table_id"], ["tables.table_id"], name=op.f("fk_columns_table_id_tables"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("column_id", name=op.f("pk_columns")),
    )
    with op.batch_alter_table("columns", schema=None) as batch_op:
        batch_op.create_index("ix_columns_table_id_position", ["table_id", "position"], unique=False)

    op.create_table(
        "keys",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("table_id", sa.String(length=2048), nullable=False),
        sa.Column("columns", sa.JSON(), nullable=False),
        sa.Column("exact", sa.Boolean(), nullable=False),
        sa.Column("uniqueness", sa.Float(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("batch_id", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["table_id"], ["tables.table_id"], name=op.f("fk_keys_table_id_tables"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_keys")),
    )
    with op.batch_alter_table("keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_keys_table_id"), ["table_id"], unique=False)

    op.create_table(
        "column_profiles",
        sa.Column("column_id", sa.String(length=4096), nullable=False),
        sa.Column("row_count", sa.Integer(), nullable=False),
        sa.Column("null_count", sa.Integer(), nullable=False),
        sa.Column("empty_count", sa.Integer(), nullable=False),
        sa.Column("distinct_count", sa.Integer(), nullable=False),
        sa.Column("distinct_exact", sa.Boolean(), nullable=False),
        sa.Column("distinct_error", sa.Float(), nullable=True),
        sa.Column("inferred_type", sa.String(length=32), nullable=False),
        sa.Column("type_share", sa.Float(), nullable=False),
        sa.Column("portal_type", sa.String(length=64), nullable=True),
        sa.Column("min_value", sa.Text(), nullable=True),
        sa.Column("max_value", sa.Text(), nullable=True),
        sa.Column("length_min", sa.Integer(), nullable=True),
        sa.Column("length_mean", sa.Float(), nullable=True),
        sa.Column("length_max", sa.Integer(), nullable=True),
        sa.Column("top_values", sa.JSON(), nullable=False),
        sa.Column("histogram", sa.JSON(), nullable=False),
        sa.Column("uniqueness", sa.Float(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("batch_id", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["column_id"], ["columns.column_id"], name=op.f("fk_column_profiles_column_id_columns"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("column_id", name=op.f("pk_column_profiles")),
    )


def downgrade() -> None:
    op.drop_table("column_profiles")
    with op.batch_alter_table("keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_keys_table_id"))

    op.drop_table("keys")
    with op.batch_alter_table("columns", schema=None) as batch_op:
        batch_op.drop_index("ix_columns_table_id_position")

    op.drop_table("columns")
    with op.batch_alter_table("tables", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tables_source_name"))

    op.drop_table("tables")
    op.drop_table("sources")
    with op.batch_alter_table("publish_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_publish_runs_batch_id"))

    op.drop_table("publish_runs")
