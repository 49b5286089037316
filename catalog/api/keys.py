"""/v1/keys: a table's unique and near-unique column combinations."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from catalog import lookup
from catalog.api.deps import SessionDep, TableId
from catalog.api.pages import record_response

router = APIRouter(prefix="/v1/keys", tags=["keys"])


@router.get("/{table_id:path}", response_model=list[lookup.KeyInfo], summary="A table's keys, best first")
async def read_keys(table_id: TableId, session: SessionDep) -> JSONResponse:
    return record_response(lookup.keys(session, table_id))
