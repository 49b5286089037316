"""MATE's settings: `[index.mate]` in juncture.toml (read through `Settings.index.family("mate")`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from catalog.core.errors import SettingsError

if TYPE_CHECKING:
    from catalog.core.settings import Settings
    from catalog.core.xash import XashSpec

BITS = (128, 256, 512)  # the XASH sizes (`catalog.core.xash.BETA`)


@dataclass(frozen=True)
class MateSettings:
    # XASH hash size in bits (128, 256 or 512) and characters encoded per value. Changing either
    # makes every stored super key incomparable with a new query's: the next update re-hashes the
    # whole lake rather than mix the two.
    bits: int = 128
    n_chars: int = 5

    def __post_init__(self) -> None:
        if self.bits not in BITS:
            raise SettingsError("juncture.toml", "index.mate.bits", f"must be one of {list(BITS)}, got {self.bits!r}")
        if not isinstance(self.n_chars, int) or not 1 <= self.n_chars <= 37:
            raise SettingsError("juncture.toml", "index.mate.n_chars", f"out of range: {self.n_chars!r}")

    @property
    def spec(self) -> XashSpec:
        from catalog.core.xash import XashSpec  # deferred: every command reads the settings; pyarrow loads to hash

        return XashSpec(bits=self.bits, n_chars=self.n_chars)


def mate_settings(settings: Settings) -> MateSettings:
    """MATE's settings out of the one settings object."""
    out: MateSettings = settings.index.family("mate")
    return out
