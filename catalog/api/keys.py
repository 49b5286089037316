"""/v1/keys: a table's unique and near-unique column combinations."""

from __future__ import annotations

from fastapi import APIRouter, Request

from catalog import lookup
from catalog.api.deps import TableId, catalog_of
from catalog.api.pages import JSON, record_response

router = APIRouter(prefix="/v1/keys", tags=["keys"])


@router.get("/{table_id:path}", response_model=list[lookup.KeyInfo], summary="A table's keys, best first")
async def read_keys(table_id: TableId, request: Request) -> JSON:
    return record_response(lookup.keys(catalog_of(request), table_id))
