"""Bad input to the HTTP API is a 4xx with a message on both databases, never a 500; and ids with
the characters real headers and file names hold (RTL marks, combining marks, no-break spaces, 10 KB
of text in the catalog) stay reachable."""

from __future__ import annotations

import datetime as dt
from urllib.parse import quote

from fastapi import APIRouter
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.exc import DataError

from catalog.api.app import create_app
from catalog.core.settings import Settings
from catalog.db.engine import open_catalog, session_scope
from catalog.db.models import CatalogColumn, CatalogTable

NOW = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)
TABLE = "file:\u05e9\u05dc\u05d5\u05dd/r\u00e9sum\u00e9.csv"
HEADERS = ["\u202eevil\u202c", "e\u0301\u0301", "a\u00a0b", "\u200bzero"]


def _seed(settings: Settings) -> None:
    engine = open_catalog(settings.catalog_url)
    with session_scope(engine) as s:
        s.add(
            CatalogTable(
                table_id=TABLE,
                name="résumé",
                n_rows=1,
                n_columns=len(HEADERS),
                published_at=NOW,
                source_name="folder:/data/\u05e9",
            )
        )
        for pos, h in enumerate(HEADERS, start=1):
            s.add(CatalogColumn(column_id=f"{TABLE}#{h}", table_id=TABLE, position=pos, header=h))
    engine.dispose()


def test_nul_and_control_characters_are_422_on_every_route(catalog_settings: Settings) -> None:
    _seed(catalog_settings)
    client = TestClient(create_app(catalog_settings), raise_server_exceptions=False)
    assert client.get("/v1/tables", params={"source": "\x00"}).status_code == 422  # was 500 on PostgreSQL
    assert client.get("/v1/tables?source=%00").status_code == 422
    assert client.get("/v1/tables?source=a%00b").json()["detail"]
    for route in ("tables", "columns", "keys", "unionable"):
        for bad in (TABLE + "\x00", "file:\x00", "file:a\x01.csv", "file:a\x7f"):
            response = client.get(f"/v1/{route}/{quote(bad, safe='')}")
            assert response.status_code == 422, (route, bad, response.status_code)
            assert response.json()["detail"]
    for route in ("profile", "joinable"):
        for bad in (f"{TABLE}#\x00", f"{TABLE}#a\x00b", "file:\x00#x", f"{TABLE}#\x9f"):
            response = client.get(f"/v1/{route}/{quote(bad, safe='')}")
            assert response.status_code == 422, (route, bad, response.status_code)


def test_ids_with_rtl_and_combining_marks_are_reachable(catalog_settings: Settings) -> None:
    _seed(catalog_settings)
    client = TestClient(create_app(catalog_settings), raise_server_exceptions=False)
    assert client.get(f"/v1/tables/{quote(TABLE, safe='')}").json()["table_id"] == TABLE
    columns = client.get(f"/v1/columns/{quote(TABLE, safe='')}").json()["items"]
    assert [c["column"] for c in columns] == HEADERS
    for h in HEADERS:  # no profile was published: a 404 that names the column, not a 422
        response = client.get(f"/v1/profile/{quote(f'{TABLE}#{h}', safe='')}")
        assert response.status_code == 404 and response.json()["id"] == f"{TABLE}#{h}"
        assert client.get(f"/v1/joinable/{quote(f'{TABLE}#{h}', safe='')}").json()["items"] == []
    listed = client.get("/v1/tables", params={"source": "folder:/data/\u05e9"}).json()["items"]
    assert [t["table_id"] for t in listed] == [TABLE]
    long_source = "folder:/" + "x" * 3000
    assert client.get("/v1/tables", params={"source": long_source}).json()["items"] == []


def test_a_value_the_database_refuses_is_a_400(catalog_settings: Settings) -> None:
    """Whatever check lets a value through, the database's refusal is the request's fault."""
    app = create_app(catalog_settings)
    router = APIRouter()

    @router.get("/v1/probe")
    async def probe(value: str) -> dict[str, str]:
        with app.state.engine.connect() as conn:
            if conn.dialect.name == "postgresql":  # a real refusal: PostgreSQL stores no NUL
                conn.execute(text("SELECT CAST(:v AS text)"), {"v": value})
            else:  # SQLite stores NUL: raise what the dialect would on a refused value
                raise DataError("SELECT CAST(? AS text)", (value,), ValueError("text cannot contain NUL"))
        return {"value": value}

    app.include_router(router)
    client = TestClient(app, raise_server_exceptions=False)
    response = client.get("/v1/probe", params={"value": "a\x00b"})
    assert response.status_code == 400 and "invalid value" in response.json()["detail"]
