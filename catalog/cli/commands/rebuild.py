"""`juncture rebuild`: catch up on pending batches, rebuild JOSIE's duplicate groups, recompute every
joinable and unionable list, publish (the same steps as the `lake_rebuild` DAG)."""

from __future__ import annotations

import argparse

from catalog.cli.context import CliContext


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rebuild", help="rebuild the indexes and recompute every joinable/unionable list")
    p.add_argument("--if-due", action="store_true",
                   help="only rebuild when the JOSIE dirty share passes index.josie_dirty_threshold")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    from spark_jobs.lake.session import get_spark  # deferred: Spark starts only for commands that need it
    from spark_jobs.orchestration.rebuild import rebuild_all

    ctx.engine  # noqa: B018 - create or upgrade the catalog before publishing into it
    with ctx.writing("rebuild"):
        results = rebuild_all(get_spark(ctx.settings, "juncture.rebuild"), ctx.settings, if_due=args.if_due)
    print_rebuild(results)
    return 0


def print_rebuild(results: dict[str, dict]) -> None:
    """One line per step, for `rebuild` and `index --full`."""
    if results["catch_up"].get("n_batches"):
        print(f"indexed {results['catch_up']['n_batches']} pending batches first")
    josie = results.get("rebuild_groups", {})
    if josie.get("mode") == "absent":
        print("josie: no index yet (run `juncture index` first)")
        return
    if josie.get("mode") == "not_due":
        print("josie: rebuild not due")
        return
    relations = results.get("relate_all", {})
    counts = results.get("publish_all", {})
    print(f"rebuilt josie index version {josie['index_version']} ({josie['n_lists']} lists); "
          f"recomputed {relations.get('n_joinable_rows', 0)} joinable and {relations.get('n_unionable_rows', 0)} "
          f"unionable rows; published {counts.get('josie_tokens_written', 0)} tokens")
