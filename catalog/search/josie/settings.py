"""JOSIE's settings: `[index.josie]` in juncture.toml (read through `Settings.index.family("josie")`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from catalog.core.settings import Settings


@dataclass(frozen=True)
class JosieSettings:
    # A rebuild (duplicate groups re-formed, token ids re-sorted) is due when more than this share
    # of the posting lists left their group through incremental updates.
    dirty_threshold: float = 0.2
    # The incremental update: "auto" (on the driver while the index has at most `driver_max_lists`
    # posting lists, else Spark), "arrow" (always the driver) or "spark".
    update_engine: Literal["auto", "arrow", "spark"] = "auto"
    driver_max_lists: int = 5_000_000


def josie_settings(settings: Settings) -> JosieSettings:
    """JOSIE's settings out of the one settings object."""
    out: JosieSettings = settings.index.family("josie")
    return out
