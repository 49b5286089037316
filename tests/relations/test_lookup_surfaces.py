"""The lookup API, the CLI (`juncture lookup … --json`) and the HTTP API give the same answers,
and reject what they should: unknown ids (exit 2 / 404), malformed ids and oversized requests (4xx)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import httpx
import psutil
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import sessionmaker

from bench.josie_lake import store_index
from catalog import lookup
from catalog.api.app import create_app
from catalog.cli.main import main
from catalog.core.errors import UnknownIdError
from catalog.db.engine import make_engine, open_reader
from catalog.search.family import JoinRequest, join_methods
from catalog.search.josie import build_memory_index
from spark_jobs.publish import catalog as publish_catalog


@pytest.fixture
def published(two_states, catalog_settings, monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    settings = two_states.settings(catalog_settings, two_states.lake_a)
    publish_catalog.run(None, settings, two_states.batch_1)
    settings = two_states.settings(catalog_settings, two_states.lake_b)
    publish_catalog.run(None, settings, two_states.batch_2)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JUNCTURE_HOME", str(tmp_path))
    monkeypatch.setenv("JUNCTURE_CATALOG_URL", settings.catalog_url)
    monkeypatch.setenv("JUNCTURE_LAKE", settings.lake)
    return settings


def _cli_json(capsys, *argv: str):  # type: ignore[no-untyped-def]
    assert main(["lookup", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_lookup_cli_and_http_agree(two_states, published, capsys):
    engine = make_engine(published.catalog_url)
    client = TestClient(create_app(published))
    tables = sorted(t.table_id for t in two_states.tables_b)
    columns = [c for c in two_states.column_ids() if c.split("#")[0] in tables]
    n_joinable = n_unionable = 0
    with sessionmaker(bind=engine)() as session:
        for table_id in tables:
            path = quote(table_id, safe="")
            expected = lookup.as_dict(lookup.table(session, table_id))
            assert _cli_json(capsys, "table", table_id) == expected
            assert client.get(f"/v1/tables/{path}").json() == expected
            expected = lookup.as_dict(lookup.columns(session, table_id))
            assert _cli_json(capsys, "columns", table_id) == expected
            assert client.get(f"/v1/columns/{path}").json()["items"] == expected
            expected = lookup.as_dict(lookup.unionable(session, table_id, 5))
            n_unionable += len(expected)
            assert _cli_json(capsys, "unionable", table_id, "--k", "5") == expected
            assert client.get(f"/v1/unionable/{path}", params={"k": 5}).json()["items"] == expected
            raw = quote(table_id, safe="/:")  # slashes and colons left as they are
            assert client.get(f"/v1/unionable/{raw}", params={"k": 5}).json()["items"] == expected
        for column_id in columns:
            expected = lookup.as_dict(lookup.joinable(session, column_id, 3, offset=1))
            n_joinable += len(expected)
            assert _cli_json(capsys, "joinable", column_id, "--k", "3", "--offset", "1") == expected
            got = client.get(f"/v1/joinable/{quote(column_id, safe='')}", params={"k": 3, "offset": 1}).json()
            assert got["items"] == expected and got["offset"] == 1 and got["limit"] == 3
    assert n_joinable > 0 and n_unionable > 0  # the comparisons were not all of empty lists
    # without --json: an aligned text table with one line per answer
    first = "file:crafted/sales_2019.csv"
    assert main(["lookup", "unionable", first]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["rank", "table_id", "score", "n_aligned", "alignment", "exact"]
    assert lines[1].split()[:2] == ["1", "file:crafted/sales_2020.csv"] and "city=town" in lines[1]
    assert main(["lookup", "joinable", f"{first}#city"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["rank", "table_id", "column", "overlap"] and len(lines) > 1
    engine.dispose()


def test_reader_connection_answers_as_a_session_does(two_states, published):
    """The API's autocommit reader reads through the driver on PostgreSQL (`catalog.db.prepared`);
    a Session goes through SQLAlchemy. Every lookup must give equal dataclasses, types included."""
    engine = make_engine(published.catalog_url)
    reader = open_reader(published.catalog_url)
    tables = sorted(t.table_id for t in two_states.tables_b)
    columns = [c for c in two_states.column_ids() if c.split("#")[0] in tables]
    with sessionmaker(bind=engine)() as session, reader.connect() as connection:

        def answer(catalog, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
            try:
                return fn(catalog, *args, **kwargs)
            except UnknownIdError as e:  # a column without a profile, say: both must say so
                return repr(e)

        def both(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
            a, b = answer(session, fn, *args, **kwargs), answer(connection, fn, *args, **kwargs)
            assert a == b and repr(a) == repr(b), (fn.__name__, args)
            return a if not isinstance(a, str) else None

        assert both(lookup.tables, limit=1000)
        for table_id in tables:
            both(lookup.table, table_id)
            both(lookup.columns, table_id)
            both(lookup.keys, table_id)
            both(lookup.unionable, table_id, 5)
        assert any(both(lookup.joinable, c, 5) for c in columns)
        for column_id in columns:  # these batches publish no profiles or keys: both must agree on that
            both(lookup.profile, column_id)
        assert any(both(lookup.unionable, t, 5) for t in tables)  # JSON alignments compared
        with pytest.raises(UnknownIdError):
            lookup.joinable(connection, "file:nowhere.csv#x")
    reader.dispose()
    engine.dispose()


def test_pagination_walks_the_whole_list(two_states, published):
    client = TestClient(create_app(published))
    column_id = max(
        two_states.column_ids(),
        key=lambda c: len(client.get(f"/v1/joinable/{quote(c, safe='')}", params={"k": 1000}).json().get("items", [])),
    )
    whole = client.get(f"/v1/joinable/{quote(column_id, safe='')}", params={"k": 1000}).json()["items"]
    assert len(whole) >= 3
    pages, offset = [], 0
    while offset is not None:
        page = client.get(f"/v1/joinable/{quote(column_id, safe='')}", params={"k": 2, "offset": offset}).json()
        pages.extend(page["items"])
        offset = page["next_offset"]
    assert pages == whole
    assert [a["rank"] for a in whole] == list(range(1, len(whole) + 1))


def test_unknown_and_malformed_ids_and_oversized_requests(two_states, published, capsys):
    client = TestClient(create_app(published))
    assert main(["lookup", "joinable", "file:nowhere.csv#x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown column_id" in err
    assert main(["lookup", "unionable", "file:nowhere.csv"]) == 2
    assert main(["lookup", "joinable", two_states.column_ids()[0], "--k", "0"]) == 2
    capsys.readouterr()
    assert client.get(f"/v1/joinable/{quote('file:nowhere.csv#x', safe='')}").status_code == 404
    assert client.get(f"/v1/tables/{quote('file:nowhere.csv', safe='')}").status_code == 404
    for bad in ("nonsense", "http:x", "file:a#b"):  # not a table_id
        assert client.get(f"/v1/unionable/{quote(bad, safe='')}").status_code == 422
    for bad in ("file:a.csv", "nonsense#x", "file:a.csv#", "file:a.csv#\x01"):  # not a column_id
        assert client.get(f"/v1/joinable/{quote(bad, safe='')}").status_code == 422
    good = quote(two_states.column_ids()[0], safe="")
    for params in ({"k": 0}, {"k": 100000}, {"k": "ten"}, {"offset": -1}, {"offset": 10**12}):
        assert client.get(f"/v1/joinable/{good}", params=params).status_code == 422
    assert client.get("/v1/joinable/file:" + "a" * 5000 + ".csv%23x").status_code in (414, 422)
    assert client.get("/v1/joinable/file:" + "a" * 3000 + ".csv%23x").status_code == 422
    assert client.post(f"/v1/joinable/{good}", content=b"x" * 100_000).status_code == 413
    assert client.post(f"/v1/joinable/{good}").status_code == 405
    spec = client.get("/openapi.json").json()
    assert {"/v1/joinable/{column_id}", "/v1/unionable/{table_id}", "/v1/tables"} <= set(spec["paths"])


def test_api_replaces_a_connection_the_database_dropped(published):
    """The API holds one reader connection per thread. When PostgreSQL drops it (a restart, an
    admin's pg_terminate_backend), the lookup that meets the dead connection answers 503 and the
    next one reconnects and answers 200; on SQLite the held connection simply keeps answering."""
    import dataclasses

    import psycopg

    name = f"juncture-api-{uuid.uuid4().hex[:8]}"
    url = published.catalog_url
    if url.startswith("postgresql"):
        url += ("&" if "?" in url else "?") + f"application_name={name}"
    # one portal thread for all requests (a TestClient outside `with` starts one per request)
    with TestClient(create_app(dataclasses.replace(published, catalog_url=url))) as client:
        expected = client.get("/v1/tables").json()
        assert expected["items"]
        if url.startswith("postgresql"):
            with psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres", autocommit=True) as admin:
                killed = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (name,)
                ).fetchall()
            assert killed == [(True,)]
            assert client.get("/v1/tables").status_code == 503
        assert client.get("/v1/tables").json() == expected


def _serve(settings, port: int, workers: int) -> subprocess.Popen[bytes]:  # type: ignore[no-untyped-def]
    env = {**os.environ, "JUNCTURE_CATALOG_URL": settings.catalog_url, "JUNCTURE_LAKE": settings.lake}
    return subprocess.Popen(
        [str(Path(sys.executable).with_name("juncture")), "serve", "--port", str(port), "--workers", str(workers)],
        env=env,
        stderr=subprocess.PIPE,
    )


def _wait_for(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 90
    while True:
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
        assert time.monotonic() < deadline, "juncture serve did not answer"
        time.sleep(0.2)


def test_serve_with_workers_over_real_http(two_states, published):
    """`juncture serve --workers 2`: two processes behind one port answer over real HTTP exactly
    what the lookup API and `search join` answer, and SIGTERM stops them all."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = _serve(published, port, workers=2)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for(base + "/v1/health", server)
        children = psutil.Process(server.pid).children()
        assert sum("spawn_main" in " ".join(c.cmdline()) for c in children) == 2
        engine = make_engine(published.catalog_url)
        with httpx.Client(base_url=base) as client:
            for column_id in two_states.column_ids()[:12]:
                try:
                    expected = lookup.as_dict(lookup.joinable(engine, column_id, 5))
                except UnknownIdError:
                    assert client.get(f"/v1/joinable/{quote(column_id, safe='')}").status_code == 404
                    continue
                got = client.get(f"/v1/joinable/{quote(column_id, safe='')}", params={"k": 5})
                assert got.status_code == 200 and got.json()["items"] == expected
            # online search: what `search join` answers in process, from a JOSIE index published now
            lake = {"file:s.csv#a": {"1", "2", "3"}, "file:s.csv#b": {"2", "3", "texas"}, "file:t.csv#c": {"alabama"}}
            with engine.begin() as conn:
                store_index(conn, build_memory_index(lake))
            values = [str(v) for v in range(40)] + ["Alabama", "Texas", None]
            with engine.connect() as conn:
                expected_search = join_methods()["josie"].run(conn, JoinRequest(values, k=7))
            got = client.post("/v1/search/join", json={"values": values, "k": 7})
            assert got.status_code == 200 and got.json()["results"] == expected_search
            assert [(r["column_id"], r["overlap"]) for r in expected_search] == [
                ("file:s.csv#a", 3),
                ("file:s.csv#b", 3),
                ("file:t.csv#c", 1),
            ]
        # the server gathers a response's writes into one send: a response it closes the
        # connection after must still arrive whole
        closing = httpx.get(base + "/v1/tables", headers={"Connection": "close"})
        assert closing.headers["connection"] == "close" and closing.json()["items"]
        # every worker listens on the port (SO_REUSEPORT): the kernel spreads connections by a hash
        # of their addresses, so within a few dozen connections each worker holds one
        workers = [w for w in children if "spawn_main" in " ".join(w.cmdline())]
        opened: list[socket.socket] = []
        held = [0, 0]
        while min(held) == 0 and len(opened) < 64:
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: test\r\n\r\n")
            assert s.recv(65536).startswith(b"HTTP/1.1 200 OK")
            opened.append(s)
            held = [
                sum(1 for c in w.net_connections("tcp") if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port)
                for w in workers
            ]
        assert min(held) > 0, held
        for s in opened:
            s.close()
        engine.dispose()
    finally:
        server.terminate()
        server.wait(timeout=30)
    # The workers (and multiprocessing's resource tracker, which leaves when the last of them has
    # closed its pipe) exit with the supervisor; wait for them rather than race the last exit.
    _gone, alive = psutil.wait_procs(children, timeout=30)
    assert not [w for w in alive if w.status() != psutil.STATUS_ZOMBIE]


def test_serve_rejects_bad_workers_and_a_taken_port(published, capsys):
    assert main(["serve", "--workers", "0"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert main(["serve", "--port", str(s.getsockname()[1])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot serve on" in err
    # a port another server shares with SO_REUSEPORT (another `juncture serve --workers 2`, say)
    # is taken too: the workers would otherwise quietly split its connections with it
    with socket.create_server(("127.0.0.1", 0), reuse_port=True) as s:
        assert main(["serve", "--workers", "2", "--port", str(s.getsockname()[1])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot serve on" in err
