"""What every route needs: the catalog to read, and id checks at the edge.

Ids are checked for shape before any query (DESIGN.md identity): a table_id is `socrata:…`,
`ckan:…` or `file:…` without `#`; a column_id is `<table_id>#<header>`. Garbage is a 422, never a
database round trip or a 500.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request
from sqlalchemy import Engine

from catalog.identity import split_column_id, valid_table_id

MAX_ID_LENGTH = 4096


async def get_catalog(request: Request) -> Engine:
    """The app's reader engine (`catalog.db.open_reader`); each lookup checks a pooled connection
    out for its one SELECT. Routes are `async def` and query synchronously: a lookup is a fraction
    of a millisecond, cheaper than a hop to the thread pool; more throughput comes from more worker
    processes (`juncture serve --workers`)."""
    engine: Engine = request.app.state.engine
    return engine


CatalogDep = Annotated[Engine, Depends(get_catalog)]


def _printable(value: str) -> bool:
    return value.isprintable() and value == value.strip()


async def checked_table_id(table_id: Annotated[str, Path(max_length=MAX_ID_LENGTH, description="a table_id")]) -> str:
    if not _printable(table_id) or not valid_table_id(table_id):
        raise HTTPException(status_code=422, detail="not a table_id (expected socrata:…, ckan:… or file:…)")
    return table_id


async def checked_column_id(column_id: Annotated[str, Path(max_length=MAX_ID_LENGTH,
                                                     description="a column_id: <table_id>#<header>, '#' as %23")]
                      ) -> str:
    try:
        table_id, header = split_column_id(column_id)
    except ValueError:
        raise HTTPException(status_code=422, detail="not a column_id (expected <table_id>#<header>)") from None
    if not _printable(table_id) or not valid_table_id(table_id) or not header or not header.isprintable():
        raise HTTPException(status_code=422, detail="not a column_id (expected <table_id>#<header>)")
    return column_id


TableId = Annotated[str, Depends(checked_table_id)]
ColumnId = Annotated[str, Depends(checked_column_id)]
