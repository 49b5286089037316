"""`juncture autojoin SOURCE TARGET [--json]`: join two tables through a learned transformation
(Auto-Join; each side a CSV file or a lake table_id)."""

from __future__ import annotations

import argparse
import json

from catalog.cli.context import CliContext
from catalog.cli.output import emit


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "autojoin",
        help="join two tables whose keys need a transformation, and say which one",
        description="Auto-Join: learns the program (split, substring, concatenation, constants, case) "
        "turning one table's columns into the other's key, in both directions, and prints it with the "
        "joined row pairs (0-based data rows) and how many target key rows it covers. Only 1:1 and N:1 "
        "joins (the side a program produces must be a key).",
    )
    p.add_argument("source", metavar="SOURCE", help="a CSV file (a header row, then data rows) or a lake table_id")
    p.add_argument("target", metavar="TARGET", help="as SOURCE")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    from catalog.search.autojoin.join import autojoin  # deferred: numpy and pyarrow load when it runs
    from catalog.search.autojoin.settings import autojoin_settings  # deferred: as above
    from catalog.search.autojoin.tables import open_side  # deferred: as above

    source = open_side(args.source, ctx.settings, what="SOURCE")
    target = open_side(args.target, ctx.settings, what="TARGET")
    result = autojoin(source, target, autojoin_settings(ctx.settings))
    if args.json:
        print(json.dumps(result.as_dict(), ensure_ascii=False))
        return 0
    if result.program is None:
        print("no transformation join found")
        return 0
    reads = "TARGET" if result.reversed else "SOURCE"
    print(f"program: {result.program}  (reads {reads})")
    print(f"source columns: {', '.join(result.source_columns)}")
    print(f"target columns: {', '.join(result.target_columns)}")
    print(f"coverage: {result.coverage} target key rows; pairs: {len(result.pairs)}; fuzzy: {result.fuzzy}")
    emit([{"source_row": s, "target_row": t} for s, t in result.pairs], as_json=False)
    return 0
