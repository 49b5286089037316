"""Column profiles and keys against plain-Python oracles, on real nycflights13 tables and crafted
edge cases, plus the key search on its own (brute force on random tables, cut-short budget)."""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import numpy as np
import pytest

from catalog.cli.demo import nycflights13_tables
from catalog.core import keys as key_search
from catalog.core.identity import column_headers, normalize_token
from catalog.core.keys import KeyColumn, minimal_keys
from catalog.core.settings import Settings
from spark_jobs.crawl.land import ParsedTable, land_batch
from spark_jobs.lake.store import LakeStore
from spark_jobs.profile import keys as detect_keys
from spark_jobs.profile import profiles as profile_columns
from spark_jobs.profile import tokens as column_tokens
from spark_jobs.profile.profiles import value_facts
from tests.conftest import make_settings
from tests.profile import lakes, oracle

FLIGHT_TABLES = ("airlines", "airports", "planes", "weather")
WEATHER = "file:nycflights13/weather.csv"


class Lake:
    def __init__(self, settings: Settings, store: LakeStore, tables: list[ParsedTable]) -> None:
        self.settings, self.store, self.tables = settings, store, {t.table_id: t for t in tables}

    def profiles(self) -> dict[str, dict[str, Any]]:
        return {r["column_id"]: r for r in self.store.read_arrow(profile_columns.COLUMN_PROFILES).to_pylist()}

    def keys(self, table_id: str) -> list[dict[str, Any]]:
        rows = self.store.read_arrow(detect_keys.KEYS, where={"table_id": [table_id]}).to_pylist()
        return sorted(rows, key=lambda r: -r["score"])

    def search(self, table_id: str) -> dict[str, Any]:
        return self.store.read_arrow(detect_keys.KEY_SEARCHES, where={"table_id": [table_id]}).to_pylist()[0]


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory: pytest.TempPathFactory) -> Lake:  # type: ignore[no-untyped-def]
    settings = make_settings(tmp_path_factory.mktemp("profile_lake"))
    store = LakeStore(settings.lake, spark)
    tables = [*nycflights13_tables(FLIGHT_TABLES), *lakes.edge_tables()]
    batch = land_batch(store, tables, [], n_buckets=settings.index.cells_buckets)
    for job in (column_tokens, profile_columns, detect_keys):
        job.run(spark, settings, batch)
    return Lake(settings, store, tables)


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def profile_mismatches(got: dict[str, Any], want: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    out = []
    for field, expected in want.items():
        actual = got[field]
        if field == "top_values":
            actual = [(t["value"], t["count"]) for t in actual]
        if not _close(actual, expected):
            out.append((field, actual, expected))
    return out


def test_profiles_match_the_python_oracle(lake: Lake) -> None:
    got = lake.profiles()
    assert set(got) == {cid for t in lake.tables.values() for cid in oracle.table_profiles(t)}
    mismatches = {}
    for t in lake.tables.values():
        for column_id, want in oracle.table_profiles(t).items():
            bad = profile_mismatches(got[column_id], want)
            if bad:
                mismatches[column_id] = bad
            assert got[column_id]["distinct_exact"] and got[column_id]["distinct_error"] is None
            assert got[column_id]["portal_type"] == (t.portal_types[0] if t.portal_types else None)
    assert mismatches == {}


def test_types_of_known_columns(lake: Lake) -> None:
    types = {cid: r["inferred_type"] for cid, r in lake.profiles().items()}
    expected = {
        "file:nycflights13/airports.csv#faa": "identifier",
        "file:nycflights13/airports.csv#lat": "decimal",
        "file:nycflights13/planes.csv#tailnum": "identifier",
        "file:nycflights13/planes.csv#year": "integer",
        "file:nycflights13/weather.csv#time_hour": "datetime",
        "file:nycflights13/weather.csv#origin": "categorical",
        "file:edge/all_null.csv#nothing": "empty",
        "file:edge/all_null.csv#blanks": "empty",
        "file:edge/mixed_types.csv#mostly_int": "integer",
        "file:edge/mixed_types.csv#int_dec": "decimal",
        "file:edge/mixed_types.csv#flag": "boolean",
        "file:edge/mixed_types.csv#moment": "datetime",
        **{f"file:edge/date_formats.csv#{h}": "date" for h in ("iso", "us", "dots", "day_month", "month_day")},
        "file:edge/date_formats.csv#iso_time": "datetime",
        "file:edge/date_formats.csv#us_time": "datetime",
    }
    assert {c: types[c] for c in expected} == expected


def test_all_null_and_single_row_edge_cases(lake: Lake) -> None:
    p = lake.profiles()
    nothing = p["file:edge/all_null.csv#nothing"]
    assert (nothing["row_count"], nothing["null_count"], nothing["distinct_count"], nothing["token_count"]) == (
        10,
        10,
        0,
        0,
    )
    blanks = p["file:edge/all_null.csv#blanks"]
    assert (blanks["null_count"], blanks["empty_count"], blanks["top_values"]) == (2, 8, [])
    single = p["file:edge/single_row.csv#when"]
    assert (single["row_count"], single["min_value"], single["max_value"], single["uniqueness"]) == (
        1,
        "2013-01-05",
        "2013-01-05",
        1.0,
    )
    assert {tuple(k["columns"]) for k in lake.keys("file:edge/single_row.csv")} == {("name",), ("n",), ("when",)}


def key_set(lake: Lake, table_id: str) -> set[tuple[tuple[str, ...], bool]]:
    return {(tuple(k["columns"]), k["exact"]) for k in lake.keys(table_id)}


def test_keys_match_brute_force(lake: Lake) -> None:
    got = {tid: key_set(lake, tid) for tid in lake.tables}
    want = {tid: oracle.keys(t) for tid, t in lake.tables.items()}
    assert got == want
    for tid in lake.tables:
        assert lake.search(tid)["search_complete"] is True


def test_weather_is_keyed_by_origin_and_time(lake: Lake) -> None:
    weather = lake.tables[WEATHER]
    cols = dict(zip(column_headers(list(weather.headers)), weather.columns, strict=True))
    n = weather.n_rows
    assert len(set(zip(cols["origin"], cols["time_hour"], strict=True))) == n  # checked here by hand
    assert len(set(zip(cols["origin"], cols["year"], cols["month"], cols["day"], cols["hour"], strict=True))) < n
    keys = lake.keys(WEATHER)
    assert (["origin", "time_hour"], True) in [(k["columns"], k["exact"]) for k in keys]
    assert all(len(k["columns"]) > 1 for k in keys)


def test_composite_key_only_three_columns_make(lake: Lake) -> None:
    assert key_set(lake, "file:edge/triple_key.csv") == {(("site", "day", "slot"), True)}
    wide = key_set(lake, "file:edge/wide.csv")
    assert (("row_id",), True) in wide and (("part_a", "part_b", "part_c"), True) in wide
    assert lake.keys("file:edge/wide.csv")[0]["columns"] == ["row_id"]  # the id ranks first


def test_tables_without_keys(lake: Lake) -> None:
    for tid in ("file:edge/no_key.csv", "file:edge/duplicate_rows.csv", "file:edge/date_formats.csv"):
        assert lake.keys(tid) == []
        assert lake.search(tid)["search_complete"] is True


def test_real_keys_rank_first(lake: Lake) -> None:
    assert lake.keys("file:nycflights13/airports.csv")[0]["columns"] == ["faa"]
    assert lake.keys("file:nycflights13/planes.csv")[0]["columns"] == ["tailnum"]
    assert lake.keys("file:nycflights13/airlines.csv")[0]["columns"] == ["carrier"]
    for tid in lake.tables:
        scores = [k["score"] for k in lake.keys(tid)]
        assert all(0.0 < s <= 1.0 for s in scores)


# ---------------------------------------------------------------------------------------------- no Spark
def _key_columns(table: ParsedTable) -> list[KeyColumn]:
    out = []
    for pos, (h, values) in enumerate(zip(column_headers(list(table.headers)), table.columns, strict=True), 1):
        uniq = {v: i for i, v in enumerate(dict.fromkeys(values))}
        out.append(KeyColumn(h, pos, "integer", np.array([uniq[v] for v in values], dtype=np.int64), len(uniq)))
    return out


@pytest.mark.parametrize("seed", range(25))
def test_minimal_keys_match_brute_force_on_random_tables(seed: int) -> None:
    rnd = random.Random(seed)
    n_rows, n_cols = rnd.randint(0, 40), rnd.randint(1, 7)
    cards = [rnd.choice([1, 2, 3, 5, 8, 40]) for _ in range(n_cols)]
    rows = [[str(rnd.randrange(c)) for c in cards] for _ in range(n_rows)]
    headers = [f"c{j}" for j in range(n_cols)]
    t = (
        lakes.table("file:random.csv", headers, rows)
        if rows
        else ParsedTable("file:random.csv", headers, [[] for _ in headers])
    )
    want = set()
    unique: set[tuple[int, ...]] = set()
    for size in (1, 2, 3):  # plain enumeration, no pruning at all
        for combo in itertools.combinations(range(n_cols), size):
            if n_rows == 0 or any(set(s) <= set(combo) for s in unique):
                continue
            distinct = len({tuple(r[i] for i in combo) for r in rows})
            if distinct == n_rows:
                unique.add(combo)
                want.add((tuple(headers[i] for i in combo), True))
            elif size == 1 and distinct / n_rows >= 0.99:
                want.add(((headers[combo[0]],), False))
    search = minimal_keys(_key_columns(t), n_rows)
    assert {(k.columns, k.exact) for k in search.keys} == want
    assert search.complete


def test_search_is_cut_short_when_the_budget_runs_out() -> None:
    t = lakes.wide()
    cols = _key_columns(t)
    full = minimal_keys(cols, t.n_rows)
    assert full.complete and full.work > 0
    cut = minimal_keys(cols, t.n_rows, max_work=full.work // 3)
    assert not cut.complete
    assert {k.columns for k in cut.keys} <= {k.columns for k in full.keys}  # the keys found are real


def test_wide_table_search_prunes() -> None:
    t = lakes.wide(n_columns=150)
    search = minimal_keys(_key_columns(t), t.n_rows)
    assert search.complete
    assert search.n_checked < 5_000  # of ~550,000 pairs and triples, pigeonhole and Apriori pruning skip most


@pytest.mark.parametrize(
    "text",
    [
        "2013-01-05",
        "1/5/2013",
        "5/1/2013",
        "13/5/2013",
        "05.01.2013",
        "5-1-2013",
        "2013/1/5",
        "5 Jan 2013",
        "5 january 2013",
        "Jan 5, 2013",
        "September 9 2001",
        "2012-02-29",
        "2013-02-29",
        "2100-02-29",
        "2000-02-29",
        "0000-01-01",
        "31.04.2013",
        "2013-01-05T06:00:00Z",
        "2013-01-05 06:00",
        "1/5/2013 1:30 PM",
        "1/5/2013 0:30 AM",
        "1/5/2013 23:59:59",
        "2013-01-05T24:00:00",
        "12",
        "12.5",
        "-1e3",
        "true",
        "N",
        "hello",
        "N10156",
        "  7 ",
    ],
)
def test_value_kinds_match_strptime(text: str) -> None:
    state, kind, length, *_ = value_facts(text)
    assert state == "present" and length == len(text.strip())
    assert kind == oracle.kind_of(text.strip())


def test_value_facts_of_null_and_blank() -> None:
    assert value_facts(None)[0] == "null"
    assert [value_facts(v)[0] for v in ["", " ", "NULL", "n/a", "-", "NaN"]] == ["empty"] * 6


def test_large_tables_get_estimated_distinct_counts(spark, lake: Lake) -> None:  # type: ignore[no-untyped-def]
    """Above the exact threshold: HyperLogLog distinct counts within 4 standard errors, everything
    else unchanged (exact counts, types, min/max)."""
    from spark_jobs.lake.batches import ChangeBatch

    batch = ChangeBatch(99, (WEATHER,), ())
    rows = profile_columns.profiles(spark, lake.store, lake.settings, batch, exact_max_rows=1000).to_pylist()
    exact = lake.profiles()
    assert len(rows) == 15
    for r in rows:
        want = exact[r["column_id"]]
        assert not r["distinct_exact"] and r["distinct_error"] == profile_columns.HLL_RSD
        assert (
            abs(r["distinct_count"] - want["distinct_count"])
            <= 4 * profile_columns.HLL_RSD * want["distinct_count"] + 1
        )
        for field in ("row_count", "null_count", "empty_count", "min_value", "max_value", "length_min", "length_max"):
            assert r[field] == want[field], (r["column_id"], field)
        assert r["top_values_exact"] is False and len(r["top_values"]) <= profile_columns.TOP_K
        assert all(normalize_token(v["value"]) is not None for v in r["top_values"])  # no null-likes


def _same_field(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_field(x, y) for x, y in zip(a, b, strict=True))
    return _close(a, b)


def test_executor_and_driver_profiles_agree(spark, lake: Lake) -> None:  # type: ignore[no-untyped-def]
    """A batch small enough is measured in the driver: field for field the profiles the Spark job
    makes (sums of floats to rounding: they are added in another order)."""
    from spark_jobs.lake.batches import ChangeBatch

    batch = ChangeBatch(1, tuple(sorted(lake.tables)), ())
    driver = profile_columns.profiles(spark, lake.store, lake.settings, batch)
    by_driver = {r["column_id"]: r for r in driver.to_pylist()}
    on_executors = profile_columns.profiles(spark, lake.store, lake.settings, batch, driver_max_cells=0).to_pylist()
    assert len(on_executors) == len(by_driver) == len(lake.profiles())
    mismatches = {
        r["column_id"]: [
            (f, v, by_driver[r["column_id"]][f])
            for f, v in r.items()
            if not _same_field(v, by_driver[r["column_id"]][f])
        ]
        for r in on_executors
    }
    assert {c: m for c, m in mismatches.items() if m} == {}


def test_executor_and_driver_key_searches_agree(spark, lake: Lake) -> None:  # type: ignore[no-untyped-def]
    from spark_jobs.lake.batches import ChangeBatch

    batch = ChangeBatch(1, tuple(sorted(lake.tables)), ())
    by_driver = detect_keys.detect(spark, lake.store, lake.settings, batch)
    on_executors = detect_keys.detect(spark, lake.store, lake.settings, batch, driver_max_cells=0)
    for got, want in zip(on_executors, by_driver, strict=True):
        assert got.sort_by("table_id").to_pylist() == want.sort_by("table_id").to_pylist()
    assert by_driver[0].num_rows == sum(len(lake.keys(t)) for t in lake.tables)


def test_search_of_a_wide_short_table_is_bounded_in_checks_and_keys() -> None:
    """Hundreds of columns over a few dozen rows: almost every triple is a minimal key and each check
    visits a handful of rows, so only the per-check cost and the key cap stop the search."""
    rng = np.random.default_rng(3)
    n_rows = 30
    cols = [KeyColumn(f"m{j}", j + 1, "integer", rng.integers(0, 4, n_rows).astype(np.int64), 4) for j in range(300)]
    search = minimal_keys(cols, n_rows)
    assert not search.complete
    assert len(search.keys) <= key_search.MAX_KEYS
    assert search.n_checked * key_search.CHECK_OVERHEAD <= key_search.MAX_WORK
    assert all(len(k.columns) == 3 for k in search.keys)


def test_sampled_top_values_rank_past_the_null_likes(spark) -> None:  # type: ignore[no-untyped-def]
    """A large table's top values come from a 1% row sample. Here its commonest values are
    null-likes, which take no place in the top k: the k values are the sample's k commonest real
    ones (ties by value), ranked 1 to k, with their counts scaled to the table."""
    from collections import Counter

    from pyspark.sql import functions as F  # noqa: N812

    rnd = random.Random(3)
    real = [f"v{i:02d}" for i in range(15)] + ["Zürich", "ZÜRICH"]
    values = [rnd.choice(["NULL", " n/a", "None"]) if rnd.random() < 0.6 else rnd.choice(real) for _ in range(40_000)]
    cells = spark.createDataFrame(
        [("file:big.csv", 0, r, 1, v) for r, v in enumerate(values)],
        "table_id string, bucket int, row long, col int, value string",
    )
    # which rows the sample holds is the profile's own rule (not what this test checks)
    in_sample = F.abs(F.xxhash64("table_id", "row")) % 100 < profile_columns.SAMPLE_PERCENT
    rows = [r["row"] for r in cells.where(in_sample).select("row").collect()]
    counts = Counter(values[r] for r in rows if normalize_token(values[r]) is not None)
    scale = 100 // profile_columns.SAMPLE_PERCENT
    want = sorted(((v, n * scale) for v, n in counts.items()), key=lambda x: (-x[1], x[0]))[: profile_columns.TOP_K]

    got = profile_columns.sampled_top_values(cells).orderBy("rank").collect()
    assert [r["rank"] for r in got] == list(range(1, len(want) + 1)) and len(want) == profile_columns.TOP_K
    assert [(r["value"], r["n"]) for r in got] == want
