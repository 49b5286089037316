"""MATE's serving half as an index family: its catalog tables and `juncture search nary`. The search
code (numpy, pyarrow for XASH) loads when a search runs, not when a command builds its parser."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from catalog.search.family import SearchFamily, SearchKind
from catalog.search.mate import METHODS
from catalog.search.mate.models import MateList, MateMeta, MatePosting, MateRowKeys, MateTable

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from catalog.search.mate.search import NaryRequest, SkippedTable


COLUMNS = ("joinability", "table_id", "mapping")


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--csv", required=True, metavar="FILE", help="the query table (a header row, then data rows)")
    parser.add_argument(
        "--key", metavar="COL[,COL...]", help="the composite key's columns (default: the query's detected minimal key)"
    )
    parser.add_argument("--k", type=int, default=10, help="answers wanted (default 10)")
    parser.add_argument(
        "--method",
        choices=METHODS,
        default="mate",
        help="mate: XASH super-key filter (default); scr: no filter; mcr: every key column's lists "
        "intersected; brute: every candidate table verified (all give the same answers)",
    )


def search_rows(conn: Connection, request: NaryRequest) -> tuple[list[dict[str, Any]], list[SkippedTable]]:
    """The answers as rows (table_id, joinability, mapping), best first, and the tables left out of
    the ranking (too many column choices to count; `search.MAX_TABLE_MATCHES`)."""
    from catalog.search.mate.search import search_nary  # deferred: the search loads when it runs
    from catalog.search.mate.source import CatalogSource  # deferred: as above

    outcome = search_nary(CatalogSource(conn, hold=request.hold_index), request)
    return [r.as_dict() for r in outcome.results], outcome.skipped


def _run(args: argparse.Namespace, conn: Connection) -> list[dict[str, Any]]:
    from catalog.search.mate.query import choose_key, read_csv  # deferred: as in `search_rows`
    from catalog.search.mate.search import NaryRequest  # deferred: as in `search_rows`

    headers, rows = read_csv(args.csv)
    key, detected = choose_key(headers, rows, args.key)
    if detected:
        others = "; ".join(",".join(k) for k in detected[1:4])
        print(f"key: {','.join(key)} (detected{'; others: ' + others if others else ''})", file=sys.stderr)
    results, skipped = search_rows(conn, NaryRequest(headers, rows, key, k=args.k, method=args.method))
    for table in skipped:
        print(table.describe(), file=sys.stderr)
    return results


FAMILY = SearchFamily(
    name="mate",
    models=(MateTable, MatePosting, MateRowKeys, MateMeta, MateList),
    kinds=(
        SearchKind(
            "nary",
            "tables joining with yours on a composite key (MATE; exact)",
            _arguments,
            _run,
            COLUMNS,
        ),
    ),
)
