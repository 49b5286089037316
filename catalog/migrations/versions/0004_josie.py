"""josie: token dictionary, integer sets, posting lists, cost constants

Reserved slot in the migration chain, filled by the issue that owns these tables.

Revision ID: 0004_josie
Revises: 0003_profiles_keys
Create Date: 2026-11-22
"""
from __future__ import annotations

from collections.abc import Sequence

revision: str = "0004_josie"
down_revision: str | Sequence[str] | None = "0003_profiles_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
