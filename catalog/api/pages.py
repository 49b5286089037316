"""Paged responses: the items of one page and where the next one starts."""

from __future__ import annotations

from typing import Annotated, Generic, TypeVar

from fastapi import Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from catalog.lookup import MAX_K, as_dict

T = TypeVar("T")
MAX_OFFSET = 1_000_000

Limit = Annotated[int, Query(ge=1, le=MAX_K, description="answers per page")]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="answers to skip")]


class Page(BaseModel, Generic[T]):
    items: list[T]
    offset: int
    limit: int
    next_offset: int | None  # None on the last page


def page_response(items: list[T], offset: int, limit: int, *, more: bool | None = None) -> JSONResponse:
    """A `Page` as JSON, serialised straight from the lookup dataclasses (the route's
    `response_model` documents it; re-validating answers we built would double the cost)."""
    has_more = len(items) == limit if more is None else more
    return JSONResponse({"items": as_dict(items), "offset": offset, "limit": limit,
                         "next_offset": offset + len(items) if has_more else None})


def record_response(item: object) -> JSONResponse:
    return JSONResponse(as_dict(item))
