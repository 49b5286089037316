"""`juncture rebuild`: catch up on pending batches, rebuild each index family (JOSIE: its duplicate
groups), recompute every joinable and unionable list, publish (the same steps as the `lake_rebuild` DAG)."""

from __future__ import annotations

import argparse

from catalog.cli.context import CliContext


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rebuild", help="rebuild the indexes and recompute every joinable/unionable list")
    p.add_argument(
        "--if-due",
        action="store_true",
        help="only rebuild when an index family is due (JOSIE: index.josie.dirty_threshold)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    from spark_jobs.lake.session import get_spark  # deferred: Spark starts only for commands that need it
    from spark_jobs.orchestration.rebuild import rebuild_all

    ctx.engine  # noqa: B018 - create or upgrade the catalog before publishing into it
    with ctx.writing("rebuild"):  # before Spark starts: a writer refused the lock says so at once
        results = rebuild_all(get_spark(ctx.settings, "juncture.rebuild"), ctx.settings, if_due=args.if_due)
    print_rebuild(results)
    return 0


def print_rebuild(results: dict[str, dict]) -> None:
    """One line per step, for `rebuild` and `index --full`."""
    if results["catch_up"].get("n_batches"):
        print(f"indexed {results['catch_up']['n_batches']} pending batches first")
    if "not_due" in results:
        print("no index family is due for a rebuild")
        return
    for step, out in results.items():
        if not step.startswith("rebuild_"):
            continue
        family = step.removeprefix("rebuild_")
        if out.get("mode") == "absent":
            print(f"{family}: no index yet (run `juncture index` first)")
        elif "index_version" in out:
            print(f"rebuilt {family} index version {out['index_version']} ({out.get('n_lists', 0)} lists)")
    relations = results.get("relate_all", {})
    counts = results.get("publish_all", {})
    print(
        f"recomputed {relations.get('n_joinable_rows', 0)} joinable and {relations.get('n_unionable_rows', 0)} "
        f"unionable rows; published {sum(v for v in counts.values() if isinstance(v, int))} rows"
    )
