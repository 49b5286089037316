"""`juncture update`: trigger an incremental update that adds or deletes tables."""

from __future__ import annotations

import argparse

from catalog.cli.commands._stub import not_available


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("update", help="add or delete tables (triggers lake_index)")
    p.add_argument("--add", nargs="+", default=[], metavar="PATH", help="table files to add")
    p.add_argument("--delete", nargs="+", default=[], metavar="TABLE_ID", help="table ids to delete")
    p.set_defaults(handler=not_available("update"))
