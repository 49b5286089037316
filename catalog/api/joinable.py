"""/v1/joinable: the precomputed columns that join with a column."""

from __future__ import annotations

from fastapi import APIRouter, Request

from catalog import lookup
from catalog.api.deps import ColumnId, catalog_of
from catalog.api.pages import JSON, Limit, Offset, Page, page_response

router = APIRouter(prefix="/v1/joinable", tags=["joinable"])


@router.get(
    "/{column_id:path}",
    response_model=Page[lookup.JoinableInfo],
    summary="Top joinable columns by distinct-value overlap",
)
async def read_joinable(column_id: ColumnId, request: Request, k: Limit = 10, offset: Offset = 0) -> JSON:
    return page_response(lookup.joinable(catalog_of(request), column_id, k, offset=offset), offset, k)
