"""mate: on SQLite, the postings indexed by (token, table_ref, n) instead of the token alone

A search reads a token's lists in some tables (the other key values of its candidate rows) and
sums each token's items (the initial column's choice). SQLite keeps a list's packed arrays inline
in its row, so with an index on the token alone both reads visited every list's row of the token
in every table; the covering index answers them from the index. PostgreSQL is unchanged (its
arrays are out of line, and its text lookups are hash indexes: a token is unbounded).

Revision ID: 0016_mate_postings_covering
Revises: 0015_pexeso_partitions
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0016_mate_postings_covering"
down_revision: str | Sequence[str] | None = "0015_pexeso_partitions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.create_index("ix_mate_postings_token_table", "mate_postings", ["token", "table_ref", "n"])
    op.drop_index("ix_mate_postings_token", table_name="mate_postings")


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.create_index("ix_mate_postings_token", "mate_postings", ["token"])
    op.drop_index("ix_mate_postings_token_table", table_name="mate_postings")
