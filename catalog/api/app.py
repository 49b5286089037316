"""`create_app(settings)`: the HTTP lookup API over `catalog.lookup`, one router per resource.

Routes mirror `juncture lookup KIND ID`: `/v1/{table,columns,profile,keys,joinable,unionable}/ID`
plus `/v1/tables` (paged), and `juncture search join`: `POST /v1/search/join`. Ids hold `/`, `:`
and `#` and travel in the path (`{id:path}`); `#` must be sent as `%23`. Errors: malformed ids and
parameters 422, unknown ids 404, other user errors and values the database refuses (`DataError`)
400, requests over `MAX_REQUEST_BYTES` (body) or `MAX_URL_BYTES` (path + query) 413/414, an
unreachable catalog 503. The Airflow plugin mounts the same app.
The web pages (`catalog.web.pages`: Find at `/`, `/table`, `/search`, `/state`) are served by the
same app over the same lookups.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, OperationalError

from catalog.api import autojoin, columns, joinable, keys, search, tables, unionable
from catalog.core.errors import UnknownIdError, UserError
from catalog.core.settings import Settings
from catalog.db.engine import open_reader
from catalog.web import pages

log = logging.getLogger(__name__)
MAX_REQUEST_BYTES = 16 * 1024
MAX_URL_BYTES = 8 * 1024


class RequestSizeLimit:
    """Pure ASGI middleware: oversized URLs get 414 and bodies over the limit (`MAX_REQUEST_BYTES`;
    the search routes, whose bodies carry a column's values, `search.MAX_SEARCH_BODY_BYTES`; POST
    /v1/autojoin, two tables, `autojoin.MAX_AUTOJOIN_BODY_BYTES`) or of
    unknown length 413, before routing (a pure ASGI class adds far less per request than `@app.middleware`)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            url_bytes = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
            if url_bytes > MAX_URL_BYTES:
                await JSONResponse({"detail": f"request URL over {MAX_URL_BYTES} bytes"}, 414)(scope, receive, send)
                return
            headers = dict(scope.get("headers") or [])
            length = headers.get(b"content-length")
            chunked = headers.get(b"transfer-encoding", b"").lower() == b"chunked"
            path = _route_path(scope)
            if path == pages.SEARCH_PATH and scope.get("method") == "POST":  # caps its own body, on a page
                await self.app(scope, receive, send)
                return
            searching = path.startswith(search.router.prefix)
            limit = search.MAX_SEARCH_BODY_BYTES if searching else MAX_REQUEST_BYTES
            if path == autojoin.PATH:
                limit = autojoin.MAX_AUTOJOIN_BODY_BYTES
            if chunked or (length is not None and (not length.isdigit() or int(length) > limit)):
                await JSONResponse({"detail": f"request body over {limit} bytes"}, 413)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _route_path(scope: dict[str, Any]) -> str:
    """The request's path inside this app: without the prefix it is mounted under (`/juncture` in
    Airflow), which Starlette keeps in both `path` and `root_path`."""
    path: str = scope["path"]
    root: str = scope.get("root_path") or ""
    return path[len(root) :] if root and path.startswith(root) else path


def create_app(settings: Settings) -> FastAPI:
    """The API on `settings.catalog_url`."""
    app = FastAPI(
        title="Juncture catalog",
        version="1",
        description="Precomputed answers of the Juncture data-lake catalog: tables, columns, "
        "profiles, keys, joinable columns and unionable tables.",
    )
    app.state.engine = open_reader(settings.catalog_url)
    app.state.settings = settings  # the pages and POST /v1/autojoin read settings (lake, [index.*])
    app.state.connections = threading.local()  # one held connection per serving thread (deps.catalog_of)
    for module in (tables, columns, keys, joinable, unionable, search, autojoin):
        app.include_router(module.router)
    pages.add_pages(app)

    app.add_middleware(RequestSizeLimit)

    @app.exception_handler(UnknownIdError)
    async def unknown_id(_request: Request, exc: UnknownIdError) -> JSONResponse:
        return JSONResponse({"detail": str(exc), "kind": exc.kind, "id": exc.ident}, status_code=404)

    @app.exception_handler(UserError)
    async def user_error(_request: Request, exc: UserError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=400)

    @app.exception_handler(DataError)
    async def bad_value(_request: Request, exc: DataError) -> JSONResponse:
        """The database refused a value of the request (PostgreSQL: NUL in text, a number out of
        range...): the request's fault, whatever check let it through."""
        log.info("database refused a request value", extra={"error": str(exc.orig)})
        return JSONResponse({"detail": f"invalid value: {str(exc.orig).splitlines()[0]}"}, status_code=400)

    @app.exception_handler(OperationalError)
    async def catalog_down(_request: Request, exc: OperationalError) -> JSONResponse:
        log.warning("catalog unavailable", extra={"error": str(exc.orig)})
        return JSONResponse({"detail": "catalog database unavailable"}, status_code=503)

    @app.get("/v1/health", tags=["health"], summary="Liveness")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app
