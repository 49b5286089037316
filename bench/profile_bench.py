"""Benchmark: profile (and detect keys of) the nycflights13 demo lake, then an incremental batch of 1 %
of its tables, and compare their costs.

    python -m bench.profile_bench [--flights-fraction F] [--split carrier_month|none] [--master local[2]]

The demo lake's `flights` table is split into one table per (carrier, month) — about 185 tables —
so that "1 % of the tables" is a real batch (two tables); `airlines`, `airports`, `planes` and
`weather` are landed whole. The full run indexes one batch with every table; the incremental run
re-lands 1 % of the tables (one cell changed in each) as a new batch. For each run the time of the
stages tokens (prerequisite), profile and keys is printed, and cells per second of profile + keys.
Spark start-up and landing are timed separately and excluded from both. Target: the 1 % batch
costs at most 5 % of the full run.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from catalog.cli.demo import nycflights13_tables
from catalog.core.settings import SparkSettings, load_settings
from spark_jobs.crawl.land import ParsedTable, land_batch
from spark_jobs.lake.store import LakeStore
from spark_jobs.orchestration.pipeline import run_batch
from spark_jobs.profile import keys as detect_keys
from spark_jobs.profile import profiles as profile_columns
from spark_jobs.profile import tokens as column_tokens

STAGES = [("tokens", column_tokens.run), ("profile", profile_columns.run), ("keys", detect_keys.run)]


def bench_tables(flights_fraction: float, split: str) -> list[ParsedTable]:
    """The demo lake's tables, with flights split per (carrier, month) and cut to a fraction of its rows."""
    small = nycflights13_tables(("airlines", "airports", "planes", "weather"))
    (flights,) = nycflights13_tables(("flights",))
    n = int(flights.n_rows * flights_fraction)
    columns = [list(c[:n]) for c in flights.columns]
    if split == "none":
        return [*small, dataclasses.replace(flights, columns=columns)]
    headers = list(flights.headers)
    carrier, month = columns[headers.index("carrier")], columns[headers.index("month")]
    groups: dict[tuple[str, str], list[int]] = {}
    for i, key in enumerate(zip(carrier, month, strict=True)):
        groups.setdefault(key, []).append(i)
    parts = [
        ParsedTable(
            table_id=f"file:nycflights13/flights/{c}-{int(m):02d}.csv",
            headers=headers,
            columns=[[col[i] for i in rows] for col in columns],
            source="nycflights13",
            name=f"flights {c} {m}",
            format="csv",
        )
        for (c, m), rows in sorted(groups.items())
    ]
    return [*small, *parts]


def changed(table: ParsedTable) -> ParsedTable:
    """The same table with one cell changed (a new version, as a crawl would land it)."""
    first = list(table.columns[0])
    first[0] = (first[0] or "") + "x"
    return dataclasses.replace(table, columns=[first, *table.columns[1:]])


def cells(tables: Sequence[ParsedTable]) -> int:
    return sum(t.n_rows * len(t.headers) for t in tables)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--flights-fraction", type=float, default=1.0, help="share of flights rows to land")
    parser.add_argument("--split", choices=("carrier_month", "none"), default="carrier_month")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--share", type=float, default=0.01, help="share of the tables in the incremental batch")
    args = parser.parse_args(argv)
    from spark_jobs.lake.session import get_spark  # deferred: each benchmark loads only what it runs

    home = Path(tempfile.mkdtemp(prefix="juncture-profile-bench-"))
    base = load_settings({}, cwd=home)
    settings = dataclasses.replace(
        base,
        home=home,
        lake=str(home / "lake"),
        spark=SparkSettings(master=args.master, driver_memory="4g", shuffle_partitions=4),
    )
    t0 = time.perf_counter()
    spark = get_spark(settings, "juncture.profile_bench")
    spark.range(1).count()
    startup = time.perf_counter() - t0
    out = sys.stdout
    out.write(f"spark {spark.version} on {args.master}: start-up {startup:.1f}s (excluded below)\n")

    tables = bench_tables(args.flights_fraction, args.split)
    store = LakeStore(settings.lake, spark)
    t0 = time.perf_counter()
    batch = land_batch(store, tables, [], n_buckets=settings.index.cells_buckets)
    out.write(f"landed {len(tables)} tables, {cells(tables):,} cells in {time.perf_counter() - t0:.1f}s (excluded)\n")
    full = run_batch(spark, settings, batch, STAGES)
    full_profile = full.seconds["profile"] + full.seconds["keys"]
    full_all = sum(full.seconds.values())
    out.write(
        f"full run:        {full.seconds}  profile+keys {full_profile:.1f}s  "
        f"= {cells(tables) / full_profile:,.0f} cells/s; with tokens {full_all:.1f}s\n"
    )

    k = max(1, math.ceil(len(tables) * args.share))
    step = max(1, len(tables) // k)
    subset = [changed(t) for t in tables[4::step][:k]] if len(tables) > 4 else [changed(tables[0])]
    t0 = time.perf_counter()
    batch2 = land_batch(store, subset, [], n_buckets=settings.index.cells_buckets)
    out.write(
        f"landed {len(subset)} changed tables ({len(subset) / len(tables):.1%} of the tables, "
        f"{cells(subset):,} cells) in {time.perf_counter() - t0:.1f}s (excluded)\n"
    )
    inc = run_batch(spark, settings, batch2, STAGES)
    inc_profile = inc.seconds["profile"] + inc.seconds["keys"]
    inc_all = sum(inc.seconds.values())
    out.write(f"incremental run: {inc.seconds}  profile+keys {inc_profile:.1f}s; with tokens {inc_all:.1f}s\n")
    out.write(
        f"incremental / full: profile+keys {inc_profile / full_profile:.1%}, "
        f"with tokens {inc_all / full_all:.1%} (target <= 5%)\n"
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
