"""Test tables for profiling and key detection: crafted edge cases (small, deterministic)."""

from __future__ import annotations

import itertools
import random

from spark_jobs.crawl.land import ParsedTable


def table(tid: str, headers: list[str], rows: list[list[str | None]]) -> ParsedTable:
    return ParsedTable(
        table_id=tid,
        headers=headers,
        columns=[list(c) for c in zip(*rows, strict=True)],
        portal_types=["text"] * len(headers),
    )


def all_null() -> ParsedTable:
    rows = [[str(i), None, ["", " ", "NULL", "n/a", None][i % 5], "x" if i == 3 else None] for i in range(10)]
    return table("file:edge/all_null.csv", ["id", "nothing", "blanks", "almost"], rows)


def single_row() -> ParsedTable:
    return table("file:edge/single_row.csv", ["name", "n", "when", "ratio"], [["Alpha", "7", "2013-01-05", "0.5"]])


def duplicate_rows() -> ParsedTable:
    base = [["a", "1", "x"], ["b", "2", "y"], ["c", "3", "z"]]
    return table("file:edge/duplicate_rows.csv", ["letter", "number", "code"], base + base + base[:1])


def mixed_types() -> ParsedTable:
    mostly_int = [str(i) for i in range(19)] + ["unknown"]  # 95 % integers -> integer
    int_dec = [str(i) for i in range(18)] + ["2.5", "1e3"]  # integers and decimals -> decimal
    half = [str(i) for i in range(10)] + [f"w{i} word" for i in range(10)]  # 50/50 -> text or categorical
    bools = ["true", "FALSE", "yes", "No", "t", "F", "y", "n", "True", "false"] * 2
    dates_and_times = [f"2013-01-0{1 + i % 9}" for i in range(10)] + [f"2013-01-02 10:{i:02d}" for i in range(10)]
    return table(
        "file:edge/mixed_types.csv",
        ["mostly_int", "int_dec", "half", "flag", "moment"],
        [list(r) for r in zip(mostly_int, int_dec, half, bools, dates_and_times, strict=True)],
    )


def date_formats() -> ParsedTable:
    rows = [
        [
            "2013-01-05",
            "1/5/2013",
            "05.01.2013",
            "5 Jan 2013",
            "Jan 5, 2013",
            "2013-01-05T06:00:00Z",
            "1/5/2013 1:30 PM",
        ],
        [
            "2013-12-31",
            "12/31/2013",
            "31.12.2013",
            "31 December 2013",
            "December 31, 2013",
            "2013-12-31 23:59:59",
            "12/31/2013 11:59 PM",
        ],
        [
            "2012-02-29",
            "2/29/2012",
            "29.02.2012",
            "29 Feb 2012",
            "Feb 29, 2012",
            "2012-02-29T00:00:00",
            "2/29/2012 12:00 AM",
        ],
        [
            "2000-10-10",
            "10/10/2000",
            "10.10.2000",
            "10 oct 2000",
            "Oct 10 2000",
            "2000-10-10 08:05",
            "10/10/2000 08:05",
        ],
        [
            "1999-07-04",
            "7/4/1999",
            "04.07.1999",
            "4 Jul 1999",
            "July 4, 1999",
            "1999-07-04T12:00:00Z",
            "7/4/1999 12:00 PM",
        ],
        [
            "2013-02-30",
            "13/13/2013",
            "32.01.2013",
            "30 Feb 2013",
            "Feb 30, 2013",
            "2013-01-01T25:00:00",
            "1/1/2013 13:00 PM",
        ],  # none of these is a valid date or time
    ]
    rows = rows * 2 + rows[:5] * 4  # 32 rows, 2 invalid per column -> 30/32 fit (0.9375)
    return table(
        "file:edge/date_formats.csv", ["iso", "us", "dots", "day_month", "month_day", "iso_time", "us_time"], rows
    )


def wide(n_columns: int = 120, n_rows: int = 200, seed: int = 11) -> ParsedTable:
    """An id column, a triple (a, b, c) that only all three make unique, and low-cardinality noise."""
    rnd = random.Random(seed)
    combos = rnd.sample(list(itertools.product(range(10), repeat=3)), n_rows)
    # 200 rows over 100 (a, b) pairs: every pair repeats, so only the triple is unique
    rows = []
    for i, (a, b, c) in enumerate(combos):
        noise = [str(rnd.randrange(3)) for _ in range(n_columns - 4)]
        rows.append([f"R{i:04d}", f"a{a}", f"b{b}", f"c{c}", *noise])
    headers = ["row_id", "part_a", "part_b", "part_c", *[f"m{j}" for j in range(n_columns - 4)]]
    return table("file:edge/wide.csv", headers, rows)


def triple_key(seed: int = 5) -> ParsedTable:
    """Keyed only by (site, day, slot): every pair repeats."""
    rows = [
        [site, f"2013-01-{day:02d}", str(slot), str((slot + day) % 2)]
        for site in ["EWR", "JFK", "LGA"]
        for day in range(1, 5)
        for slot in range(3)
    ]
    random.Random(seed).shuffle(rows)
    return table("file:edge/triple_key.csv", ["site", "day", "slot", "reading"], rows)


def no_key() -> ParsedTable:
    rows = [[["x", "y"][i % 2], str(i % 3), ["p", "q"][(i // 2) % 2], f"{i * 1.5:.1f}"] for i in range(24)]
    return table("file:edge/no_key.csv", ["kind", "group", "side", "measure"], rows)


def edge_tables() -> list[ParsedTable]:
    return [all_null(), single_row(), duplicate_rows(), mixed_types(), date_formats(), wide(), triple_key(), no_key()]
