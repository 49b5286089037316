"""Seconds per named part of a stage, for the stage's report: `juncture index` prints them and the
benchmarks add them up, so a slow stage says which of its parts to look at."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class PartTimes:
    """Wall seconds per part, summed when a part runs more than once."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - started
            self.seconds[name] = round(self.seconds.get(name, 0.0) + spent, 3)
