"""`juncture search`: online join/containment/n-ary/semantic search for a query not in the lake."""

from __future__ import annotations

import argparse

from catalog.cli.context import CliContext
from catalog.cli.output import emit
from catalog.core.errors import NotAvailableError, UserError
from catalog.db.engine import one_snapshot, open_reader
from catalog.search.family import JoinRequest, SearchKind, join_methods, read_values, search_kinds

# The search kinds of the command-line contract; a kind no registered family provides yet answers
# "not available" (exit 2) with the contract's arguments.
CONTRACT_KINDS = ("contain", "nary", "semantic")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="search the lake for columns that join with yours")
    ssub = p.add_subparsers(dest="search_command", metavar="KIND", required=True)
    methods = join_methods()
    join = ssub.add_parser(
        "join",
        help="top-k columns by distinct-value overlap (exact)",
        description="Top-k lake columns sharing the most distinct values with yours, exactly: "
        "ordered by overlap, then column_id; columns with overlap 0 are never listed. "
        "--refit-costs times real reads on this catalog and stores the method's cost constants. "
        "Methods: " + "; ".join(f"{m.name}: {m.help}" for m in methods.values()),
    )
    join.add_argument("--values", metavar="FILE", help="one value per line ('-' for stdin)")
    join.add_argument("--k", type=int, default=10)
    join.add_argument("--method", choices=list(methods), default=next(iter(methods), None))
    join.add_argument("--exclude", metavar="COLUMN_ID", help="leave this lake column (the query itself) out")
    join.add_argument("--json", action="store_true")
    join.add_argument(
        "--refit-costs",
        action="store_true",
        help="fit the method's read-cost constants on this catalog database, store them, and exit",
    )
    join.set_defaults(handler=run_join)
    kinds = search_kinds()
    for name in dict.fromkeys([*CONTRACT_KINDS, *kinds]):
        kind = kinds.get(name)
        if kind is None:
            _contract_stub(ssub, name)
            continue
        parser = ssub.add_parser(name, help=kind.help)
        kind.add_arguments(parser)
        parser.add_argument("--json", action="store_true")
        parser.set_defaults(handler=_run_kind(kind))


def _contract_stub(ssub: argparse._SubParsersAction, name: str) -> None:
    """A contract kind no family provides yet: its arguments, then "not available"."""
    helps = {
        "contain": "columns containing at least a share of your values",
        "nary": "tables joining on a composite key",
        "semantic": "joins despite typos, formats and synonyms",
    }
    p = ssub.add_parser(name, help=helps[name] + " (not available yet)")
    if name == "nary":
        p.add_argument("--csv", required=True, metavar="FILE")
        p.add_argument("--key", required=True, metavar="COL[,COL...]")
        p.add_argument("--k", type=int, default=10)
    else:
        p.add_argument("--values", required=True, metavar="FILE")
    if name == "contain":
        p.add_argument("--threshold", type=float, required=True)
    if name == "semantic":
        p.add_argument("--tau", type=float, default=0.12)
        p.add_argument("--T", dest="T", type=float, default=0.6)
    p.add_argument("--json", action="store_true")

    def handler(args: argparse.Namespace, ctx: CliContext) -> int:
        raise NotAvailableError(f"search {name}")

    p.set_defaults(handler=handler)


def _run_kind(kind: SearchKind):
    def handler(args: argparse.Namespace, ctx: CliContext) -> int:
        with ctx.engine.connect() as conn:
            rows = kind.run(args, conn)
        emit(rows, as_json=args.json, columns=kind.columns)
        return 0

    return handler


def run_join(args: argparse.Namespace, ctx: CliContext) -> int:
    """`search join`: the chosen method over its family's tables in the catalog database.

    Imports only SQLAlchemy and numpy (never Spark or Airflow), so it answers in well under a second.
    """
    if args.method is None:
        raise NotAvailableError("search join (no index family is registered)")
    method = join_methods()[args.method]
    if args.k < 1:
        raise UserError("--k must be at least 1")
    if not args.refit_costs and args.values is None:
        raise UserError("search join: --values FILE is required")
    if args.refit_costs:
        if method.refit is None:
            raise UserError(f"search join --method {method.name} has no cost constants to fit")
        with ctx.engine.connect() as conn:
            emit(method.refit(conn), as_json=args.json)
        return 0
    request = JoinRequest(read_values(args.values), k=args.k, exclude_column_id=args.exclude)
    engine = open_reader(ctx.settings.catalog_url)
    try:
        # every read of the search from one snapshot: a publish committing meanwhile cannot mix versions
        with engine.connect() as conn, one_snapshot(conn):
            rows = method.run(conn, request)
    finally:
        engine.dispose()
    emit(rows, as_json=args.json, columns=["overlap", "column_id", "table_id", "column"])
    return 0
