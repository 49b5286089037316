"""`juncture search`: online join/containment/n-ary/semantic search for a query not in the lake."""

from __future__ import annotations

import argparse

from catalog.cli.commands._stub import not_available


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="search the lake for columns that join with yours")
    ssub = p.add_subparsers(dest="search_command", metavar="KIND", required=True)
    join = ssub.add_parser("join", help="top-k columns by distinct-value overlap")
    join.add_argument("--values", required=True, metavar="FILE", help="one value per line ('-' for stdin)")
    join.add_argument("--k", type=int, default=10)
    join.add_argument("--method", choices=["josie", "lshe", "mergelist", "probeset", "brute"], default="josie")
    join.add_argument("--json", action="store_true")
    join.set_defaults(handler=not_available("search join"))
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
