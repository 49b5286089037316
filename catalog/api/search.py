"""/v1/search/join, /v1/search/contain, /v1/search/nary and /v1/search/semantic: online join,
containment, n-ary and semantic join search for a column (or, for nary, a CSV table) that need not be
in the lake (`juncture search join`, `search contain`, `search nary` and `search semantic` over
HTTP). The values travel in the body, so these routes take bodies up to `MAX_SEARCH_BODY_BYTES`
(every other route: `app.MAX_REQUEST_BYTES`). The process keeps the index's token dictionary between requests
(`JoinRequest.hold_index`) and reloads it when a new index version is published, so a request pays
only for its own lists and sets. A search makes several reads; they all see one snapshot
(`one_snapshot`), so a publish committing meanwhile cannot mix two index versions into one answer."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from catalog.api.deps import MAX_ID_LENGTH, catalog_of, check_column_id
from catalog.api.pages import JSON
from catalog.core.errors import NotAvailableError, UserError
from catalog.db.engine import one_snapshot
from catalog.lookup import MAX_K
from catalog.search.family import JoinRequest, join_methods, search_kinds
from catalog.search.lshensemble.search import ContainRequest, search_contain
from catalog.search.mate import METHODS as NARY_METHODS
from catalog.search.mate.family import search_rows
from catalog.search.mate.query import choose_key, parse_csv
from catalog.search.mate.search import NaryRequest
from catalog.search.pexeso import METHODS as SEMANTIC_METHODS
from catalog.search.pexeso.family import DEFAULT_T, DEFAULT_TAU, SemanticRequest
from catalog.search.pexeso.family import search_rows as semantic_rows
from catalog.search.pexeso.settings import pexeso_settings

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


class NaryAnswer(BaseModel):
    table_id: str
    joinability: int  # distinct query key tuples the table holds under `mapping`
    mapping: dict[str, str]  # query key column -> the table's column


class NarySkipped(BaseModel):
    table_id: str
    column_choices: float  # choices of the table's columns the search would check, past its per-table bound


class NaryResults(BaseModel):
    key: list[str]
    detected: bool  # the key was detected in the query table (no `key` given)
    results: list[NaryAnswer]  # best first: joinability descending, then table_id
    skipped: list[NarySkipped]  # tables left out of the ranking (too many column choices); by table_id


@router.post(
    "/nary",
    response_model=NaryResults,
    summary="Tables joining with a CSV table on a composite key",
    openapi_extra={"requestBody": {"content": {"text/csv": {"schema": {"type": "string"}}}, "required": True}},
)
async def search_nary_route(
    request: Request,
    key: Annotated[
        str | None, Query(max_length=4096, description="key columns, comma-separated (default: detected)")
    ] = None,
    k: Annotated[int, Query(ge=1, le=MAX_K)] = 10,
    method: Annotated[str, Query(pattern="^(" + "|".join(NARY_METHODS) + ")$")] = "mate",
) -> JSON:
    if "nary" not in search_kinds():
        raise NotAvailableError("search nary")
    body = await request.body()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError("the request body is not UTF-8 text (send the query table as CSV)") from None
    headers, rows = parse_csv(text, what="the request body")
    columns, detected = choose_key(headers, rows, key)
    with one_snapshot(catalog_of(request)) as conn:
        results, skipped = search_rows(conn, NaryRequest(headers, rows, columns, k=k, method=method, hold_index=True))
    left_out = [s.as_dict() for s in skipped]
    return JSON({"key": columns, "detected": bool(detected), "results": results, "skipped": left_out})


class SemanticQuery(BaseModel):
    """A query column's raw cell values (duplicates count), the distance threshold `tau` as a fraction
    of the largest distance (2) and the share `T` of the query's values a column must match."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    values: list[str | None] = Field(max_length=MAX_VALUES, description="the column's cell values")
    tau: float = Field(DEFAULT_TAU, ge=0.0, le=1.0, description="distance threshold, a fraction of 2")
    threshold: float = Field(DEFAULT_T, gt=0.0, le=1.0, alias="T", description="least matched share of the query")
    k: int = Field(10, ge=1, le=MAX_K, description="answers wanted")
    method: str = Field("pexeso", pattern="^(" + "|".join(SEMANTIC_METHODS) + ")$")


class SemanticExample(BaseModel):
    query_value: str
    lake_value: str
    distance: float


class SemanticAnswer(BaseModel):
    table_id: str
    column: str
    column_id: str
    joinability: float
    n_matched: int
    examples: list[SemanticExample]
    exact: bool


class SemanticResults(BaseModel):
    tau: float
    T: float
    results: list[SemanticAnswer]  # best first: joinability descending, then table_id, column_id


@router.post("/semantic", response_model=SemanticResults, summary="Columns joining despite typos and formats")
async def search_semantic_route(query: SemanticQuery, request: Request) -> JSON:
    if "semantic" not in search_kinds():
        raise NotAvailableError("search semantic")
    conf = pexeso_settings(request.app.state.settings)
    wanted = SemanticRequest(
        query.values,
        query.tau,
        query.threshold,
        query.k,
        query.method,
        hold_index=True,
        memory_budget_mb=conf.memory_budget_mb,
    )
    with one_snapshot(catalog_of(request)) as conn:
        rows = semantic_rows(conn, wanted, conf)
    return JSON({"tau": query.tau, "T": query.threshold, "results": rows})
