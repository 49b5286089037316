"""profiles and keys (no schema change)

Kept so that catalogs already stamped with this revision upgrade through it.

Revision ID: 0003_profiles_keys
Revises: 0002_crawl
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0003_profiles_keys"
down_revision: str | Sequence[str] | None = "0002_crawl"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
