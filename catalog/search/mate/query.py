"""The query table of an n-ary search: read from CSV, and its composite key when the user names none.

The key search is the lake's own (`catalog.core.keys`, as the profile stage runs it per table) over
the query's normalized values (what the search compares): its minimal unique column combinations of
2 or 3 complete columns, best first. The first is used; the others are reported so the user can pick
one with `--key`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

import numpy as np

from catalog.core.errors import UserError
from catalog.core.identity import column_headers, normalize_token
from catalog.core.keys import KeyColumn, minimal_keys

MAX_QUERY_BYTES = 64 * 1024 * 1024  # a query CSV read by the CLI (the API's limit is its body limit)

QueryTable = tuple[list[str], list[list[str | None]]]


def parse_csv(text: str, *, what: str = "the query CSV") -> QueryTable:
    """(headers, data rows) of a CSV text; headers named by the lake's contract (`column_headers`)."""
    try:
        records = list(csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline=""), strict=True))
    except csv.Error as e:
        raise UserError(f"{what} is not valid CSV: {e}") from None
    records = [r for r in records if r]
    if not records:
        raise UserError(f"{what} is empty (a header row is needed)")
    headers = column_headers(records[0])
    rows: list[list[str | None]] = [list(r) for r in records[1:]]
    return headers, rows


def read_csv(path: str) -> QueryTable:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_QUERY_BYTES + 1)
    except FileNotFoundError:
        raise UserError(f"--csv: no such file {path!r}") from None
    except OSError as e:
        raise UserError(f"--csv: cannot read {path!r}: {e.strerror or e}") from None
    if len(data) > MAX_QUERY_BYTES:
        raise UserError(f"--csv: {path!r} is larger than {MAX_QUERY_BYTES // (1024 * 1024)} MB")
    return parse_csv(data.decode("utf-8", errors="replace"), what=f"--csv {path!r}")


def composite_keys(headers: Sequence[str], rows: Sequence[Sequence[str | None]]) -> list[tuple[str, ...]]:
    """The query's minimal unique combinations of 2-3 complete columns (no null value), best first:
    fewer columns, then the key search's score."""
    columns = []
    for position, header in enumerate(headers, start=1):
        tokens = [normalize_token(r[position - 1]) if position - 1 < len(r) else None for r in rows]
        if not tokens or None in tokens:
            continue
        _, codes = np.unique(np.asarray(tokens, dtype=object), return_inverse=True)
        columns.append(KeyColumn(header, position, "text", codes.astype(np.int64), int(codes.max()) + 1))
    found = minimal_keys(columns, len(rows), n_columns=len(headers)).keys
    composite = [k for k in found if k.exact and len(k.columns) >= 2]
    return [k.columns for k in sorted(composite, key=lambda k: (len(k.columns), -k.score, k.columns))]


def choose_key(
    headers: Sequence[str], rows: Sequence[Sequence[str | None]], key: str | None
) -> tuple[list[str], list[tuple[str, ...]]]:
    """(the key columns, the detected keys) for `--key` as given (comma-separated) or detected."""
    if key is not None:
        return [c.strip() for c in key.split(",") if c.strip()], []
    detected = composite_keys(headers, rows)
    if not detected:
        raise UserError(
            "no composite key found in the query table (no 2-3 complete columns are unique "
            "together); pass --key COL,COL"
        )
    return list(detected[0]), detected
