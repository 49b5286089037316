"""What every command handler gets: the settings, and the catalog opened on first use."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from catalog.core.settings import Settings

if TYPE_CHECKING:
    from sqlalchemy import Engine


@dataclass
class CliContext:
    settings: Settings
    _engine: Engine | None = field(default=None, repr=False)

    @property
    def engine(self) -> Engine:
        """The catalog database, created or upgraded to the current schema on first use."""
        if self._engine is None:
            from catalog.db.engine import open_catalog  # deferred: only the command that needs it loads it

            self._engine = open_catalog(self.settings.catalog_url)
        return self._engine

    @contextlib.contextmanager
    def writing(self, owner: str) -> Iterator[None]:
        """Hold the lake lock for a command that writes the lake; say so if it has to wait."""
        from spark_jobs.lake.lock import lake_lock  # deferred: only the commands that write load the lake layer

        def waiting(holder: str) -> None:
            print(
                f"juncture: waiting up to {self.settings.lock_wait_s:.0f}s for the lake lock held by {holder}",
                file=sys.stderr,
            )

        with lake_lock(self.settings, f"juncture {owner}", on_wait=waiting):
            yield
