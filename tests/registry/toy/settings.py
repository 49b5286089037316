"""The toy family's settings: `[index.toy]`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToySettings:
    rebuild_always: bool = False  # report a rebuild as due after every batch
