"""`juncture rebuild`: duplicate-group rebuild (JOSIE) and LSH repartition, then publish."""

from __future__ import annotations

import argparse

from catalog.cli.context import CliContext


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rebuild", help="rebuild duplicate groups and LSH partitions")
    p.add_argument("--if-due", action="store_true",
                   help="only rebuild when the dirty share passes index.josie_dirty_threshold")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    from spark_jobs.josie import rebuild as rebuild_josie
    from spark_jobs.josie.publish import publish_current
    from spark_jobs.lake.session import get_spark

    ctx.engine  # noqa: B018 - create or upgrade the catalog before publishing into it
    spark = get_spark(ctx.settings, "juncture.rebuild")
    job = rebuild_josie.run_if_due if args.if_due else rebuild_josie.run
    result = job(spark, ctx.settings)
    if result["mode"] == "absent":
        print("josie: no index yet (run `juncture index` first)")
        return 0
    if result["mode"] == "not_due":
        print(f"josie: rebuild not due (dirty share {result['dirty_share']:.3f})")
        return 0
    counts = publish_current(ctx.settings, spark)
    print(f"josie: rebuilt index version {result['index_version']}: {result['n_lists']} lists, "
          f"published {counts.get('josie_tokens_written', 0)} tokens")
    return 0
