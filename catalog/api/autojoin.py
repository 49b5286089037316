"""POST /v1/autojoin: `juncture autojoin` over HTTP. Each side is CSV text or a lake table_id; the
answer is the CLI's `--json` document. Bodies up to `MAX_AUTOJOIN_BODY_BYTES`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.concurrency import run_in_threadpool

from catalog.api.pages import JSON

router = APIRouter(prefix="/v1", tags=["autojoin"])
MAX_AUTOJOIN_BODY_BYTES = 8 * 1024 * 1024
PATH = "/v1/autojoin"


class Side(BaseModel):
    """One table: `csv` (a header row, then data rows) or a lake `table_id`, exactly one."""

    model_config = ConfigDict(extra="forbid")
    csv: str | None = Field(None, description="the table as CSV text")
    table_id: str | None = Field(None, max_length=2048, description="a lake table")

    @model_validator(mode="after")
    def _one(self) -> Side:
        if (self.csv is None) == (self.table_id is None):
            raise ValueError("give exactly one of csv and table_id")
        return self


class AutojoinQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: Side
    target: Side


class PairAnswer(BaseModel):
    source_row: int
    target_row: int


class AutojoinAnswer(BaseModel):
    pairs: list[PairAnswer]
    program: str | None
    source_columns: list[str]
    target_columns: list[str]
    coverage: int
    fuzzy: bool


@router.post("/autojoin", response_model=AutojoinAnswer, summary="Join two tables through a learned transformation")
async def autojoin_route(query: AutojoinQuery, request: Request) -> JSON:
    settings = request.app.state.settings
    return JSON(await run_in_threadpool(_answer, query, settings))


def _answer(query: AutojoinQuery, settings: Any) -> dict[str, Any]:
    from catalog.search.autojoin.join import autojoin  # deferred: numpy and pyarrow load on the first request
    from catalog.search.autojoin.settings import autojoin_settings  # deferred: as above
    from catalog.search.autojoin.tables import csv_table, lake_table  # deferred: as above

    def side(s: Side, what: str) -> Any:
        if s.csv is not None:
            return csv_table(s.csv, what=f"the {what} CSV")
        assert s.table_id is not None
        return lake_table(s.table_id, settings)

    source, target = side(query.source, "source"), side(query.target, "target")
    return autojoin(source, target, autojoin_settings(settings)).as_dict()
