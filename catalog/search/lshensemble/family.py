"""LSH Ensemble's serving half as an index family: its catalog tables and `juncture search contain`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from catalog.search.family import JoinMethod, JoinRequest, SearchFamily, SearchKind, read_values
from catalog.search.lshensemble.models import LsheColumn, LsheMeta

if TYPE_CHECKING:
    from sqlalchemy import Connection

COLUMNS = ("containment", "overlap", "estimate", "size", "column_id", "table_id", "column", "exact")


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--values", required=True, metavar="FILE", help="one value per line ('-' for stdin)")
    parser.add_argument("--threshold", type=float, required=True, help="least share of your values, in (0, 1]")
    parser.add_argument("--k", type=int, default=None, help="at most this many answers (default: all)")
    parser.add_argument(
        "--verify",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="compute exact containment from the stored sets and drop false positives (default)",
    )


def _join(conn: Connection, request: JoinRequest) -> list[dict[str, Any]]:
    from catalog.search.lshensemble.search import search_join  # deferred: pyarrow loads only when LSHE searches

    return search_join(conn, request)


def _run(args: argparse.Namespace, conn: Connection) -> list[dict[str, Any]]:
    from catalog.search.lshensemble.search import ContainRequest, search_contain  # deferred: as in `_join`

    request = ContainRequest(read_values(args.values), threshold=args.threshold, k=args.k, verify=args.verify)
    return search_contain(conn, request)


FAMILY = SearchFamily(
    name="lshensemble",
    models=(LsheColumn, LsheMeta),
    join_methods=(
        JoinMethod(
            "lshe",
            "LSH Ensemble: containment searches at falling thresholds until k columns reach one "
            "(approximate: exact overlaps, but a column LSH misses is not listed)",
            _join,
            exact=False,
        ),
    ),
    kinds=(
        SearchKind(
            "contain",
            "columns containing at least a share of your values (LSH Ensemble)",
            _arguments,
            _run,
            COLUMNS,
        ),
    ),
)
