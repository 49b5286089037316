"""What every route needs: the catalog to read, and id checks at the edge.

Ids are checked for shape before any query (identity contract, docs/contracts.md): a table_id is `socrata:…`,
`ckan:…` or `file:…` without `#`; a column_id is `<table_id>#<header>`; neither, nor any text
parameter, holds a control character, NUL or an unpaired surrogate. Garbage is a 422 (FastAPI's
validation error, naming the parameter), never a database round trip or a 500.

Both are plain annotations rather than `Depends`: FastAPI resolves each dependency through its
generic solver, which cost more per lookup than the id check and the connection themselves, while
a validator on the path parameter and one call on the request are close to free.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import Path, Query, Request
from pydantic import AfterValidator
from sqlalchemy import Connection, Engine

from catalog.core.identity import split_column_id, valid_table_id

MAX_ID_LENGTH = 4096


def catalog_of(request: Request) -> Connection:
    """This thread's connection of the app's reader engine (`catalog.db.engine.open_reader`, autocommit:
    each lookup's one SELECT reads its own snapshot). Routes are `async def` and query
    synchronously: a lookup is a fraction of a millisecond, cheaper than a hop to the thread pool,
    and more throughput comes from more worker processes (`juncture serve --workers`). So a worker
    needs one connection, and holding it saves a pool checkout and reset per lookup (a third of a
    lookup's cost on PostgreSQL). A connection that died (server restart: that lookup answered 503)
    is replaced on the next request."""
    return catalog_of_state(request.app.state)


def catalog_of_state(state: Any) -> Connection:
    """`catalog_of` for an app's `state`."""
    local = state.connections
    connection: Connection | None = getattr(local, "connection", None)
    if connection is None or connection.invalidated or connection.closed:
        if connection is not None:
            connection.close()
        engine: Engine = state.engine
        connection = local.connection = engine.connect()
    return connection


# Control characters (Unicode Cc: C0, DEL, C1, among them NUL) and surrogates. Landing removes NUL and
# surrogates from everything it stores (`storable_text`) and a database may refuse them in a query
# (PostgreSQL: "text fields cannot contain NUL"), so a parameter holding one is a 422 before any
# query. Other characters (format marks such as RTL overrides, combining marks, no-break spaces) can
# be in a stored header or file name and are accepted.
_UNSTORABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _clean(value: str) -> bool:
    return _UNSTORABLE.search(value) is None


def check_text(value: str | None) -> str | None:
    """A free-text query parameter (a source name): no control character, NUL or surrogate."""
    if value is not None and not _clean(value):
        raise ValueError("must not contain control characters, NUL or unpaired surrogates")
    return value


def check_table_id(table_id: str) -> str:
    if not _clean(table_id) or table_id != table_id.strip() or not valid_table_id(table_id):
        raise ValueError("not a table_id (expected socrata:…, ckan:… or file:…)")
    return table_id


def check_column_id(column_id: str) -> str:
    try:
        table_id, header = split_column_id(column_id)
    except ValueError:
        raise ValueError("not a column_id (expected <table_id>#<header>)") from None
    if not _clean(column_id) or table_id != table_id.strip() or not valid_table_id(table_id) or not header:
        raise ValueError("not a column_id (expected <table_id>#<header>)")
    return column_id


TableId = Annotated[str, Path(max_length=MAX_ID_LENGTH, description="a table_id"), AfterValidator(check_table_id)]
ColumnId = Annotated[
    str,
    Path(max_length=MAX_ID_LENGTH, description="a column_id: <table_id>#<header>, '#' as %23"),
    AfterValidator(check_column_id),
]
SourceName = Annotated[
    str | None, Query(max_length=MAX_ID_LENGTH, description="only tables of this source"), AfterValidator(check_text)
]
