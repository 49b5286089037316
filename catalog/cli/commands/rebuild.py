"""`juncture rebuild`: duplicate-group rebuild and LSH repartition."""

from __future__ import annotations

import argparse

from catalog.cli.commands._stub import not_available


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rebuild", help="rebuild duplicate groups and LSH partitions")
    p.set_defaults(handler=not_available("rebuild"))
