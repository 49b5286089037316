"""`juncture crawl`: crawl configured sources or a lake folder into bronze.

A progress bar goes to stderr; the summary (listed, new, changed, deleted, failed, bytes, and
every failed dataset with its reason) to stdout. Exit 0 when the crawl itself completed, even if
some datasets failed."""

from __future__ import annotations

import argparse
import os
import sys

from catalog.cli.context import CliContext
from catalog.core.errors import UserError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("crawl", help="crawl configured sources or a lake folder")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--source", metavar="NAME", help="only this configured source")
    which.add_argument("--dir", metavar="PATH", help="crawl this lake folder")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    from tqdm import tqdm  # deferred: only the command that needs it loads it

    from spark_jobs.crawl.crawl import format_report, run_crawl  # deferred: only the command that needs it loads it

    if args.dir is not None and "://" not in args.dir and not os.path.isdir(args.dir):
        raise UserError(f"--dir {args.dir!r} is not a directory")
    bar = None

    def progress(done: int, total: int, table_id: str) -> None:
        nonlocal bar
        if args.no_progress:
            return
        if bar is None:
            bar = tqdm(total=total, file=sys.stderr, unit="table", desc="crawl", leave=False)
        bar.set_postfix_str(table_id[-40:], refresh=False)
        bar.update(1)

    try:
        report = run_crawl(ctx.settings, source_name=args.source, folder=args.dir, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    print(format_report(report))
    return 0
