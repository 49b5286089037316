"""Auto-Join's serving half as an index family: no index of its own (it learns from the tables it
is given; its catalog tables hold the precomputed transformation lists, `lists.py`); `juncture
autojoin` and POST /v1/autojoin call `join.autojoin`, and `juncture search transform` looks for
lake tables a query table joins with after a transformation (`transform.py`). The search code
loads when a search runs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from catalog.search.autojoin.models import AutojoinMeta, TransformList
from catalog.search.family import SearchFamily, SearchKind

if TYPE_CHECKING:
    from sqlalchemy import Connection

COLUMNS = ("coverage", "table_id", "program", "query_columns", "table_columns")


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--csv", required=True, metavar="FILE", help="the query table (a header row, then data rows)")
    parser.add_argument("--k", type=int, default=10, help="answers wanted (default 10)")


def _run(args: argparse.Namespace, conn: Connection) -> list[dict[str, Any]]:
    from catalog.core.errors import UserError  # deferred: as below
    from catalog.core.settings import load_settings  # deferred: the search loads when it runs
    from catalog.search.autojoin.join import Table  # deferred: as above
    from catalog.search.autojoin.settings import autojoin_settings  # deferred: as above
    from catalog.search.autojoin.transform import search_transform  # deferred: as above
    from catalog.search.mate.query import read_csv  # deferred: as above

    if args.k < 1:
        raise UserError("--k must be at least 1")
    settings = load_settings()
    query = Table.from_rows(*read_csv(args.csv))
    return search_transform(query, settings, autojoin_settings(settings), k=args.k)


FAMILY = SearchFamily(
    name="autojoin",
    models=(TransformList, AutojoinMeta),
    kinds=(
        SearchKind(
            "transform",
            "lake tables joining with yours after a transformation (Auto-Join; ranked by coverage)",
            _arguments,
            _run,
            COLUMNS,
        ),
    ),
)
