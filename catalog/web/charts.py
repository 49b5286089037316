"""Vega-Lite specs of a column's profile, built on the server from the stored histogram or top values.

The page embeds each spec as JSON and the vendored vega-embed renders it (`static/vendor/`), so the
browser draws with a maintained library and the server decides what is drawn: a numeric column's
equal-width histogram (`histogram`: edges and counts), else its most frequent values (`top_values`:
[value, count] pairs, most frequent first). Values are data in the spec, never markup.
"""

from __future__ import annotations

from typing import Any

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
