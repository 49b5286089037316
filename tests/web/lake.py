"""A small demo-like lake for the web page tests: airports, carriers, flights and hourly weather.

Made to give every part of the pages something to show: numeric columns (histograms) and text
columns (top values), keys (`faa`, `carrier`, the composite (origin, day, hour) of weather),
joinable columns across tables (airport codes, carrier codes), a unionable pair (two airport
lists), and a query table whose (origin, day, hour) combinations sit in weather and flights for
the n-ary search. Seeded, so every run builds the same lake.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

AIRPORTS = [f"{a}{b}{c}" for a in "BJLS" for b in "AEO" for c in "DKX"]  # 36 three-letter codes
CARRIERS = ["AA", "B6", "DL", "EV", "UA", "WN", "9E", "MQ"]
ORIGINS = AIRPORTS[:3]


def _write(path: Path, headers: list[str], rows: list[list[object]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(headers)
        writer.writerows(rows)


def write_lake(folder: Path, seed: int = 20) -> None:
    """The lake's CSV files in `folder`."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    airports = [
        [code, f"{code.title()} Field", f"City {i}", round(rng.uniform(25, 48), 3), rng.randrange(0, 2000)]
        for i, code in enumerate(AIRPORTS)
    ]
    _write(folder / "airports.csv", ["faa", "name", "city", "lat", "alt"], airports[:24])
    _write(folder / "more_airports.csv", ["faa", "name", "city", "lat", "alt"], airports[18:])
    _write(folder / "carriers.csv", ["carrier", "name"], [[c, f"{c} Airlines"] for c in CARRIERS])
    weather = [
        [o, d, h, round(rng.gauss(12, 8), 1), rng.randrange(0, 30)]
        for o in ORIGINS
        for d in range(1, 8)
        for h in range(0, 24, 3)
    ]
    _write(folder / "weather.csv", ["origin", "day", "hour", "temp", "wind_speed"], weather)
    flights = []
    for n in range(240):
        o, d, h = rng.choice(ORIGINS), rng.randrange(1, 8), rng.randrange(0, 24, 3)
        flights.append([n + 1, o, rng.choice(AIRPORTS[3:]), rng.choice(CARRIERS), d, h, rng.randrange(-20, 180)])
    _write(folder / "flights.csv", ["flight", "origin", "dest", "carrier", "day", "hour", "dep_delay"], flights)


def query_csv(seed: int = 21) -> str:
    """A table to search with: hourly readings of the weather table's airports, days and hours,
    some of them not in the lake."""
    rng = random.Random(seed)
    lines = ["origin,day,hour,visib"]
    for o in [*ORIGINS, "ZZZ"]:
        for d in (1, 2, 9):
            for h in (0, 6, 12):
                lines.append(f"{o},{d},{h},{rng.randrange(1, 11)}")
    return "\n".join(lines) + "\n"
