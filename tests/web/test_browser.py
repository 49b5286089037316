"""The catalog's web page in headless Chromium against `juncture serve` on a small demo-like lake, on
both catalog databases: find a table, open it, see its charts drawn, follow a joinable link, search
with a CSV (answers equal to `juncture search` for the same input), and the clear messages for an
oversized upload and a malformed CSV. Screenshots are left under pytest's tmp folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.web.cdp import Browser
from tests.web.conftest import Served, run_juncture

pytestmark = pytest.mark.slow  # the lake is built by the real pipeline (Spark) once per session

PHONE_WIDTH = 390
PAGE_BUDGET_MS = 300.0


def _rows(browser: Browser, section: str, *attributes: str) -> list[list[str]]:
    """The answers a results section shows: each row's `data-<attribute>` values."""
    names = json.dumps([f"data-{a}" for a in attributes])
    rows: list[list[str]] = browser.evaluate(
        f"[...document.querySelectorAll('#{section} tr[data-{attributes[0]}]')]"
        f".map(r => {names}.map(n => r.getAttribute(n)))"
    )
    return rows


def test_find_a_table_open_it_see_charts_and_follow_a_joinable_link(
    browser: Browser, served: Served, artifacts: Path, request: pytest.FixtureRequest
) -> None:
    browser.goto(served.url + "/")
    assert browser.evaluate("document.activeElement.name") == "q"  # the search box has the focus
    browser.type_text("wind_speed")  # a header: found through the columns
    browser._mark()
    browser.press("Enter", "Enter", 13)  # keyboard only
    browser._wait_new_page()
    found = browser.evaluate("[...document.querySelectorAll('#found tbody a')].map(a => a.textContent)")
    assert found == ["file:weather.csv"]

    browser.click_and_wait("#found tbody a")
    assert browser.evaluate("document.getElementById('table-id').textContent") == "file:weather.csv"
    n_charts = browser.evaluate("document.querySelectorAll('.chart[data-vega-spec]').length")
    assert n_charts == 5  # origin, day, hour, temp, wind_speed all have values
    browser.wait_for(f"document.querySelectorAll('.chart[data-vega-spec] svg .mark-rect path').length >= {n_charts}")
    bars = browser.evaluate(
        "[...document.querySelectorAll('.chart[data-vega-spec]')]"
        ".map(c => c.querySelectorAll('.mark-rect path').length)"
    )
    assert all(n >= 1 for n in bars), bars
    # the neighbourhood graph: this table and its neighbours as labelled nodes, a line to each
    browser.wait_for("document.querySelectorAll('.graph svg .nodes path').length >= 2")
    labels = browser.evaluate("[...document.querySelectorAll('.graph svg .labels text')].map(t => t.textContent)")
    assert "weather.csv" in labels and ("flights.csv" in labels or "airports.csv" in labels), labels
    assert browser.evaluate("document.querySelectorAll('.graph svg .nodes path').length") == len(labels)
    assert browser.evaluate("document.querySelectorAll('.graph svg .links path').length") >= len(labels) - 1
    shot = browser.screenshot(artifacts / f"table-{request.node.callspec.id}.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000

    target = browser.evaluate(
        "[...document.querySelectorAll('.joinable a')].map(a => a.textContent).find(t => t !== 'file:weather.csv')"
    )
    assert target in ("file:flights.csv", "file:airports.csv")
    browser.click_and_wait(f".joinable a[href*='{target.split(':')[1]}']")
    assert browser.evaluate("document.getElementById('table-id').textContent") == target


def _cli_json(served: Served, *args: str) -> list[dict]:
    out: list[dict] = json.loads(run_juncture(served.lake, served.catalog_url, "search", *args, "--json"))
    return out


def test_search_with_a_csv_gives_the_clis_answers(browser: Browser, served: Served, tmp_path: Path) -> None:
    browser.goto(served.url + "/search")
    browser.set_files("input[type=file]", [served.lake.query])
    browser.click_and_wait("#search-form button[type=submit]")
    join = _rows(browser, "join-results", "column-id", "overlap")
    contain = _rows(browser, "contain-results", "column-id", "containment")
    nary = _rows(browser, "nary-results", "table-id", "joinability")
    semantic = _rows(browser, "semantic-results", "column-id", "joinability")

    lines = served.lake.query.read_text().splitlines()
    values = tmp_path / "origin.txt"
    values.write_text("\n".join(line.split(",")[0] for line in lines[1:]) + "\n")
    expected_join = _cli_json(served, "join", "--values", str(values), "--k", "10")
    expected_contain = _cli_json(served, "contain", "--values", str(values), "--threshold", "0.5", "--k", "10")
    expected_nary = _cli_json(served, "nary", "--csv", str(served.lake.query), "--key", "origin,day,hour")
    assert expected_join and expected_contain and expected_nary
    assert join == [[r["column_id"], str(r["overlap"])] for r in expected_join]
    assert [[c, float(x)] for c, x in contain] == [[r["column_id"], r["containment"]] for r in expected_contain]
    assert nary == [[r["table_id"], str(r["joinability"])] for r in expected_nary]
    expected_semantic = _cli_json(served, "semantic", "--values", str(values), "--k", "10")
    assert [[c, float(x)] for c, x in semantic] == [[r["column_id"], r["joinability"]] for r in expected_semantic]
    # the detected key is the one the CLI was given, and each answer says why it matched
    assert browser.evaluate("document.querySelector('#nary-results code').textContent") == "(origin, day, hour)"
    why = browser.evaluate("document.querySelector('#nary-results tbody td:nth-child(2)').textContent")
    assert "origin" in why and "of your key combinations" in why

    # another column of the same table, picked from the form the answers came with
    browser.evaluate("document.querySelector('select[name=column]').value = 'hour'")
    browser.click_and_wait("#search-form button[type=submit]")
    assert "Your column hour" in browser.evaluate("document.getElementById('query-summary').textContent")


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


def test_pages_fit_a_phone_screen_within_the_time_budget(browser: Browser, served: Served, artifacts: Path) -> None:
    browser.set_viewport(PHONE_WIDTH, 800, mobile=True)
    try:
        for path in ("/", "/table?id=file%3Aflights.csv", "/search", "/state"):
            browser.goto(served.url + path)
            width = browser.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE_WIDTH, (path, width)
            server_ms = browser.evaluate(
                "performance.getEntriesByType('navigation')[0].serverTiming.find(t => t.name === 'app').duration"
            )
            assert server_ms is not None and server_ms < PAGE_BUDGET_MS, (path, server_ms)
        browser.screenshot(artifacts / "table-phone.png")
    finally:
        browser.set_viewport(1280, 900)
