"""What every command handler gets: the settings, and the catalog opened on first use."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Engine

from catalog.core.settings import Settings


@dataclass
class CliContext:
    settings: Settings
    _engine: Engine | None = field(default=None, repr=False)

    @property
    def engine(self) -> Engine:
        """The catalog database, created or upgraded to the current schema on first use."""
        if self._engine is None:
            from catalog.db.engine import open_catalog

            self._engine = open_catalog(self.settings.catalog_url)
        return self._engine
