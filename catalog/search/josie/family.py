"""JOSIE's serving half as an index family: its catalog tables and the exact `search join` methods
(JOSIE itself and the baselines it is checked against)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, inspect

from catalog.core.errors import UserError
from catalog.search.family import JoinMethod, JoinRequest, SearchFamily
from catalog.search.josie import cost_model, search_join
from catalog.search.josie.models import JosieMeta, JosiePosting, JosieSet, JosieToken
from catalog.search.josie.reader import DbIndexReader

_HELP = {
    "josie": "JOSIE: cost-based choice between reading posting lists and reading candidate sets (default)",
    "mergelist": "MergeList-D: read every posting list of the query and count",
    "probeset": "ProbeSet-D: prefix filter and position filter, read each candidate set at first sight",
    "brute": "scan every set of the index",
}


def _reader(conn: Connection, *, hold_index: bool = False) -> DbIndexReader:
    if not inspect(conn).has_table("josie_tokens"):
        raise UserError("the catalog holds no JOSIE index yet (run `juncture index`)")
    return DbIndexReader(conn, cache_dictionary=hold_index)


def _run(method: str) -> Any:
    def run(conn: Connection, request: JoinRequest) -> list[dict[str, Any]]:
        reader = _reader(conn, hold_index=request.hold_index)
        outcome = search_join(
            reader,
            request.values,
            k=request.k,
            method=method,
            exclude_column_id=request.exclude_column_id,
            costs=cost_model.load(conn, reader.database),
        )
        return [dict(vars(r)) for r in outcome.results]  # plain fields: no deep copy (`asdict`)

    return run


def _refit(conn: Connection) -> dict[str, Any]:
    reader = _reader(conn)
    model = cost_model.refit(conn, reader)
    conn.commit()
    return {
        "database": reader.database,
        "read_list_a": model.read_list_a,
        "read_list_b": model.read_list_b,
        "read_set_a": model.read_set_a,
        "read_set_b": model.read_set_b,
    }


FAMILY = SearchFamily(
    name="josie",
    models=(JosieToken, JosiePosting, JosieSet, JosieMeta),
    join_methods=tuple(JoinMethod(name, help_, _run(name), refit=_refit) for name, help_ in _HELP.items()),
)
