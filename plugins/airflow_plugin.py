"""The Juncture Airflow plugin: portal connections for the crawl, and the catalog in the API server.

* **Portal connections.** `SocrataPortalHook` (conn type `juncture_socrata`: host = portal URL,
  password = app token, extra `{"domain": ...}`) and `CkanPortalHook` (`juncture_ckan`: host = URL,
  password = API key) turn an Airflow connection into the credentials of a configured source; map a
  source to its connection with `[airflow] source_connections = {source = "conn_id"}` in juncture.toml.
  Secrets then live in Airflow (UI, env `AIRFLOW_CONN_…`, a secrets backend), not in the TOML file.
* **Catalog in the API server** (`fastapi_apps`, mounted at `/juncture`): `/juncture/` is a small page
  to search a table and see its columns, joinable columns and unionable tables; `/juncture/api/…` is
  the catalog's HTTP API (`catalog.api.app.create_app`), built on first request so loading the plugin
  reads no settings and opens no database.

Run it: `airflow standalone` with `AIRFLOW__CORE__PLUGINS_FOLDER=<repo>/plugins`, then open
http://localhost:8080/juncture/.
"""

from __future__ import annotations

import dataclasses
import html
import threading
from typing import Any, cast
from urllib.parse import quote

from airflow.plugins_manager import AirflowPlugin
from airflow.sdk import BaseHook
from fastapi import FastAPI, Query
from fastapi.responses import HTMLResponse

from catalog.core.errors import UnknownIdError
from catalog.core.settings import Settings, SourceConfig, load_settings
from catalog.db.engine import session_scope


class _PortalHook(BaseHook):
    conn_name_attr = "conn_id"
    kind = ""

    def __init__(self, conn_id: str) -> None:
        super().__init__()
        self.conn_id = conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["schema", "port", "login"],
            "relabeling": {"host": "Portal URL", "password": "App token" if cls.kind == "socrata" else "API key"},
        }

    def credentials(self) -> dict[str, str]:
        conn = self.get_connection(self.conn_id)
        url = conn.host or ""
        if url and "://" not in url:
            url = f"https://{url}"
        out = {"url": url.rstrip("/")}
        secret = conn.password or ""
        out["app_token" if self.kind == "socrata" else "api_key"] = secret
        domain = (conn.extra_dejson or {}).get("domain")
        if domain and self.kind == "socrata":
            out["domain"] = domain
        return {k: v for k, v in out.items() if v}

    def apply(self, source: SourceConfig) -> SourceConfig:
        if source.kind != self.kind:
            raise ValueError(
                f"source {source.name!r} is a {source.kind} source, connection {self.conn_id!r} is for {self.kind}"
            )
        return dataclasses.replace(source, **cast(dict[str, Any], self.credentials()))


class SocrataPortalHook(_PortalHook):
    conn_type = "juncture_socrata"
    hook_name = "Socrata portal (Juncture)"
    default_conn_name = "juncture_socrata_default"
    kind = "socrata"


class CkanPortalHook(_PortalHook):
    conn_type = "juncture_ckan"
    hook_name = "CKAN portal (Juncture)"
    default_conn_name = "juncture_ckan_default"
    kind = "ckan"


def with_portal_credentials(settings: Settings, source_name: str) -> Settings:
    """`settings` with the source's token/key taken from its Airflow connection, when one is mapped."""
    conn_id = settings.airflow.source_connections.get(source_name)
    if not conn_id:
        return settings
    source = settings.source(source_name)
    hook = (SocrataPortalHook if source.kind == "socrata" else CkanPortalHook)(conn_id)
    sources = tuple(hook.apply(s) if s.name == source_name else s for s in settings.sources)
    return dataclasses.replace(settings, sources=sources)


# ------------------------------------------------------------------------------------ catalog app
class _LazyCatalogApi:
    """The catalog HTTP API, created with the process's settings on the first request."""

    def __init__(self) -> None:
        self._app: Any = None
        self._lock = threading.Lock()

    def get(self) -> Any:
        with self._lock:
            if self._app is None:
                try:
                    from catalog.api.app import create_app  # deferred: the API loads only when Airflow mounts the page
                except ImportError:  # the HTTP API module is not in this build
                    self._app = FastAPI(title="Juncture catalog (API not available)")
                else:
                    self._app = create_app(load_settings())
            return self._app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.get()(scope, receive, send)


_api = _LazyCatalogApi()


def _session():

    return session_scope(_api.get().state.engine)


_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse}"
    "td,th{border-bottom:1px solid #ddd;padding:.25em .6em;text-align:left}code{font-size:.9em}"
)


def _page(title: str, body: str) -> HTMLResponse:
    form = (
        '<form action="." method="get"><input name="q" size="50" placeholder="table id or name contains…">'
        " <button>Search</button></form>"
    )
    return HTMLResponse(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body><h1><a href='.'>Juncture catalog</a></h1>{form}"
        f"{body}<p><a href='api/docs'>HTTP API</a></p></body></html>"
    )


def _link(table_id: str) -> str:
    return f"<a href='table?id={quote(table_id, safe='')}'><code>{html.escape(table_id)}</code></a>"


def create_ui_app() -> FastAPI:
    from catalog import lookup  # deferred: the lookup loads only when Airflow mounts the page

    app = FastAPI(title="Juncture catalog UI")
    app.mount("/api", _api)

    @app.get("/", response_class=HTMLResponse)
    def search(q: str = Query("", max_length=200)) -> HTMLResponse:
        with _session() as s:
            found = [
                t
                for t in lookup.tables(s, limit=5000)
                if q.casefold() in t.table_id.casefold() or q.casefold() in (t.name or "").casefold()
            ]
        rows = "".join(
            f"<tr><td>{_link(t.table_id)}</td><td>{html.escape(t.title or t.name)}</td>"
            f"<td>{t.n_rows}</td><td>{t.n_columns}</td></tr>"
            for t in found[:200]
        )
        return _page(
            "Juncture catalog",
            f"<p>{len(found)} tables</p><table><tr><th>table</th><th>name</th>"
            f"<th>rows</th><th>columns</th></tr>{rows}</table>",
        )

    @app.get("/table", response_class=HTMLResponse)
    def table(id: str = Query(..., max_length=2000)) -> HTMLResponse:

        with _session() as s:
            try:
                info = lookup.table(s, id)
            except UnknownIdError as e:
                return _page("unknown table", f"<p>{html.escape(str(e))}</p>")
            cols = lookup.columns(s, id)
            joins = {c.column_id: lookup.joinable(s, c.column_id, k=5) for c in cols}
            unions = lookup.unionable(s, id, k=10)
        col_rows = "".join(
            f"<tr><td>{html.escape(c.column)}</td><td>"
            + ", ".join(
                f"{_link(j.table_id)}.{html.escape(j.column)} ({j.overlap} shared, {j.containment:.0%})"
                for j in joins[c.column_id]
            )
            + "</td></tr>"
            for c in cols
        )
        union_rows = "".join(
            f"<tr><td>{_link(u.table_id)}</td><td>{u.score:.3f}</td><td>{u.n_aligned}</td></tr>" for u in unions
        )
        body = (
            f"<h2><code>{html.escape(info.table_id)}</code></h2><p>{html.escape(info.title or info.name)} — "
            f"{info.n_rows} rows, {info.n_columns} columns</p><h3>Columns and joinable columns</h3>"
            f"<table><tr><th>column</th><th>joins with</th></tr>{col_rows}</table>"
            f"<h3>Unionable tables</h3><table><tr><th>table</th><th>score</th><th>aligned columns</th></tr>"
            f"{union_rows or '<tr><td>none</td></tr>'}</table>"
        )
        return _page(info.table_id, body)

    return app


class JuncturePlugin(AirflowPlugin):
    name = "juncture"
    # Airflow declares these as (list) attributes of its plugin class, so they are not ClassVars here.
    fastapi_apps = [{"app": create_ui_app(), "url_prefix": "/juncture", "name": "Juncture catalog"}]  # noqa: RUF012
    external_views = [{"name": "Juncture catalog", "href": "/juncture/", "destination": "nav"}]  # noqa: RUF012
