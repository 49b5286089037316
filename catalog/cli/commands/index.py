"""`juncture index`: apply pending change batches (or rebuild everything with --full)."""

from __future__ import annotations

import argparse

from catalog.cli.commands._stub import not_available


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="apply pending changes to the indexes and publish")
    p.add_argument("--full", action="store_true", help="rebuild every index from the lake")
    p.set_defaults(handler=not_available("index"))
