"""`juncture demo`: the main job on embedded defaults."""

from __future__ import annotations

import argparse

from catalog.cli.context import CliContext


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the main job on embedded defaults and show a few lookups")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    from catalog.cli.demo import run_demo  # deferred: only the command that needs it loads it

    return run_demo(ctx)
