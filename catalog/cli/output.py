"""How commands print results: one JSON document with `--json`, else an aligned text table."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from catalog.lookup import as_dict


def emit(results: Any, *, as_json: bool, columns: Sequence[str] | None = None, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    data = as_dict(results)
    if as_json:
        json.dump(data, out, indent=2, default=str)
        out.write("\n")
        return
    rows = data if isinstance(data, list) else [data]
    if not rows:
        out.write("(no results)\n")
        return
    if not isinstance(data, list):  # one record: key/value lines read better than a one-row table
        width = max(map(len, data))
        for key, value in data.items():
            out.write(f"{key.ljust(width)}  {_cell(value)}\n")
        return
    cols = list(columns or rows[0].keys())
    cells = [[_cell(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    out.write("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip() + "\n")
    for row in cells:
        out.write("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() + "\n")


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=str)
    return "" if value is None else str(value)
