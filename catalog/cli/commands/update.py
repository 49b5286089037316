"""`juncture update`: trigger an incremental update that adds or deletes tables.

It triggers the `lake_index` DAG with conf `{"add": [...], "delete": [...]}`: in-process with
`dag.test()` on embedded defaults, or through the Airflow REST API when `airflow.api_url` is set
(the paths must then be readable by the Airflow workers).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from catalog.cli.context import CliContext
from catalog.core.errors import UserError
from catalog.core.identity import valid_table_id


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("update", help="add or delete tables (triggers lake_index)")
    # "extend": `--add a.csv b.csv` and `--add a.csv --add b.csv` both add both (a repeated flag
    # used to keep only its last values, silently)
    p.add_argument(
        "--add",
        nargs="+",
        action="extend",
        default=[],
        metavar="PATH",
        help="table files or folders to add (or names of configured sources to crawl)",
    )
    p.add_argument("--delete", nargs="+", action="extend", default=[], metavar="TABLE_ID", help="table ids to delete")
    p.set_defaults(handler=run)


def update_conf(ctx: CliContext, add: list[str], delete: list[str]) -> dict[str, list[str]]:
    """The lake_index conf for this request; paths made absolute, obvious mistakes refused early."""
    if not add and not delete:
        raise UserError("update: nothing to do (give --add PATH ... and/or --delete TABLE_ID ...)")
    sources = {s.name for s in ctx.settings.sources}
    paths = []
    for entry in add:
        if entry in sources:
            paths.append(entry)
            continue
        path = Path(entry).expanduser()
        if not path.exists():
            raise UserError(f"--add {entry}: no such file or folder")
        paths.append(str(path.resolve()))
    bad = [t for t in delete if not valid_table_id(t)]
    if bad:
        raise UserError(f"--delete {bad[0]}: not a table id (expected socrata:…, ckan:… or file:…)")
    return {"add": paths, "delete": list(delete)}


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    conf = update_conf(ctx, args.add, args.delete)
    settings = ctx.settings
    if settings.airflow.api_url:
        # deferred: only the command that needs it loads it
        from spark_jobs.orchestration.airflow_runner import api_trigger

        out = api_trigger(settings, "lake_index", conf)
        print(
            f"triggered lake_index run {out.get('dag_run_id')} on {settings.airflow.api_url} "
            f"(+{len(conf['add'])} -{len(conf['delete'])})"
        )
        return 0
    from spark_jobs.orchestration.airflow_runner import run_dag  # deferred: only the command that needs it loads it

    ctx.engine  # noqa: B018 - create or upgrade the catalog before the DAG publishes into it
    with contextlib.redirect_stdout(sys.stderr):  # Airflow logs to stdout; ours is the summary only
        result = run_dag(settings, "lake_index", conf)
    print(
        f"lake_index run {result.run_id}: {result.state} in {result.seconds:.0f}s "
        f"(+{len(conf['add'])} -{len(conf['delete'])})"
    )
    for t in result.triggered:
        print(f"  then {t.dag_id} run {t.run_id}: {t.state}")
    return 0
