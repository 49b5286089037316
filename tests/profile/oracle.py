"""Plain-Python oracles for column profiles and keys, written from the definitions in the module
docstrings of spark_jobs/profile/profiles.py and spark_jobs/profile/keys.py (dates via
`datetime.strptime`, keys by enumerating every combination), sharing no code with the jobs."""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from catalog.core.identity import column_headers, normalize_token, token_set
from spark_jobs.crawl.land import ParsedTable

DATE_FORMATS = (
    "%Y-%m-%d",
    "%Y/%m/%d",
    "%Y.%m.%d",
    "%m/%d/%Y",
    "%d/%m/%Y",
    "%d.%m.%Y",
    "%d-%m-%Y",
    "%d %b %Y",
    "%d %B %Y",
    "%b %d, %Y",
    "%B %d, %Y",
    "%b %d %Y",
    "%B %d %Y",
)
DATETIME_FORMATS = (
    "%Y-%m-%dT%H:%M:%SZ",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%dT%H:%M",
    "%m/%d/%Y %H:%M",
    "%m/%d/%Y %H:%M:%S",
    "%m/%d/%Y %I:%M %p",
    "%m/%d/%Y %I:%M:%S %p",
)


def parse_any(text: str, formats: Sequence[str]) -> dt.datetime | None:
    for fmt in formats:
        try:
            return dt.datetime.strptime(text, fmt)
        except ValueError:
            continue
    return None


@functools.cache
def kind_of(s: str) -> str:
    if s.lower() in {"true", "false", "yes", "no", "t", "f", "y", "n"}:
        return "boolean"
    if re.fullmatch(r"[+-]?[0-9]+", s) and abs(int(s)) < 2**63:
        return "integer"
    if re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", s) and math.isfinite(float(s)):
        return "decimal"
    if parse_any(s, DATE_FORMATS):
        return "date"
    if parse_any(s, DATETIME_FORMATS):
        return "datetime"
    return "text"


def is_code(s: str) -> bool:
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:/#-")
    return 1 <= len(s) <= 32 and set(s) <= allowed and (any(c.isdigit() for c in s) or s.upper() == s)


def present_values(values: Sequence[str | None]) -> list[str]:
    return [v for v in values if v is not None and normalize_token(v) is not None]


def profile(values: Sequence[str | None]) -> dict[str, Any]:
    """The profile of one column, from its raw values."""
    present = present_values(values)
    texts = [v.strip() for v in present]
    kinds = Counter(kind_of(s) for s in texts)
    distinct = len(set(present))
    n = len(present)
    out: dict[str, Any] = {
        "row_count": len(values),
        "null_count": sum(v is None for v in values),
        "empty_count": sum(v is not None and normalize_token(v) is None for v in values),
        "distinct_count": distinct,
        "uniqueness": distinct / len(values) if values else 0.0,
        "token_count": len(token_set(values)),
        "length_min": min(map(len, texts)) if texts else None,
        "length_max": max(map(len, texts)) if texts else None,
        "length_mean": sum(map(len, texts)) / n if n else None,
        "top_values": sorted(Counter(present).items(), key=lambda kv: (-kv[1], kv[0]))[:10],
    }
    typ, share = "empty", 0.0
    if n:
        numeric = kinds["integer"] + kinds["decimal"]
        if kinds["boolean"] >= 0.9 * n:
            typ, share = "boolean", kinds["boolean"] / n
        elif numeric >= 0.9 * n:
            typ = "integer" if kinds["decimal"] == 0 else "decimal"
            share = (kinds["integer"] if typ == "integer" else numeric) / n
        elif kinds["date"] >= 0.9 * n:
            typ, share = "date", kinds["date"] / n
        elif kinds["date"] + kinds["datetime"] >= 0.9 * n:
            typ, share = "datetime", (kinds["date"] + kinds["datetime"]) / n
        else:
            codes = sum(map(is_code, texts))
            if codes >= 0.9 * n and (distinct / n >= 0.5 or distinct > 50):
                typ, share = "identifier", codes / n
            elif distinct <= 50 and distinct / n < 0.5:
                typ, share = "categorical", 1.0
            else:
                typ, share = "text", 1.0
    out["inferred_type"], out["type_share"] = typ, share
    out["min_value"] = out["max_value"] = None
    out["histogram_counts"] = None
    if typ in ("integer", "decimal"):
        nums = [float(s) for s in texts if kind_of(s) in ("integer", "decimal")]
        lo, hi = min(nums), max(nums)
        if typ == "integer":
            ints = [int(s) for s in texts if kind_of(s) == "integer"]
            out["min_value"], out["max_value"] = str(min(ints)), str(max(ints))
        else:
            out["min_value"], out["max_value"] = repr(lo), repr(hi)
        if hi == lo:
            out["histogram_counts"] = [len(nums)]
        else:
            out["histogram_counts"] = [
                sum(1 for x in nums if min(math.floor((x - lo) / (hi - lo) * 10), 9) == b) for b in range(10)
            ]
        mean = sum(nums) / len(nums)
        out["numeric_mean"] = mean
        out["numeric_std"] = math.sqrt(sum((x - mean) ** 2 for x in nums) / len(nums))
    elif typ == "date":
        days = [parse_any(s, DATE_FORMATS) for s in texts]
        ok = sorted(d for d in days if d is not None)
        out["min_value"], out["max_value"] = ok[0].date().isoformat(), ok[-1].date().isoformat()
    elif typ == "datetime":
        moments = [parse_any(s, DATE_FORMATS) or parse_any(s, DATETIME_FORMATS) for s in texts]
        ok = sorted(m for m in moments if m is not None)
        out["min_value"], out["max_value"] = (ok[0].strftime("%Y-%m-%d %H:%M:%S"), ok[-1].strftime("%Y-%m-%d %H:%M:%S"))
    return out


_PROFILES: dict[int, tuple[ParsedTable, dict[str, dict[str, Any]]]] = {}


def table_profiles(table: ParsedTable) -> dict[str, dict[str, Any]]:
    """column_id -> profile for every column of `table` (remembered per table object)."""
    if id(table) in _PROFILES and _PROFILES[id(table)][0] is table:
        return _PROFILES[id(table)][1]
    headers = column_headers(list(table.headers))
    out = {f"{table.table_id}#{h}": profile(values) for h, values in zip(headers, table.columns, strict=True)}
    _PROFILES[id(table)] = (table, out)
    return out


def keys(table: ParsedTable, *, max_size: int = 3) -> set[tuple[tuple[str, ...], bool]]:
    """Every (columns, exact) key: complete non-float non-empty columns; singles unique or with
    distinct/rows >= 0.99; pairs and triples unique with no unique subset. A combination whose
    distinct-count product is below the row count is not enumerated (it cannot be unique)."""
    headers = column_headers(list(table.headers))
    n = table.n_rows
    if n == 0:
        return set()
    profiles = list(table_profiles(table).values())
    candidates = [
        i
        for i, p in enumerate(profiles)
        if p["inferred_type"] not in ("decimal", "empty") and p["null_count"] + p["empty_count"] == 0
    ]
    card = {i: len(set(table.columns[i])) for i in candidates}
    unique: set[tuple[int, ...]] = set()
    out: set[tuple[tuple[str, ...], bool]] = set()
    for size in range(1, max_size + 1):
        for combo in itertools.combinations(candidates, size):
            if any(sub in unique for k in range(1, size) for sub in itertools.combinations(combo, k)):
                continue
            if math.prod(card[i] for i in combo) < n:
                continue
            rows = set(zip(*(table.columns[i] for i in combo), strict=True))
            if len(rows) == n:
                unique.add(combo)
                out.add((tuple(headers[i] for i in combo), True))
            elif size == 1 and len(rows) / n >= 0.99:
                out.add(((headers[combo[0]],), False))
    return out
