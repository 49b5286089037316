"""mate: each precomputed n-ary list carries the lake version that last changed it

The lists are computed in the lake now; the publish copies a list when its version differs from
the catalog's. Lists published before have no version, so the next publish replaces them.

Revision ID: 0014_mate_list_versions
Revises: 0013_autojoin_lists
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_mate_list_versions"
down_revision: str | Sequence[str] | None = "0013_autojoin_lists"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("mate_lists") as batch:
        batch.add_column(sa.Column("version", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("mate_lists") as batch:
        batch.drop_column("version")
