"""relations: joinable and unionable answers, catalog state

Reserved slot in the migration chain, filled by the issue that owns these tables.

Revision ID: 0005_relations
Revises: 0004_josie
Create Date: 2026-11-22
"""
from __future__ import annotations

from collections.abc import Sequence

revision: str = "0005_relations"
down_revision: str | Sequence[str] | None = "0004_josie"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
