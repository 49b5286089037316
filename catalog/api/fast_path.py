"""The two hot lookups (`/v1/joinable/ID`, `/v1/unionable/ID`) answered without FastAPI's request
machinery, when the request is well formed.

FastAPI resolves a route's parameters through its generic solver, which re-inspects every
parameter's annotation on every request: for a lookup that is about a third of the in-process
cost, more than the catalog read. This ASGI middleware takes a GET of one of those two paths whose
id passes the same checks as the routes' (`deps`) and whose query holds nothing but `k` and
`offset` as plain numbers in range, runs the same lookup and writes the same page
(`pages.page_response`). Anything else — a malformed id or parameter, an unknown id, any error —
goes to the FastAPI app as if this layer were not there, so validation errors, 404s and 503s and
the OpenAPI document all come from the routes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from catalog import lookup
from catalog.api.deps import MAX_ID_LENGTH, catalog_of_state, check_column_id, check_table_id
from catalog.api.pages import MAX_OFFSET, page_response

_ROUTES: dict[str, tuple[Callable[[str], str], Callable[..., list[Any]]]] = {
    "/v1/joinable/": (check_column_id, lookup.joinable),
    "/v1/unionable/": (check_table_id, lookup.unionable),
}
_HEADERS = [(b"content-type", b"application/json")]


def _page(query: bytes) -> tuple[int, int] | None:
    """(k, offset) from a query of only `k` and `offset` as plain in-range numbers, else None."""
    k, offset = 10, 0
    for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if not value.isascii() or not value.isdigit() or len(value) > 7:
            return None
        if name == "k":
            k = int(value)
        elif name == "offset":
            offset = int(value)
        else:
            return None
    if not 1 <= k <= lookup.MAX_K or not 0 <= offset <= MAX_OFFSET:
        return None
    return k, offset


class LookupFastPath:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            body = self._answer(scope)
            if body is not None:
                await send(
                    {
                        "type": "http.response.start",
                        "status": 200,
                        "headers": [*_HEADERS, (b"content-length", str(len(body)).encode())],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)

    def _answer(self, scope: dict[str, Any]) -> bytes | None:
        path: str = scope["path"]
        prefix = path[: path.find("/", 4) + 1] if path.startswith("/v1/") else ""
        route = _ROUTES.get(prefix)
        if route is None:
            return None
        check, read = route
        page = _page(scope.get("query_string") or b"")
        if page is None:
            return None
        k, offset = page
        ident = path[len(prefix) :]
        if len(ident) > MAX_ID_LENGTH:
            return None
        try:
            ident = check(ident)
            items = read(catalog_of_state(scope["app"].state), ident, k, offset=offset)  # Starlette sets "app"
        except Exception:  # the routes answer every failure (422, 404, 503) themselves
            return None
        return bytes(page_response(items, offset, k).body)
