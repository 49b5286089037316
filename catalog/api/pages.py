"""Paged responses: the items of one page and where the next one starts."""

from __future__ import annotations

from typing import Annotated, Generic, TypeVar

import orjson
from fastapi import Query
from fastapi.responses import Response
from pydantic import BaseModel

from catalog.lookup import MAX_K

T = TypeVar("T")
MAX_OFFSET = 1_000_000

Limit = Annotated[int, Query(ge=1, le=MAX_K, description="answers per page")]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="answers to skip")]


class Page(BaseModel, Generic[T]):
    items: list[T]
    offset: int
    limit: int
    next_offset: int | None  # None on the last page


class JSON(Response):
    """A JSON response encoded by orjson straight from the lookup dataclasses: the route's
    `response_model` documents the shape, and re-validating answers we built (or walking them
    into dicts for the stdlib encoder) cost more than the lookup's own query."""

    media_type = "application/json"

    def render(self, content: object) -> bytes:
        return orjson.dumps(content)


def page_response(items: list[T], offset: int, limit: int, *, more: bool | None = None) -> JSON:
    has_more = len(items) == limit if more is None else more
    return JSON(
        {"items": items, "offset": offset, "limit": limit, "next_offset": offset + len(items) if has_more else None}
    )


def record_response(item: object) -> JSON:
    return JSON(item)
