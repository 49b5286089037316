"""`juncture search`: online join/containment/n-ary/semantic search for a query not in the lake."""

from __future__ import annotations

import argparse
import sys

from catalog.cli.commands._stub import not_available
from catalog.cli.context import CliContext
from catalog.cli.output import emit
from catalog.core.errors import NotAvailableError, UserError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="search the lake for columns that join with yours")
    ssub = p.add_subparsers(dest="search_command", metavar="KIND", required=True)
    join = ssub.add_parser("join", help="top-k columns by distinct-value overlap (exact)",
                           description="Top-k lake columns sharing the most distinct values with yours, exactly: "
                           "ordered by overlap, then column_id; columns with overlap 0 are never listed. "
                           "--refit-costs times real reads on this catalog and stores JOSIE's cost constants.")
    join.add_argument("--values", metavar="FILE", help="one value per line ('-' for stdin)")
    join.add_argument("--k", type=int, default=10)
    join.add_argument("--method", choices=["josie", "lshe", "mergelist", "probeset", "brute"], default="josie")
    join.add_argument("--exclude", metavar="COLUMN_ID", help="leave this lake column (the query itself) out")
    join.add_argument("--json", action="store_true")
    join.add_argument("--refit-costs", action="store_true",
                      help="fit JOSIE's read-cost constants on this catalog database, store them, and exit")
    join.set_defaults(handler=run_join)
    contain = ssub.add_parser("contain", help="columns containing at least a share of your values")
    contain.add_argument("--values", required=True, metavar="FILE")
    contain.add_argument("--threshold", type=float, required=True)
    contain.add_argument("--json", action="store_true")
    contain.set_defaults(handler=not_available("search contain"))
    nary = ssub.add_parser("nary", help="tables joining on a composite key")
    nary.add_argument("--csv", required=True, metavar="FILE")
    nary.add_argument("--key", required=True, metavar="COL[,COL...]")
    nary.add_argument("--k", type=int, default=10)
    nary.add_argument("--json", action="store_true")
    nary.set_defaults(handler=not_available("search nary"))
    semantic = ssub.add_parser("semantic", help="joins despite typos, formats and synonyms")
    semantic.add_argument("--values", required=True, metavar="FILE")
    semantic.add_argument("--tau", type=float, default=0.12)
    semantic.add_argument("--T", dest="T", type=float, default=0.6)
    semantic.add_argument("--json", action="store_true")
    semantic.set_defaults(handler=not_available("search semantic"))


def run_join(args: argparse.Namespace, ctx: CliContext) -> int:
    """`search join`: JOSIE (or a baseline) over the index in the catalog database.

    Imports only SQLAlchemy and numpy (never Spark or Airflow), so it answers in well under a second.
    """
    from sqlalchemy import inspect

    from catalog.search.josie import DbIndexReader, cost_model, search_join

    if args.k < 1:
        raise UserError("--k must be at least 1")
    if args.method == "lshe":
        raise NotAvailableError("search join --method lshe")
    if not args.refit_costs and args.values is None:
        raise UserError("search join: --values FILE is required")
    values = None if args.refit_costs else _read_values(args.values)
    with ctx.engine.connect() as conn:
        if not inspect(conn).has_table("josie_tokens"):
            raise UserError("the catalog holds no JOSIE index yet (run `juncture index`)")
        reader = DbIndexReader(conn)
        if args.refit_costs:
            model = cost_model.refit(conn, reader)
            conn.commit()
            emit({"database": reader.database, "read_list_a": model.read_list_a, "read_list_b": model.read_list_b,
                  "read_set_a": model.read_set_a, "read_set_b": model.read_set_b}, as_json=args.json)
            return 0
        costs = cost_model.load(conn, reader.database)
        outcome = search_join(reader, values or [], k=args.k, method=args.method, exclude_column_id=args.exclude,
                              costs=costs)
    emit(outcome.results, as_json=args.json, columns=["overlap", "column_id", "table_id", "column"])
    return 0


def _read_values(path: str) -> list[str]:
    """One value per line from a file or standard input ('-')."""
    if path == "-":
        return sys.stdin.read().splitlines()
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        raise UserError(f"--values: no such file {path!r}") from None
    except OSError as e:
        raise UserError(f"--values: cannot read {path!r}: {e.strerror or e}") from None
