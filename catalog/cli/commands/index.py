"""`juncture index`: apply pending change batches (or rebuild everything with --full)."""

from __future__ import annotations

import argparse

from catalog.cli.context import CliContext
from catalog.errors import NotAvailableError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="apply pending changes to the indexes and publish")
    p.add_argument("--full", action="store_true", help="rebuild every index from the lake")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    if args.full:
        raise NotAvailableError("index --full")
    from spark_jobs.pipeline import index_pending
    from spark_jobs.spark_session import get_spark

    ctx.engine  # noqa: B018 - create or upgrade the catalog before the jobs publish into it
    spark = get_spark(ctx.settings, "juncture.index")
    reports = index_pending(spark, ctx.settings)
    if not reports:
        print("nothing to index")
    for r in reports:
        print(f"indexed batch {r.batch_id}: +{r.n_added} -{r.n_deleted} tables, stages {r.seconds}")
    return 0
