"""`juncture crawl`: crawl configured sources or a lake folder into bronze."""

from __future__ import annotations

import argparse

from catalog.cli.commands._stub import not_available


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("crawl", help="crawl configured sources or a lake folder")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--source", metavar="NAME", help="only this configured source")
    which.add_argument("--dir", metavar="PATH", help="crawl this lake folder")
    p.set_defaults(handler=not_available("crawl"))
