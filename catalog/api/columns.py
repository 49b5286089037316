"""/v1/columns (a table's columns) and /v1/profile (one column's profile)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from catalog import lookup
from catalog.api.deps import ColumnId, TableId, catalog_of
from catalog.api.pages import JSON, Limit, Offset, Page, page_response, record_response

router = APIRouter(prefix="/v1", tags=["columns"])


@router.get("/columns/{table_id:path}", response_model=Page[lookup.ColumnInfo], summary="A table's columns")
async def read_columns(table_id: TableId, request: Request, limit: Limit = 1000, offset: Offset = 0) -> JSON:
    cols = lookup.columns(catalog_of(request), table_id)
    return page_response(cols[offset : offset + limit], offset, limit, more=len(cols) > offset + limit)


@router.get("/profile/{column_id:path}", response_model=lookup.ProfileInfo, summary="A column's profile")
async def read_profile(column_id: ColumnId, request: Request) -> JSON:
    return record_response(lookup.profile(catalog_of(request), column_id))
