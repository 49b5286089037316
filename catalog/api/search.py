"""/v1/search/join and /v1/search/contain: online join and containment search for a column that need
not be in the lake (`juncture search join` and `search contain` over HTTP). The values travel in the
body, so these routes take bodies up to `MAX_SEARCH_BODY_BYTES` (every other route:
`app.MAX_REQUEST_BYTES`). The process keeps the index's token dictionary between requests
(`JoinRequest.hold_index`) and reloads it when a new index version is published, so a request pays
only for its own lists and sets. A search makes several reads; they all see one snapshot
(`one_snapshot`), so a publish committing meanwhile cannot mix two index versions into one answer."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from catalog.api.deps import MAX_ID_LENGTH, catalog_of, check_column_id
from catalog.api.pages import JSON
from catalog.core.errors import NotAvailableError
from catalog.db.engine import one_snapshot
from catalog.lookup import MAX_K
from catalog.search.family import JoinRequest, join_methods, search_kinds
from catalog.search.lshensemble.search import ContainRequest, search_contain

router = APIRouter(prefix="/v1/search", tags=["search"])
MAX_SEARCH_BODY_BYTES = 4 * 1024 * 1024
MAX_VALUES = 200_000


def _known_method(name: str | None) -> str | None:
    if name is not None and name not in join_methods():
        raise ValueError(f"unknown method (one of {', '.join(join_methods())})")
    return name


class JoinQuery(BaseModel):
    """A query column: its raw cell values (normalized as the index was; nulls and values no lake
    column holds cannot match)."""

    model_config = ConfigDict(extra="forbid")
    values: list[str | None] = Field(max_length=MAX_VALUES, description="the column's cell values")
    k: int = Field(10, ge=1, le=MAX_K, description="answers wanted")
    method: Annotated[str | None, AfterValidator(_known_method)] = Field(
        None, description="a `juncture search join --method` (default: the first registered, josie)"
    )
    exclude: Annotated[str | None, AfterValidator(lambda v: v if v is None else check_column_id(v))] = Field(
        None, max_length=MAX_ID_LENGTH, description="a lake column to leave out (the query itself)"
    )


class JoinAnswer(BaseModel):
    overlap: int
    column_id: str
    table_id: str
    column: str
    exact: bool


class JoinResults(BaseModel):
    method: str
    k: int
    results: list[JoinAnswer]  # best first: overlap descending, then column_id


@router.post("/join", response_model=JoinResults, summary="Top-k lake columns by distinct-value overlap")
async def search_join(query: JoinQuery, request: Request) -> JSON:
    methods = join_methods()
    if not methods:
        raise NotAvailableError("search join (no index family is registered)")
    method = methods[query.method or next(iter(methods))]
    wanted = JoinRequest(query.values, k=query.k, exclude_column_id=query.exclude, hold_index=True)
    with one_snapshot(catalog_of(request)) as conn:
        rows: list[dict[str, Any]] = method.run(conn, wanted)
    return JSON({"method": method.name, "k": query.k, "results": rows})


class ContainQuery(BaseModel):
    """A query column's raw cell values and the least share of its distinct values a lake column
    must hold."""

    model_config = ConfigDict(extra="forbid")
    values: list[str | None] = Field(max_length=MAX_VALUES, description="the column's cell values")
    threshold: float = Field(gt=0.0, le=1.0, description="least containment |Q ∩ X| / |Q|")
    k: int | None = Field(None, ge=1, le=MAX_K, description="at most this many answers (default: all)")
    verify: bool = Field(True, description="exact containment from the stored sets; false positives dropped")


class ContainAnswer(BaseModel):
    containment: float
    overlap: int | None
    estimate: float
    size: int
    column_id: str
    table_id: str
    column: str
    exact: bool


class ContainResults(BaseModel):
    threshold: float
    results: list[ContainAnswer]  # best first: containment descending, then column_id


@router.post("/contain", response_model=ContainResults, summary="Lake columns holding a share of your values")
async def search_contain_route(query: ContainQuery, request: Request) -> JSON:
    if "contain" not in search_kinds():
        raise NotAvailableError("search contain")
    wanted = ContainRequest(query.values, threshold=query.threshold, k=query.k, verify=query.verify, hold_index=True)
    with one_snapshot(catalog_of(request)) as conn:
        rows = search_contain(conn, wanted)
    return JSON({"threshold": query.threshold, "results": rows})
