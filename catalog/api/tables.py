"""/v1/tables: the tables of the catalog and one table's record."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import AfterValidator

from catalog import lookup
from catalog.api.deps import MAX_ID_LENGTH, SourceName, TableId, catalog_of, check_text
from catalog.api.pages import JSON, Limit, Offset, Page, page_response, record_response

router = APIRouter(prefix="/v1/tables", tags=["tables"])


Text = Annotated[
    str,
    Query(max_length=MAX_ID_LENGTH, description="in the table_id, name, title or a header (case-insensitive)"),
    AfterValidator(check_text),
]
RowBound = Annotated[int | None, Query(ge=0, description="bound on the table's row count")]


@router.get("", response_model=Page[lookup.TableInfo], summary="List or find tables, by table_id")
async def list_tables(
    request: Request,
    limit: Limit = 100,
    offset: Offset = 0,
    source: SourceName = None,
    q: Text = "",
    has_key: Annotated[bool | None, Query(description="only tables with (true) or without (false) a key")] = None,
    min_rows: RowBound = None,
    max_rows: RowBound = None,
) -> JSON:
    if not q and has_key is None and min_rows is None and max_rows is None:
        found = lookup.tables(catalog_of(request), source=source, limit=limit, offset=offset)
    else:
        wanted = lookup.TableQuery(q, source, has_key, min_rows, max_rows)
        found = lookup.find_tables(catalog_of(request), wanted, limit=limit, offset=offset)
    return page_response(found, offset, limit)


@router.get("/{table_id:path}", response_model=lookup.TableInfo, summary="One table")
async def read_table(table_id: TableId, request: Request) -> JSON:
    return record_response(lookup.table(catalog_of(request), table_id))
