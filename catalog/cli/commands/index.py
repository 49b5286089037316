"""`juncture index`: apply pending change batches (and with --full, then rebuild everything)."""

from __future__ import annotations

import argparse
from typing import Any

from catalog.cli.commands.rebuild import print_rebuild
from catalog.cli.context import CliContext


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="apply pending changes to the indexes and publish")
    p.add_argument(
        "--full",
        action="store_true",
        help="then rebuild the JOSIE index and recompute every joinable/unionable list (= rebuild)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    from spark_jobs.lake.session import get_spark  # deferred: Spark starts only for commands that need it
    from spark_jobs.orchestration.backlog import work_backlog  # deferred: only the commands that index load jobs
    from spark_jobs.orchestration.pipeline import index_pending  # deferred: only the commands that index load jobs
    from spark_jobs.orchestration.rebuild import rebuild_all  # deferred: only the command that needs it loads it

    ctx.engine  # noqa: B018 - create or upgrade the catalog before the jobs publish into it
    with ctx.writing("index"):  # before Spark starts: a writer refused the lock says so at once
        spark = get_spark(ctx.settings, "juncture.index")
        reports = index_pending(spark, ctx.settings)
        for r in reports:
            stages = ", ".join(f"{n} {s:.1f}s/{r.spark_jobs.get(n, 0)} jobs" for n, s in r.seconds.items())
            total = sum(r.seconds.values())
            print(f"indexed batch {r.batch_id}: +{r.n_added} -{r.n_deleted} tables in {total:.1f}s ({stages})")
            if parts := stage_parts(r.results):
                print(f"  {parts}")
        print(end="", flush=True)  # the batches are published: say so before the backlog starts
        backlog = {} if args.full else work_backlog(spark, ctx.settings)  # a rebuild goes on with it
        if backlog:
            print(backlog_line(backlog))
        elif not reports:
            print("nothing to index")
        if args.full:
            print_rebuild(rebuild_all(spark, ctx.settings))
    return 0


def backlog_line(results: dict[str, Any]) -> str:
    """What a backlog run made ("backlog: 12 n-ary lists computed (5 still pending), 64 transformation
    pairs learned (600 lists pending) in 31.2s")."""
    mate, publish = results.get("mate") or {}, results.get("publish") or {}
    parts = []
    if "mate_lists_computed" in mate:
        parts.append(
            f"{mate['mate_lists_computed']} n-ary lists computed ({mate.get('mate_lists_pending', 0)} still pending)"
        )
    if "autojoin_pairs_learned" in publish:
        parts.append(
            f"{publish['autojoin_pairs_learned']} transformation pairs learned"
            f" ({publish.get('autojoin_lists_pending', 0)} lists pending)"
        )
    return f"backlog: {', '.join(parts) or 'published'} in {results.get('seconds', 0.0):.1f}s"


def stage_parts(results: dict[str, Any]) -> str:
    """Where the composite stages spent their time: relate's joinable and unionable parts, MATE's
    index and lists, and the publish's seconds per publisher ("relate: joinable 3.1s, ...; mate: index
    4.0s, ...; publish: tables 0.2s, ...")."""
    out = []
    for stage in ("relate", "mate", "publish"):
        counts = results.get(stage)
        if isinstance(counts, dict) and isinstance(counts.get("seconds"), dict):
            out.append(f"{stage}: " + ", ".join(f"{n} {s:.1f}s" for n, s in counts["seconds"].items()))
    return "; ".join(out)
