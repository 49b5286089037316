"""`juncture lookup {table|columns|profile|keys|joinable|unionable} ID`: precomputed answers."""

from __future__ import annotations

import argparse

from catalog import lookup
from catalog.cli.context import CliContext
from catalog.cli.output import emit
from catalog.core.errors import UserError
from catalog.db.engine import session_scope

KINDS = ("table", "columns", "profile", "keys", "joinable", "unionable")
JOINABLE_COLUMNS = (
    "rank",
    "table_id",
    "column",
    "overlap",
    "containment",
    "candidate_containment",
    "jaccard",
    "est_join_size",
    "direction",
    "exact",
)
UNIONABLE_COLUMNS = ("rank", "table_id", "score", "n_aligned", "alignment", "exact")
NARY_COLUMNS = ("rank", "table_id", "joinability", "mapping")
SEMANTIC_COLUMNS = ("rank", "table_id", "column", "n_matched", "joinability")
TRANSFORM_COLUMNS = ("rank", "table_id", "column", "coverage", "direction", "program")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lookup", help="look up a table or column in the catalog")
    p.add_argument("kind", choices=KINDS)
    p.add_argument("id", metavar="ID", help="a table_id (table, columns, keys, unionable) or column_id")
    p.add_argument("--k", type=int, default=10, help="number of answers for joinable/unionable")
    p.add_argument("--offset", type=int, default=0, help="skip this many answers (joinable/unionable)")
    p.add_argument(
        "--key",
        metavar="COL,COL[,COL]",
        help="joinable only: ID is a table_id, and the answers are its n-ary joinable tables on this "
        "detected composite key (MATE's precomputed list)",
    )
    p.add_argument(
        "--semantic",
        action="store_true",
        help="joinable only: the columns ID joins with in embedding space (despite typos, case, punctuation) "
        "that its exact list does not hold (PEXESO's precomputed list)",
    )
    p.add_argument(
        "--transform",
        action="store_true",
        help="joinable only: the columns ID joins with after a transformation, each with the program "
        "Auto-Join learned and its coverage (the precomputed transformation list)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    if not 1 <= args.k <= lookup.MAX_K:
        raise UserError(f"--k must be between 1 and {lookup.MAX_K}")
    if args.offset < 0:
        raise UserError("--offset must not be negative")
    if args.key is not None and args.kind != "joinable":
        raise UserError("--key goes with `lookup joinable TABLE_ID`")
    if args.semantic and (args.kind != "joinable" or args.key is not None):
        raise UserError("--semantic goes with `lookup joinable COLUMN_ID` (and not with --key)")
    if args.transform and (args.kind != "joinable" or args.key is not None or args.semantic):
        raise UserError("--transform goes with `lookup joinable COLUMN_ID` (and not with --key or --semantic)")
    with session_scope(ctx.engine) as session:
        if args.kind == "table":
            emit(lookup.table(session, args.id), as_json=args.json)
        elif args.kind == "columns":
            emit(lookup.columns(session, args.id), as_json=args.json)
        elif args.kind == "profile":
            emit(lookup.profile(session, args.id), as_json=args.json)
        elif args.kind == "keys":
            emit(lookup.keys(session, args.id), as_json=args.json)
        elif args.kind == "joinable" and args.key is not None:
            from catalog.search.mate.lists import nary_joinable  # deferred: the search code loads when used

            key = [c.strip() for c in args.key.split(",")]
            tables = nary_joinable(session.connection(), args.id, key, args.k, offset=args.offset)
            if args.json:
                emit(tables, as_json=True)
            else:
                rows = [{**lookup.as_dict(t), "mapping": _pairs(t.mapping)} for t in tables]
                emit(rows, as_json=False, columns=NARY_COLUMNS)
        elif args.kind == "joinable" and args.semantic:
            from catalog.search.pexeso.lists import semantic_joinable  # deferred: as above

            columns = semantic_joinable(session.connection(), args.id, args.k, offset=args.offset)
            emit(columns, as_json=args.json, columns=SEMANTIC_COLUMNS)
        elif args.kind == "joinable" and args.transform:
            from catalog.search.autojoin.lists import transform_joinable  # deferred: as above

            transforms = transform_joinable(session.connection(), args.id, args.k, offset=args.offset)
            emit(transforms, as_json=args.json, columns=TRANSFORM_COLUMNS)
        elif args.kind == "joinable":
            emit(
                lookup.joinable(session, args.id, args.k, offset=args.offset),
                as_json=args.json,
                columns=JOINABLE_COLUMNS,
            )
        else:
            answers = lookup.unionable(session, args.id, args.k, offset=args.offset)
            if args.json:
                emit(answers, as_json=True)
            else:  # the alignment as "mine=theirs" pairs reads better than its JSON
                rows = [
                    {
                        **lookup.as_dict(a),
                        "alignment": _pairs({p.column: p.candidate_column for p in a.alignment}),
                    }
                    for a in answers
                ]
                emit(rows, as_json=False, columns=UNIONABLE_COLUMNS)
    return 0


def _pairs(mapping: dict[str, str]) -> str:
    """A column mapping as "mine=theirs" pairs (reads better than its JSON)."""
    return "; ".join(f"{mine}={theirs}" for mine, theirs in mapping.items())
