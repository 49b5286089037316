"""Vega-Lite specs of a column's profile, built on the server from the stored histogram or top values.

The page embeds each spec as JSON and the vendored vega-embed renders it (`static/vendor/`), so the
browser draws with a maintained library and the server decides what is drawn: a numeric column's
equal-width histogram (`histogram`: edges and counts), else its most frequent values (`top_values`:
[value, count] pairs, most frequent first). Values are data in the spec, never markup.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from catalog.lookup import ProfileInfo

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"  # an identifier only: nothing fetches it
TOP_SHOWN = 10
WIDTH, HEIGHT = 220, 90


def _base(title: str) -> dict[str, Any]:
    return {
        "$schema": SCHEMA,
        "width": WIDTH,
        "height": HEIGHT,
        "title": {"text": title, "fontSize": 11, "anchor": "start"},
        "config": {"view": {"stroke": None}, "axis": {"labelFontSize": 10, "titleFontSize": 10}},
    }


def histogram_spec(histogram: dict[str, Any]) -> dict[str, Any]:
    """Bars over [edge_i, edge_i+1) with their counts (the profile's bins, not re-binned here)."""
    edges, counts = histogram["edges"], histogram["counts"]
    values = [{"start": edges[i], "end": edges[i + 1], "count": c} for i, c in enumerate(counts)]
    return {
        **_base("histogram"),
        "data": {"values": values},
        "mark": {"type": "bar", "color": "#3b6ea8"},
        "encoding": {
            "x": {
                "field": "start",
                "type": "quantitative",
                "bin": {"binned": True},
                "title": None,
                "axis": {"format": "~g"},
            },
            "x2": {"field": "end"},
            "y": {"field": "count", "type": "quantitative", "title": "rows"},
            "tooltip": [
                {"field": "start", "type": "quantitative", "title": "from"},
                {"field": "end", "type": "quantitative", "title": "to"},
                {"field": "count", "type": "quantitative", "title": "rows"},
            ],
        },
    }


def top_values_spec(top_values: list[list[Any]]) -> dict[str, Any]:
    """Horizontal bars of the most frequent values, in the profile's order."""
    values = [{"value": str(v), "count": c, "rank": i} for i, (v, c) in enumerate(top_values[:TOP_SHOWN])]
    return {
        **_base(f"top {len(values)} values"),
        "height": {"step": 12},
        "data": {"values": values},
        "mark": {"type": "bar", "color": "#5a8f5a"},
        "encoding": {
            "y": {
                "field": "value",
                "type": "nominal",
                "sort": {"field": "rank", "order": "ascending"},
                "title": None,
                "axis": {"labelLimit": 110},
            },
            "x": {"field": "count", "type": "quantitative", "title": "rows"},
            "tooltip": [{"field": "value", "type": "nominal"}, {"field": "count", "type": "quantitative"}],
        },
    }


def profile_chart(profile: ProfileInfo) -> dict[str, Any] | None:
    """The chart of a column: its histogram when it has one over a spread of values, else its top
    values, else none."""
    histogram = profile.histogram
    edges = histogram.get("edges") if isinstance(histogram, dict) else None
    if edges and len(edges) > 1 and edges[0] != edges[-1] and profile.distinct_count > 1:  # one value: no spread
        return histogram_spec(histogram)
    if profile.top_values:
        return top_values_spec(list(profile.top_values))
    return None


VEGA_SCHEMA = "https://vega.github.io/schema/vega/v6.json"  # an identifier only, as SCHEMA
EDGE_KINDS = ("join", "semantic", "union", "n-ary")
EDGE_WIDTH = {"join": 1.5, "semantic": 1.0, "union": 4.0, "n-ary": 7.0}
EDGE_COLOUR = {"join": "#3b6ea8", "semantic": "#8e5ea8", "union": "#5a8f5a", "n-ary": "#b5651d"}
GRAPH_WIDTH, GRAPH_HEIGHT = 560, 260


def neighbourhood_spec(table_id: str, edges: list[tuple[str, str]], href: str) -> dict[str, Any] | None:
    """A Vega force-directed graph of a table and its neighbours: `edges` are (kind, other table_id)
    pairs, kind one of EDGE_KINDS, a pair drawn once however many columns give it; each node links
    to its table's page (`href` + the URL-quoted id). None when the table has no neighbour."""
    pairs = sorted({(kind, other) for kind, other in edges if other != table_id and kind in EDGE_KINDS})
    if not pairs:
        return None
    ids = [table_id, *sorted({other for _, other in pairs})]
    at = {t: i for i, t in enumerate(ids)}
    nodes = [
        {
            "index": i,
            "id": t,
            "label": _short(t),
            "kind": "this table" if i == 0 else "table",
            "href": href + quote(t, safe=""),
        }
        for i, t in enumerate(ids)
    ]
    # one line per relation, the widest first: a table related in several ways shows nested lines
    by_width = sorted(pairs, key=lambda p: -EDGE_WIDTH[p[0]])
    links = [{"source": 0, "target": at[other], "kind": kind, "width": EDGE_WIDTH[kind]} for kind, other in by_width]
    return {
        "$schema": VEGA_SCHEMA,
        "width": GRAPH_WIDTH,
        "height": GRAPH_HEIGHT,
        "autosize": "none",
        "padding": 10,
        "data": [{"name": "node-data", "values": nodes}, {"name": "link-data", "values": links}],
        "scales": [
            {
                "name": "edge",
                "type": "ordinal",
                "domain": list(EDGE_KINDS),
                "range": ["#3b6ea8", "#8e5ea8", "#5a8f5a", "#b5651d"],
            },
            {"name": "node", "type": "ordinal", "domain": ["this table", "table"], "range": ["#222", "#999"]},
        ],
        "legends": [{"stroke": "edge", "orient": "top-left", "title": "relation", "symbolType": "stroke"}],
        "marks": [
            {
                "name": "nodes",
                "type": "symbol",
                "zindex": 1,
                "from": {"data": "node-data"},
                "encode": {
                    "enter": {
                        "fill": {"scale": "node", "field": "kind"},
                        "size": {"value": 160},
                        "href": {"field": "href"},
                        "tooltip": {"field": "id"},
                        "cursor": {"value": "pointer"},
                    }
                },
                "transform": [
                    {
                        "type": "force",
                        "static": True,
                        "iterations": 300,
                        "forces": [
                            {"force": "center", "x": GRAPH_WIDTH / 2, "y": GRAPH_HEIGHT / 2},
                            {"force": "collide", "radius": 18},
                            {"force": "nbody", "strength": -90},
                            {"force": "link", "links": "link-data", "distance": 110},
                        ],
                    }
                ],
            },
            {
                "name": "links",
                "type": "path",
                "from": {"data": "link-data"},
                "interactive": False,
                "encode": {
                    "update": {
                        "stroke": {"scale": "edge", "field": "kind"},
                        "strokeWidth": {"field": "width"},
                        "strokeOpacity": {"value": 0.85},
                    }
                },
                "transform": [
                    {
                        "type": "linkpath",
                        "shape": "line",
                        "sourceX": "datum.source.x",
                        "sourceY": "datum.source.y",
                        "targetX": "datum.target.x",
                        "targetY": "datum.target.y",
                    }
                ],
            },
            {
                "name": "labels",
                "type": "text",
                "from": {"data": "nodes"},
                "interactive": False,
                "encode": {
                    "update": {
                        "x": {"field": "x"},
                        "y": {"field": "y"},
                        "dy": {"value": -11},
                        "align": {"value": "center"},
                        "fontSize": {"value": 10},
                        "text": {"field": "datum.label"},
                    }
                },
            },
        ],
    }


def _short(table_id: str) -> str:
    """A node's label: the last part of the id (a file or dataset name), at most 24 characters."""
    tail = table_id.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return tail if len(tail) <= 24 else tail[:23] + "…"
