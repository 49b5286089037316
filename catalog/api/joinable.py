"""/v1/joinable: the precomputed columns that join with a column; with `semantic=true`, the ones
that join with it in embedding space and not exactly (PEXESO's lists); with `transform=true`, the
ones it joins with after a transformation, each with its program (Auto-Join's lists); or with `key`, the
precomputed tables that join with a table on one of its composite keys (MATE's n-ary lists)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.exceptions import RequestValidationError

from catalog import lookup
from catalog.api.deps import MAX_ID_LENGTH, catalog_of, check_column_id, check_table_id, check_text
from catalog.api.pages import JSON, Limit, Offset, Page, page_response
from catalog.search.autojoin.lists import TransformJoinableInfo, transform_joinable
from catalog.search.mate.lists import NaryJoinableInfo, nary_joinable
from catalog.search.pexeso.lists import SemanticJoinableInfo, semantic_joinable

router = APIRouter(prefix="/v1/joinable", tags=["joinable"])

Ident = Annotated[
    str,
    Path(max_length=MAX_ID_LENGTH, description="a column_id (<table_id>#<header>, '#' as %23), or a table_id with key"),
]
Key = Annotated[
    str | None,
    Query(
        max_length=MAX_ID_LENGTH,
        description="COL,COL[,COL]: the table's n-ary joinable tables on this detected composite key",
    ),
]

Semantic = Annotated[
    bool,
    Query(description="the column's semantic joins: columns it matches in embedding space, not in its exact list"),
]

Transform = Annotated[
    bool,
    Query(description="the column's transformation joins: columns it joins after a learned program (Auto-Join)"),
]


@router.get(
    "/{column_id:path}",
    response_model=Page[lookup.JoinableInfo]
    | Page[NaryJoinableInfo]
    | Page[SemanticJoinableInfo]
    | Page[TransformJoinableInfo],
    summary="Top joinable columns by distinct-value overlap (or, with key, n-ary joinable tables)",
)
async def read_joinable(
    column_id: Ident,
    request: Request,
    k: Limit = 10,
    offset: Offset = 0,
    key: Key = None,
    semantic: Semantic = False,
    transform: Transform = False,
) -> JSON:
    _check("key", key, check_text)
    if semantic and key is not None:
        raise RequestValidationError([{"loc": ("query", "semantic"), "msg": "not with key", "type": "value_error"}])
    if transform and (key is not None or semantic):
        msg = "not with key or semantic"
        raise RequestValidationError([{"loc": ("query", "transform"), "msg": msg, "type": "value_error"}])
    if transform:
        _check("column_id", column_id, check_column_id)
        transforms = transform_joinable(catalog_of(request), column_id, k, offset=offset)
        return page_response(transforms, offset, k)
    if semantic:
        _check("column_id", column_id, check_column_id)
        answers = semantic_joinable(catalog_of(request), column_id, k, offset=offset)
        return page_response(answers, offset, k)
    if key is None:
        _check("column_id", column_id, check_column_id)
        return page_response(lookup.joinable(catalog_of(request), column_id, k, offset=offset), offset, k)
    _check("column_id", column_id, check_table_id)
    columns = [c.strip() for c in key.split(",")]
    return page_response(nary_joinable(catalog_of(request), column_id, columns, k, offset=offset), offset, k)


def _check(name: str, value: str | None, check: Callable[[Any], object]) -> None:
    """The validation a typed parameter gets, for a parameter whose kind depends on another."""
    try:
        check(value)
    except ValueError as error:
        where = "query" if name == "key" else "path"
        raise RequestValidationError([{"loc": (where, name), "msg": str(error), "type": "value_error"}]) from None
