"""The catalog's web pages: Find, a Table, Search with my table, and the Lake's state.

Server-rendered Jinja2 templates over the same functions the JSON API calls (`catalog.lookup`, the
search families, `catalog.lake_state`), so a page and `/v1/...` can never disagree. Jinja2
autoescapes every value (ids, headers, cell values, error messages), and links carry ids as
percent-encoded query parameters (`#`, `/`, `&` in ids stay data). No route writes: the search
page runs the online searches over the published indexes, as `POST /v1/search/...` does.

Links start from the request's `root_path`, so the same app works served by `juncture serve` at
`/` and mounted by the Airflow plugin at `/juncture/`. Each page reports its server time in a
`Server-Timing` header (and its footer).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from catalog import lookup
from catalog.api.deps import catalog_of, check_table_id, check_text
from catalog.core.errors import UnknownIdError, UserError
from catalog.core.identity import normalize_token
from catalog.db.engine import one_snapshot
from catalog.lake_state import lake_state
from catalog.search.autojoin.lists import transform_lists
from catalog.search.family import JoinRequest, join_methods, search_kinds
from catalog.search.mate.lists import nary_lists
from catalog.search.pexeso.lists import semantic_lists
from catalog.web.charts import neighbourhood_spec, profile_chart
from catalog.web.upload import (
    MAX_UPLOAD_BYTES,
    SearchForm,
    UploadTooLargeError,
    parse_form,
    read_capped,
    search_form,
)

if TYPE_CHECKING:
    from catalog.core.settings import Settings
    from catalog.search.autojoin.join import Table

HERE = Path(__file__).parent
PAGE_SIZE = 20
JOINABLE_SHOWN = 5
UNIONABLE_SHOWN = 10
TRANSFORM_SHOWN = 10
SEARCH_PATH = "/search"  # the upload route: it limits its own body (`catalog.web.upload`)

router = APIRouter(include_in_schema=False)
_environment = jinja2.Environment(
    loader=jinja2.FileSystemLoader(HERE / "templates"),
    autoescape=True,  # every template, whatever its name
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def add_pages(app: FastAPI) -> None:
    """The pages and their static files (CSS, the chart script, the vendored Vega libraries)."""
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")


def _render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    started = request.state.started if hasattr(request.state, "started") else time.perf_counter()
    context.setdefault("message", None)
    body = _environment.get_template(template).render(
        base=request.scope.get("root_path", "").rstrip("/"), request_path=request.url.path, **context
    )
    elapsed_ms = (time.perf_counter() - started) * 1000
    body = body.replace("__SERVER_MS__", f"{elapsed_ms:.0f}", 1)
    return HTMLResponse(body, status_code=status, headers={"Server-Timing": f"app;dur={elapsed_ms:.1f}"})


def _start(request: Request) -> None:
    request.state.started = time.perf_counter()


def _refuse_table_id(request: Request, table_id: str) -> HTMLResponse | None:
    """The 400 page for a `table_id` that is not one (None for a well-formed id)."""
    try:
        check_table_id(table_id)
    except ValueError as e:
        return _render(request, "error.html", 400, title="Not a table id", message=f"{table_id[:200]!r}: {e}")
    return None


def _int_param(raw: str | None, name: str, low: int = 0) -> int | None:
    if raw is None or raw.strip() == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise UserError(f"{name} must be a whole number, got {raw[:40]!r}") from None
    if value < low:
        raise UserError(f"{name} must be at least {low}, got {value}")
    return value


@router.get("/", response_class=HTMLResponse)
def find_page(
    request: Request,
    q: str = "",
    source: str = "",
    has_key: str = "",
    min_rows: str = "",
    max_rows: str = "",
    offset: str = "",
) -> HTMLResponse:
    """Find: tables by id, name, title or header, with filters, a page at a time."""
    _start(request)
    form = {"q": q, "source": source, "has_key": has_key, "min_rows": min_rows, "max_rows": max_rows}
    conn = catalog_of(request)
    sources = lookup.sources(conn)
    try:
        check_text(q)
        check_text(source)
        query = lookup.TableQuery(
            text=q.strip()[:200],
            source=source or None,
            has_key={"yes": True, "no": False}.get(has_key),
            min_rows=_int_param(min_rows, "min rows"),
            max_rows=_int_param(max_rows, "max rows"),
        )
        start = _int_param(offset, "offset") or 0
    except (UserError, ValueError) as e:
        return _render(request, "find.html", 400, form=form, sources=sources, tables=[], message=str(e), page=None)
    found = lookup.find_tables(conn, query, limit=PAGE_SIZE + 1, offset=start)
    page = {
        "offset": start,
        "previous": max(0, start - PAGE_SIZE) if start > 0 else None,
        "next": start + PAGE_SIZE if len(found) > PAGE_SIZE else None,
    }
    return _render(request, "find.html", form=form, sources=sources, tables=found[:PAGE_SIZE], page=page)


def _profile_or_none(conn: Any, column_id: str) -> lookup.ProfileInfo | None:
    try:
        return lookup.profile(conn, column_id)
    except UnknownIdError:  # a column published without a profile (none of its cells had a value)
        return None


@router.get("/table", response_class=HTMLResponse)
def table_page(request: Request, id: str = "") -> HTMLResponse:
    """A table: its columns with profiles and charts, keys, joinable columns, unionable tables, and
    the tables joining on its composite keys."""
    _start(request)
    if (refused := _refuse_table_id(request, id)) is not None:
        return refused
    conn = catalog_of(request)
    try:
        with one_snapshot(conn):
            info = lookup.table(conn, id)
            columns = lookup.columns(conn, id)
            keys = lookup.keys(conn, id)
            profiles = {c.column_id: _profile_or_none(conn, c.column_id) for c in columns}
            joinable = {c.column_id: lookup.joinable(conn, c.column_id, k=JOINABLE_SHOWN) for c in columns}
            semantic = semantic_lists(conn, id, k=JOINABLE_SHOWN)
            transform = transform_lists(conn, id, k=JOINABLE_SHOWN)
            unionable = lookup.unionable(conn, id, k=UNIONABLE_SHOWN)
            nary = nary_lists(conn, id, k=UNIONABLE_SHOWN)
    except UnknownIdError as e:
        return _render(request, "error.html", 404, title="Unknown table", message=str(e))
    charts = {cid: profile_chart(p) if p is not None else None for cid, p in profiles.items()}
    edges = [("join", j.table_id) for answers in joinable.values() for j in answers]
    edges += [("semantic", j.table_id) for answers in semantic.values() for j in answers]
    edges += [("union", u.table_id) for u in unionable] + [("n-ary", t.table_id) for n in nary for t in n.tables]
    graph = neighbourhood_spec(id, edges, href=f"{request.scope.get('root_path', '').rstrip('/')}/table?id=")
    return _render(
        request,
        "table.html",
        info=info,
        columns=columns,
        keys=keys,
        profiles=profiles,
        charts=charts,
        joinable=joinable,
        semantic=semantic,
        transform=transform,
        unionable=unionable,
        nary=nary,
        graph=graph,
    )


@router.get("/table/transform", response_class=HTMLResponse)
def table_transform_page(request: Request, id: str = "") -> HTMLResponse:
    """The lake tables a table joins with after a learned transformation: Auto-Join's `search
    transform` with the lake table as the query. Run on request from the table page (a button with
    a progress line), as it reads candidate tables' cells from the lake and takes seconds."""
    _start(request)
    if (refused := _refuse_table_id(request, id)) is not None:
        return refused
    try:
        lookup.table(catalog_of(request), id)
    except UnknownIdError as e:
        return _render(request, "error.html", 404, title="Unknown table", message=str(e))
    return _render(request, "transform.html", table_id=id, answers=_section(_table_transform_answers, request, id))


def _table_transform_answers(request: Request, table_id: str) -> dict[str, Any]:
    """`search transform` of the lake table `table_id`, itself left out."""

    def lake_query(settings: Settings) -> Table:
        from catalog.search.autojoin.tables import lake_table  # deferred: the search loads when it runs

        try:
            return lake_table(table_id, settings)
        except UnknownIdError:  # published, but this server's lake does not hold it (another home's)
            raise UserError(f"this server's lake ({settings.lake}) does not hold {table_id}") from None

    answers = _transform_search(request, lake_query, TRANSFORM_SHOWN + 1)
    answers["results"] = [a for a in answers["results"] if a["table_id"] != table_id][:TRANSFORM_SHOWN]
    return answers


@router.get(SEARCH_PATH, response_class=HTMLResponse)
def search_page(request: Request) -> HTMLResponse:
    """Search with my table: the empty form."""
    _start(request)
    return _render(request, "search.html", form=None, answers=None, max_upload=MAX_UPLOAD_BYTES)


def _answer(results: list[Any] | None = None, error: str | None = None, **more: Any) -> dict[str, Any]:
    """One search's section of the page: its rows, or why it has none."""
    return {
        "results": results or [],
        "error": error,
        "method": None,
        "key": [],
        "detected": False,
        "skipped": False,
        **more,
    }


def _join_answers(conn: Any, values: list[str | None], k: int) -> dict[str, Any]:
    methods = join_methods()
    if not methods:
        return _answer(error="no join index is registered")
    method = next(iter(methods.values()))
    rows = method.run(conn, JoinRequest(values, k=k, hold_index=True))
    return _answer(rows, method=method.name)


def _contain_answers(conn: Any, values: list[str | None], threshold: float, k: int) -> dict[str, Any]:
    if "contain" not in search_kinds():
        return _answer(error="containment search is not available")
    from catalog.search.lshensemble.search import ContainRequest, search_contain  # deferred: loads pyarrow

    return _answer(search_contain(conn, ContainRequest(values, threshold=threshold, k=k, hold_index=True)))


def _semantic_answers(conn: Any, values: list[str | None], k: int, settings: Settings) -> dict[str, Any]:
    if "semantic" not in search_kinds():
        return _answer(error="semantic search is not available")
    from catalog.search.pexeso.family import SemanticRequest, search_rows  # deferred: loads numpy and the index
    from catalog.search.pexeso.settings import pexeso_settings  # deferred: as above

    conf = pexeso_settings(settings)
    request = SemanticRequest(values, k=k, hold_index=True, memory_budget_mb=conf.memory_budget_mb)
    return _answer(search_rows(conn, request, conf), tau=request.tau, threshold=request.threshold)


def _nary_answers(conn: Any, form: SearchForm) -> dict[str, Any]:
    from catalog.search.mate.family import search_rows  # deferred: the n-ary search loads when it runs
    from catalog.search.mate.query import choose_key  # deferred: as above
    from catalog.search.mate.search import NaryRequest  # deferred: as above

    headers, rows = form.table
    if "nary" not in search_kinds():
        return _answer(error="n-ary search is not available")
    if len(headers) < 2:
        return _answer(error="n-ary search needs a table of two or more columns")
    try:
        key, detected = choose_key(headers, rows, form.key)
    except UserError as e:
        return _answer(error=str(e).replace("pass --key COL,COL", "name its columns under Key columns"))
    results, skipped = search_rows(conn, NaryRequest(headers, rows, key, k=form.k, hold_index=True))
    return _answer(results, key=key, detected=bool(detected), skipped=[s.describe() for s in skipped])


def _transform_answers(request: Request, form: SearchForm) -> dict[str, Any]:
    """Lake tables the query joins with through a learned transformation (Auto-Join; reads the
    candidates' cells from the lake, so seconds: asked for by a checkbox)."""
    if not form.transform:
        return _answer(error=None, skipped=True)

    def uploaded(_: Settings) -> Table:
        from catalog.search.autojoin.join import Table  # deferred: the search loads when it runs

        return Table.from_rows(*form.table)

    return _transform_search(request, uploaded, form.k)


def _transform_search(request: Request, query: Callable[[Settings], Table], k: int) -> dict[str, Any]:
    """Auto-Join's `search transform` of the table `query` gives (both the upload and a lake
    table's page ask it): lake tables joining it after a learned transformation, best k."""
    if "transform" not in search_kinds():
        return _answer(error="transformation search is not available")
    from catalog.search.autojoin.settings import autojoin_settings  # deferred: the search loads when it runs
    from catalog.search.autojoin.transform import search_transform  # deferred: as above

    settings = request.app.state.settings
    return _answer(search_transform(query(settings), settings, autojoin_settings(settings), k=k))


def _section(search: Any, *args: Any) -> dict[str, Any]:
    """One search's answers, or the reason it has none (an index not built yet, a key not found):
    the other searches of the page still answer."""
    try:
        answers: dict[str, Any] = search(*args)
    except UserError as e:
        return _answer(error=str(e))
    return answers


@router.post(SEARCH_PATH, response_class=HTMLResponse)
async def search_results(request: Request) -> HTMLResponse:
    """Search with my table: join and containment on a column, n-ary on a key, in one snapshot;
    transformation joins when asked for."""
    _start(request)
    try:
        fields = await parse_form(request, await read_capped(request))
        form = await search_form(fields)
    except UserError as e:  # over the cap (413), or not a table we can read (400)
        status = 413 if isinstance(e, UploadTooLargeError) else 400
        return _render(
            request, "search.html", status, form=None, answers=None, max_upload=MAX_UPLOAD_BYTES, message=str(e)
        )
    headers, rows = form.table
    column = form.column or headers[0]
    at = headers.index(column)
    values = [r[at] if at < len(r) else None for r in rows]
    n_distinct = len({t for t in map(normalize_token, values) if t is not None})
    conn = catalog_of(request)
    with one_snapshot(conn):
        answers = {
            "join": _section(_join_answers, conn, values, form.k),
            "contain": _section(_contain_answers, conn, values, form.threshold, form.k),
            "nary": _section(_nary_answers, conn, form),
            "semantic": _section(_semantic_answers, conn, values, form.k, request.app.state.settings),
        }
    answers["transform"] = _section(_transform_answers, request, form)  # the lake, not the catalog
    return _render(
        request,
        "search.html",
        form=form,
        column=column,
        n_rows=len(rows),
        n_distinct=n_distinct,
        answers=answers,
        max_upload=MAX_UPLOAD_BYTES,
    )


@router.get("/state", response_class=HTMLResponse)
def state_page(request: Request) -> HTMLResponse:
    """The lake's state: sources, publish runs, index versions and dirty shares, the next rebuild."""
    _start(request)
    conn = catalog_of(request)
    with one_snapshot(conn):
        state = lake_state(conn, request.app.state.settings)
    return _render(request, "state.html", state=state)
