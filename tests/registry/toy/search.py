"""The toy family's serving half: `search join --method toy` (brute force over its catalog table) and
a `search toycount` kind."""

from __future__ import annotations

import argparse
import json
from typing import Any

from sqlalchemy import Connection, func, select

from catalog.core.identity import normalize_token
from catalog.search.family import JoinMethod, JoinRequest, SearchFamily, SearchKind
from tests.registry.toy.models import ToyColumn


def _join(conn: Connection, request: JoinRequest) -> list[dict[str, Any]]:
    query = {t for t in map(normalize_token, request.values) if t is not None}
    rows = conn.execute(select(ToyColumn.column_id, ToyColumn.table_id, ToyColumn.tokens)).all()
    found = [
        {
            "overlap": len(query & set(json.loads(tokens))),
            "column_id": column_id,
            "table_id": table_id,
            "column": column_id.split("#", 1)[1],
        }
        for column_id, table_id, tokens in rows
        if column_id != request.exclude_column_id
    ]
    found = [r for r in found if r["overlap"] > 0]
    found.sort(key=lambda r: (-r["overlap"], r["column_id"]))
    return found[: request.k]


def _count_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", required=True)


def _count(args: argparse.Namespace, conn: Connection) -> dict[str, Any]:
    n = conn.execute(select(func.count()).select_from(ToyColumn).where(ToyColumn.table_id == args.table)).scalar()
    return {"table_id": args.table, "n_columns": int(n or 0)}


FAMILY = SearchFamily(
    name="toy",
    models=(ToyColumn,),
    join_methods=(JoinMethod("toy", "brute force over the toy family's catalog table", _join),),
    kinds=(SearchKind("toycount", "how many columns the toy family holds for a table", _count_arguments, _count),),
)
