"""The chart a column gets: its histogram over a spread of values, else its top values, else none."""

from __future__ import annotations

import dataclasses

from catalog.lookup import ProfileInfo
from catalog.web.charts import TOP_SHOWN, neighbourhood_spec, profile_chart

BASE = ProfileInfo(
    column_id="file:t.csv#x",
    table_id="file:t.csv",
    column="x",
    row_count=10,
    null_count=0,
    empty_count=0,
    distinct_count=3,
    distinct_exact=True,
    distinct_error=None,
    inferred_type="integer",
    type_share=1.0,
    portal_type=None,
    min_value="1",
    max_value="9",
    length_min=1,
    length_mean=1.0,
    length_max=1,
    top_values=[["1", 5], ["9", 3], ["4", 2]],
    histogram={"edges": [1.0, 5.0, 9.0], "counts": [7, 3]},
    uniqueness=0.3,
    token_count=10,
)


def test_a_numeric_spread_gets_its_histogram_bins_as_they_are() -> None:
    spec = profile_chart(BASE)
    assert spec is not None and spec["encoding"]["x2"] == {"field": "end"}
    assert spec["data"]["values"] == [{"start": 1.0, "end": 5.0, "count": 7}, {"start": 5.0, "end": 9.0, "count": 3}]


def test_one_value_or_no_histogram_gets_the_top_values_in_order() -> None:
    single = dataclasses.replace(BASE, distinct_count=1, histogram={"edges": [4.0, 4.0], "counts": [10]})
    many = [[f"v{i}", 100 - i] for i in range(TOP_SHOWN + 5)]
    for profile in (single, dataclasses.replace(BASE, histogram=None, top_values=many)):
        spec = profile_chart(profile)
        assert spec is not None and spec["mark"]["type"] == "bar" and "x2" not in spec["encoding"]
        values = spec["data"]["values"]
        assert [v["rank"] for v in values] == list(range(len(values))) and len(values) <= TOP_SHOWN
        assert values[0]["value"] == profile.top_values[0][0]


def test_a_column_without_values_gets_no_chart() -> None:
    assert profile_chart(dataclasses.replace(BASE, histogram=None, top_values=[])) is None


def test_the_neighbourhood_graph_draws_each_relation_once() -> None:
    edges = [("join", "file:b.csv"), ("join", "file:b.csv"), ("union", "file:b.csv"), ("n-ary", "file:c.csv")]
    edges += [("join", "file:a.csv"), ("unknown", "file:d.csv")]  # itself, and a kind that is not drawn
    spec = neighbourhood_spec("file:a.csv", edges, href="/table?id=")
    assert spec is not None and spec["$schema"].endswith("/vega/v6.json")
    data = {d["name"]: d["values"] for d in spec["data"]}
    assert [n["id"] for n in data["node-data"]] == ["file:a.csv", "file:b.csv", "file:c.csv"]
    assert data["node-data"][1]["href"] == "/table?id=file%3Ab.csv" and data["node-data"][1]["label"] == "b.csv"
    links = sorted((link["target"], link["kind"]) for link in data["link-data"])
    assert links == [(1, "join"), (1, "union"), (2, "n-ary")]
    assert all(link["source"] == 0 for link in data["link-data"])
    assert neighbourhood_spec("file:a.csv", [("join", "file:a.csv")], href="/") is None
