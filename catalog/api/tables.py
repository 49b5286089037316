"""/v1/tables: the tables of the catalog and one table's record."""

from __future__ import annotations

from fastapi import APIRouter, Request

from catalog import lookup
from catalog.api.deps import SourceName, TableId, catalog_of
from catalog.api.pages import JSON, Limit, Offset, Page, page_response, record_response

router = APIRouter(prefix="/v1/tables", tags=["tables"])


@router.get("", response_model=Page[lookup.TableInfo], summary="List tables, by table_id")
async def list_tables(request: Request, limit: Limit = 100, offset: Offset = 0, source: SourceName = None) -> JSON:
    return page_response(lookup.tables(catalog_of(request), source=source, limit=limit, offset=offset), offset, limit)


@router.get("/{table_id:path}", response_model=lookup.TableInfo, summary="One table")
async def read_table(table_id: TableId, request: Request) -> JSON:
    return record_response(lookup.table(catalog_of(request), table_id))
