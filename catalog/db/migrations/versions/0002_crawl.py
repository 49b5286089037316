"""crawl (no schema change)

Kept so that catalogs already stamped with this revision upgrade through it.

Revision ID: 0002_crawl
Revises: 0001_foundation
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0002_crawl"
down_revision: str | Sequence[str] | None = "0001_foundation"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
