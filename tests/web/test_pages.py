"""The web pages without a browser, on both catalog databases: every user string escaped, Find's
filters equal to the API's and to a brute-force filter, paging, the lake's state, bad input as a
message on the page, no route that writes, and each page's server time."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from markupsafe import escape
from sqlalchemy import delete, insert

from catalog.api.app import create_app
from catalog.core.settings import Settings
from catalog.db.engine import open_catalog
from catalog.db.models import JoinableColumn
from catalog.db.models.base import text_key
from catalog.lake_state import next_weekly_rebuild
from catalog.search.mate.lists import OVER_BUDGET
from catalog.search.mate.models import MateList
from catalog.search.pexeso.lists import LIST_K, LIST_T, LIST_TAU, LISTS_FACT
from catalog.search.pexeso.models import PexesoList, PexesoMeta
from catalog.web.pages import PAGE_SIZE, router
from tests.web.catalog_rows import HOSTILE, add_failed_run, add_table, exact_answer


@pytest.fixture
def client(catalog_settings: Settings) -> Iterator[TestClient]:
    engine = open_catalog(catalog_settings.catalog_url)
    add_table(engine, "file:cities.csv", ["city", "country"], n_rows=40, key=["city"], title="World cities")
    add_table(engine, "file:rivers.csv", ["river", "Country Name"], n_rows=7, source="other", title="100% rivers")
    add_table(engine, f"file:{HOSTILE}.csv", [HOSTILE, "x_y"], n_rows=2, title=HOSTILE, source=HOSTILE)
    for i in range(PAGE_SIZE + 3):
        add_table(engine, f"file:many/t{i:02d}.csv", ["id"], n_rows=i)
    add_failed_run(engine, f"publish failed: {HOSTILE}")
    engine.dispose()
    with TestClient(create_app(catalog_settings)) as c:
        yield c


def _found(html: str) -> list[str]:
    block = html.split('id="found"', 1)[1].split("</table>", 1)[0] if 'id="found"' in html else ""
    return re.findall(r"<code>([^<]*)</code>", block)


def _api_ids(client: TestClient, **params: object) -> list[str]:
    body = client.get("/v1/tables", params={"limit": 1000, **params}).json()
    return [t["table_id"] for t in body["items"]]


def test_every_user_string_is_escaped(client: TestClient) -> None:
    hostile_id = f"file:{HOSTILE}.csv"
    pages = [
        client.get("/", params={"q": HOSTILE}),
        client.get("/", params={"q": "alert"}),
        client.get("/table", params={"id": hostile_id}),
        client.get("/state"),
        client.post("/search", files={"file": ("q.csv", f"a,b\n{HOSTILE},1\n".encode())}),
        client.get("/table", params={"id": f"file:nope{HOSTILE}.csv"}),
    ]
    for page in pages:
        assert "<script>alert" not in page.text and "<img src=x" not in page.text, page.url
    assert [p.status_code for p in pages] == [200, 200, 200, 200, 200, 404]
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in pages[2].text  # shown, as text
    assert _found(pages[1].text) == [
        "file:&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;&#34;&gt;&lt;img src=x onerror=alert(1)&gt;.csv"
    ]


@pytest.mark.parametrize(
    ("params", "api"),
    [
        ({"q": "countr"}, {"q": "countr"}),  # a header, either case
        ({"q": "CITIES"}, {"q": "CITIES"}),  # the name
        ({"q": "world"}, {"q": "world"}),  # the title
        ({"q": "x_y"}, {"q": "x_y"}),  # `_` is a character, not a LIKE wildcard
        ({"q": "%"}, {"q": "%"}),
        ({"has_key": "yes"}, {"has_key": "true"}),
        ({"source": "other"}, {"source": "other"}),
        ({"min_rows": "5", "max_rows": "7"}, {"min_rows": 5, "max_rows": 7}),
        ({"q": "t", "has_key": "no", "max_rows": "3"}, {"q": "t", "has_key": "false", "max_rows": 3}),
    ],
)
def test_find_filters_equal_the_api_and_brute_force(client: TestClient, params: dict, api: dict) -> None:
    every = client.get("/v1/tables", params={"limit": 1000}).json()["items"]
    keyed = {"file:cities.csv"}
    headers = {
        t["table_id"]: [c["column"] for c in client.get(f"/v1/columns/{quote(t['table_id'])}").json()["items"]]
        for t in every
    }
    text = api.get("q", "").lower()

    def wanted(t: dict) -> bool:
        fields = [t["table_id"], t["name"], t["title"] or "", *headers[t["table_id"]]]
        return (
            (not text or any(text in f.lower() for f in fields))
            and ("source" not in api or t["source"] == api["source"])
            and ("has_key" not in api or (t["table_id"] in keyed) == (api["has_key"] == "true"))
            and t["n_rows"] >= api.get("min_rows", 0)
            and t["n_rows"] <= api.get("max_rows", 10**9)
        )

    expected = sorted(t["table_id"] for t in every if wanted(t))
    assert expected
    assert _api_ids(client, **api) == expected
    page = client.get("/", params=params).text
    shown = [
        s.replace("&lt;", "<").replace("&gt;", ">").replace("&#34;", '"').replace("&amp;", "&") for s in _found(page)
    ]
    assert shown == expected[:PAGE_SIZE]


def test_find_pages_through_the_results(client: TestClient) -> None:
    first = client.get("/", params={"q": "many/"}).text
    assert _found(first) == [f"file:many/t{i:02d}.csv" for i in range(PAGE_SIZE)]
    assert 'rel="next" href="/?q=many%2F&amp;source=&amp;has_key=&amp;min_rows=&amp;max_rows=&amp;offset=20"' in first
    second = client.get("/", params={"q": "many/", "offset": PAGE_SIZE}).text
    assert _found(second) == [f"file:many/t{i:02d}.csv" for i in range(PAGE_SIZE, PAGE_SIZE + 3)]
    assert 'rel="next"' not in second and 'rel="prev"' in second


def test_bad_input_is_a_message_on_the_page(client: TestClient) -> None:
    page = client.get("/", params={"min_rows": "lots"})
    assert page.status_code == 400 and "min rows must be a whole number" in page.text
    page = client.get("/table", params={"id": "no-prefix"})
    assert page.status_code == 400 and "not a table_id" in page.text
    page = client.post("/search", files={"file": ("q.csv", b"")}, data={"text": ""})
    assert page.status_code == 400 and "choose a CSV file or paste values" in page.text
    page = client.post("/search", files={"file": ("q.csv", b"a,b\n1,2\n")}, data={"column": "zzz"})
    assert page.status_code == 400 and "no column &#39;zzz&#39;" in page.text
    page = client.post("/search", files={"file": ("q.csv", "\xff".encode("latin-1"))})
    assert page.status_code == 400 and "not UTF-8" in page.text
    page = client.post("/search", files={"file": ("q.csv", b"a\n" + b"1\n" * 1_100_000)})
    assert page.status_code == 413 and "over the limit of 2 MB" in page.text


def test_the_table_page_shows_profiles_keys_and_a_chart_spec(client: TestClient) -> None:
    page = client.get("/table", params={"id": "file:cities.csv"}).text
    assert "<code>(city)</code> — unique" in page
    assert page.count('data-vega-spec="spec-') == 2  # one chart per column (their top values)
    spec = page.split('<script type="application/json" id="spec-1">', 1)[1].split("</script>", 1)[0]
    assert '"mark"' in spec and "\\u003cscript\\u003e" in spec  # the values are JSON data, never markup


def test_the_table_page_shows_its_precomputed_nary_lists(client: TestClient, catalog_settings: Settings) -> None:
    engine = open_catalog(catalog_settings.catalog_url)
    marker = {"table_id": "file:cities.csv", "candidate_table_id": None, "mapping": None}
    with engine.begin() as conn:
        conn.execute(
            insert(MateList),
            [
                {**marker, "key": '["city", "country"]', "rank": 0, "joinability": 0},
                {
                    **marker,
                    "key": '["city", "country"]',
                    "rank": 1,
                    "candidate_table_id": f"file:{HOSTILE}.csv",
                    "joinability": 7,
                    "mapping": json.dumps({"city": HOSTILE, "country": "x_y"}),
                },
                {**marker, "key": '["city", "id"]', "rank": 0, "joinability": OVER_BUDGET},
            ],
        )
    engine.dispose()
    html = client.get("/table", params={"id": "file:cities.csv"}).text
    section = html.split('id="nary"', 1)[1]
    assert "(city, country)" in section and ">7<" in section and "country=x_y" in section
    assert "/table?id=file%3A%3Cscript%3E" in section and "&lt;script&gt;" in section and "<script>alert" not in section
    assert "(city, id)" in section and "Not precomputed" in section
    other = client.get("/table", params={"id": "file:rivers.csv"}).text.split('id="nary"', 1)[1]
    assert "No composite key of 2–3 columns is listed" in other


def test_the_table_page_shows_semantic_joins_its_exact_list_lacks(
    client: TestClient, catalog_settings: Settings
) -> None:
    """A column's semantic list on the page: ranked again without the columns its exact list holds
    (here `cities.country`), hostile ids escaped, and nothing while the lists are not current."""
    engine = open_catalog(catalog_settings.catalog_url)
    subject = "file:cities.csv#city"
    base = {"column_key": text_key(subject), "column_id": subject, "table_id": "file:cities.csv"}
    listed = [
        ("file:cities.csv", "country", 9),  # also in the exact list below: not shown
        (f"file:{HOSTILE}.csv", HOSTILE, 8),
        ("file:rivers.csv", "river", 5),
    ]
    state = {"tau": LIST_TAU, "T": LIST_T, "k": LIST_K, "state": "current", "work": 1, "bound": 2}
    with engine.begin() as conn:
        conn.execute(insert(PexesoMeta), [{"key": "index_version", "value": "1"}])
        conn.execute(insert(PexesoMeta), [{"key": LISTS_FACT, "value": json.dumps(state)}])
        marker = {"candidate_column_id": None, "candidate_table_id": None, "candidate_header": None}
        conn.execute(insert(PexesoList), [{**base, **marker, "rank": 0, "n_matched": 0, "joinability": 0.0}])
        conn.execute(
            insert(PexesoList),
            [
                {
                    **base,
                    "rank": rank,
                    "candidate_column_id": f"{table_id}#{header}",
                    "candidate_table_id": table_id,
                    "candidate_header": header,
                    "n_matched": n,
                    "joinability": n / 10,
                }
                for rank, (table_id, header, n) in enumerate(listed, start=1)
            ],
        )
        conn.execute(insert(JoinableColumn), [exact_answer(subject, "file:cities.csv#country")])
    html = client.get("/table", params={"id": "file:cities.csv"}).text
    section = html.split('class="joinable semantic"', 1)[1].split("</ul>", 1)[0]
    shown = re.findall(r'data-column-id="([^"]*)"', section)
    assert shown == [f"file:{escape(HOSTILE)}.csv#{escape(HOSTILE)}", "file:rivers.csv#river"]
    assert "8 of ours (80%)" in section and "<script>alert" not in html
    assert html.count('class="joinable semantic"') == 1  # only the column with a list
    with engine.begin() as conn:
        conn.execute(delete(PexesoMeta).where(PexesoMeta.key == LISTS_FACT))
        conn.execute(insert(PexesoMeta), [{"key": LISTS_FACT, "value": json.dumps({**state, "state": "over_bound"})}])
    engine.dispose()
    assert 'class="joinable semantic"' not in client.get("/table", params={"id": "file:cities.csv"}).text


def test_the_lake_state_page_shows_sources_runs_and_indexes(client: TestClient) -> None:
    page = client.get("/state").text
    assert re.search(r"portal</a></td><td class=\"n\">\d+</td>", page)
    assert "failed" in page and "publish failed: &lt;script&gt;" in page
    for family in ("josie", "lshensemble", "mate"):
        assert f"<td>{family}</td>" in page
    assert "not built" in page  # an empty catalog has no index yet


def test_the_next_weekly_rebuild_is_the_coming_sunday_midnight() -> None:
    wednesday = dt.datetime(2026, 11, 25, 15, 0, tzinfo=dt.UTC)
    assert next_weekly_rebuild(wednesday) == dt.datetime(2026, 11, 29, tzinfo=dt.UTC)
    sunday_midnight = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)
    assert next_weekly_rebuild(sunday_midnight) == dt.datetime(2026, 12, 6, tzinfo=dt.UTC)


def test_no_page_writes_and_only_the_search_form_posts() -> None:
    methods = sorted((route.path, sorted(route.methods)) for route in router.routes)  # type: ignore[attr-defined]
    assert methods == [
        ("/", ["GET"]),
        ("/search", ["GET"]),
        ("/search", ["POST"]),
        ("/state", ["GET"]),
        ("/table", ["GET"]),
        ("/table/transform", ["GET"]),
    ]


def test_every_page_reports_its_server_time(client: TestClient) -> None:
    """The `Server-Timing` header `bench/web_bench.py` reads (the budget is measured there)."""
    for method, path, kwargs in [
        ("GET", "/", {"params": {"q": "c"}}),
        ("GET", "/table", {"params": {"id": "file:cities.csv"}}),
        ("GET", "/search", {}),
        ("POST", "/search", {"files": {"file": ("q.csv", b"city,country\nParis,FR\nRome,IT\n")}}),
        ("GET", "/state", {}),
    ]:
        client.request(method, path, **kwargs)  # warm: first use loads the search modules
        response = client.request(method, path, **kwargs)
        server_ms = float(response.headers["server-timing"].split("dur=")[1])
        assert response.status_code == 200 and server_ms > 0, (path, server_ms)


def test_transformation_search_runs_only_when_asked(client: TestClient) -> None:
    table = b"name,n\nBerlin Germany,1\nParis France,2\n"
    plain = client.post("/search", files={"file": ("q.csv", table)})
    assert plain.status_code == 200 and 'id="join-results"' in plain.text
    assert 'id="transform-results"' not in plain.text
    asked = client.post("/search", files={"file": ("q.csv", table)}, data={"transform": "on"})
    assert asked.status_code == 200 and 'id="transform-results"' in asked.text
    section = asked.text.split('id="transform-results"', 1)[1]
    assert "No lake table joins with yours" in section  # this catalog has no lake behind it
    assert 'name="transform" checked' in asked.text


def test_the_table_page_offers_the_transformation_joins_on_request(client: TestClient) -> None:
    table_id = f"file:{HOSTILE}.csv"
    page = client.get("/table", params={"id": table_id})
    form = page.text.split('<h2 id="transform">', 1)[1]
    assert 'action="/table/transform"' in form and f'name="id" value="{escape(table_id)}"' in form
    answers = client.get("/table/transform", params={"id": table_id})
    assert answers.status_code == 200 and HOSTILE not in answers.text  # escaped, as everywhere
    section = answers.text.split('id="transform-results"', 1)[1]
    assert f"does not hold {escape(table_id)}" in section  # this catalog has no lake behind it
    assert client.get("/table/transform", params={"id": "file:nowhere.csv"}).status_code == 404


def test_semantic_search_says_why_it_has_no_answers(client: TestClient) -> None:
    page = client.post("/search", files={"file": ("q.csv", b"name\nBerlin\nParis\n")})
    section = page.text.split('id="semantic-results"', 1)[1].split("</section>", 1)[0]
    assert "no PEXESO index yet" in section  # this catalog was never indexed
