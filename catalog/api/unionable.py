"""/v1/unionable: the precomputed tables that union with a table, with their column alignment."""

from __future__ import annotations

from fastapi import APIRouter, Request

from catalog import lookup
from catalog.api.deps import TableId, catalog_of
from catalog.api.pages import JSON, Limit, Offset, Page, page_response

router = APIRouter(prefix="/v1/unionable", tags=["unionable"])


@router.get(
    "/{table_id:path}",
    response_model=Page[lookup.UnionableInfo],
    summary="Top unionable tables and how their columns align",
)
async def read_unionable(table_id: TableId, request: Request, k: Limit = 10, offset: Offset = 0) -> JSON:
    return page_response(lookup.unionable(catalog_of(request), table_id, k, offset=offset), offset, k)
