"""The Juncture Airflow plugin: portal connections for the crawl, and the catalog in the API server.

* **Portal connections.** `SocrataPortalHook` (conn type `juncture_socrata`: host = portal URL,
  password = app token, extra `{"domain": ...}`) and `CkanPortalHook` (`juncture_ckan`: host = URL,
  password = API key) turn an Airflow connection into the credentials of a configured source; map a
  source to its connection with `[airflow] source_connections = {source = "conn_id"}` in juncture.toml.
  Secrets then live in Airflow (UI, env `AIRFLOW_CONN_…`, a secrets backend), not in the TOML file.
* **Catalog in the API server** (`fastapi_apps`, mounted at `/juncture`): the catalog's app
  (`catalog.api.app.create_app`) unchanged: its web pages (`catalog.web`: Find at `/juncture/`, a
  table, search with my table, the lake's state) and its HTTP API (`/juncture/v1/…`, and
  `/juncture/api/v1/…`), built on first request so loading the plugin reads no settings and opens
  no database.

Run it: `airflow standalone` with `AIRFLOW__CORE__PLUGINS_FOLDER=<repo>/plugins`, then open
http://localhost:8080/juncture/.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, cast

from airflow.plugins_manager import AirflowPlugin
from airflow.sdk import BaseHook
from fastapi import FastAPI

from catalog.core.settings import Settings, SourceConfig, load_settings


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


def create_ui_app() -> FastAPI:
    """The app Airflow mounts at `/juncture`: the catalog app (its web pages at `/juncture/`, its API
    at `/juncture/v1/…`, also at `/juncture/api/v1/…` as before), created on the first request."""
    app = FastAPI(title="Juncture catalog UI")
    app.mount("/api", _api)
    app.mount("/", _api)
    return app


class JuncturePlugin(AirflowPlugin):
    name = "juncture"
    # Airflow declares these as (list) attributes of its plugin class, so they are not ClassVars here.
    fastapi_apps = [{"app": create_ui_app(), "url_prefix": "/juncture", "name": "Juncture catalog"}]  # noqa: RUF012
    external_views = [{"name": "Juncture catalog", "href": "/juncture/", "destination": "nav"}]  # noqa: RUF012
