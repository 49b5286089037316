"""`juncture index`: apply pending change batches (or rebuild everything with --full)."""

from __future__ import annotations

import argparse

from catalog.cli.context import CliContext


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="apply pending changes to the indexes and publish")
    p.add_argument("--full", action="store_true",
                   help="then rebuild the JOSIE index and recompute every joinable/unionable list from the lake")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    from spark_jobs.lake.session import get_spark
    from spark_jobs.orchestration.pipeline import index_pending

    ctx.engine  # noqa: B018 - create or upgrade the catalog before the jobs publish into it
    spark = get_spark(ctx.settings, "juncture.index")
    reports = index_pending(spark, ctx.settings)
    if not reports:
        print("nothing to index")
    for r in reports:
        print(f"indexed batch {r.batch_id}: +{r.n_added} -{r.n_deleted} tables, stages {r.seconds}")
    if args.full:
        rebuild_all(spark, ctx)
    return 0


def rebuild_all(spark, ctx: CliContext) -> None:  # type: ignore[no-untyped-def]
    """What `lake_rebuild` does, in-process: regroup JOSIE, re-relate everything, publish both."""
    from spark_jobs.josie import rebuild as rebuild_josie
    from spark_jobs.josie.publish import publish_current
    from spark_jobs.relate.unionable import relate_all

    josie = rebuild_josie.run(spark, ctx.settings)
    if josie["mode"] == "absent":
        print("nothing to rebuild: the lake has no index yet")
        return
    relations = relate_all(spark, ctx.settings)
    counts = publish_current(ctx.settings, spark, relations=True)
    print(f"rebuilt josie index version {josie['index_version']} ({josie['n_lists']} lists); "
          f"recomputed {relations.get('n_joinable_rows', 0)} joinable and {relations.get('n_unionable_rows', 0)} "
          f"unionable rows; published {counts.get('n_joinable', 0)} + {counts.get('n_unionable', 0)}")
