"""`juncture lookup {table|columns|profile|keys|joinable|unionable} ID`: precomputed answers."""

from __future__ import annotations

import argparse

from catalog import lookup
from catalog.cli.context import CliContext
from catalog.cli.output import emit
from catalog.db import session_scope
from catalog.errors import NotAvailableError, UserError

KINDS = ("table", "columns", "profile", "keys", "joinable", "unionable")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lookup", help="look up a table or column in the catalog")
    p.add_argument("kind", choices=KINDS)
    p.add_argument("id", metavar="ID", help="a table_id (table, columns, keys, unionable) or column_id")
    p.add_argument("--k", type=int, default=10, help="number of answers for joinable/unionable")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    if args.k < 1:
        raise UserError("--k must be at least 1")
    with session_scope(ctx.engine) as session:
        if args.kind == "table":
            result = lookup.table(session, args.id)
        elif args.kind == "columns":
            result = lookup.columns(session, args.id)
        elif args.kind == "profile":
            result = lookup.profile(session, args.id)
        elif args.kind == "keys":
            result = lookup.keys(session, args.id)
        else:
            raise NotAvailableError(f"lookup {args.kind}")
        emit(result, as_json=args.json)
    return 0

