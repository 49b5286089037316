"""Identity and normalization — the contract (docs/contracts.md) that every stage and every test share.

`table_id` and `column_id` are stable strings (never database row ids), and a *token* is a cell value
after one fixed normalization, so that the Spark jobs, the online search and the brute-force oracles
in the tests all agree on what "the same value" means.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath

import mmh3

NULL_LIKES = frozenset({"", "null", "none", "nan", "n/a", "na", "-"})
# A column's *token sample*: its first SAMPLE_TOKENS distinct tokens in byte order, kept beside its
# tokens (silver `column_token_samples`) for the searches that look at every column a little.
SAMPLE_TOKENS = 64

_WHITESPACE = re.compile(r"\s+")
_ZERO_FRACTION = re.compile(r"^([+-]?)(\d+)\.0+$")
_SURROGATE = re.compile("[\ud800-\udfff]")


def storable_text(value: str) -> str:
    """`value` with what no database and no UTF-8 store can hold taken out, by one fixed rule:
    every NUL (U+0000) is removed and every surrogate code point (U+D800-U+DFFF; in a Python str
    always a lone one, e.g. from a JSON `"\\ud800"` escape) becomes U+FFFD, the replacement character.

    PostgreSQL rejects NUL in text and UTF-8 (Arrow, Delta, Spark, PostgreSQL) cannot encode a
    surrogate, while SQLite stores both, so without this rule one catalog database would accept
    what the other rejects. Landing applies it to every cell, header and text field, and
    `normalize_token` applies it first, so a token is the same whether it is computed from the
    raw file or from the landed cell.
    """
    if "\x00" in value:
        value = value.replace("\x00", "")
    if _SURROGATE.search(value) is not None:
        value = _SURROGATE.sub("\ufffd", value)
    return value


def normalize_token(value: str | None) -> str | None:
    """The token for a cell value, or None when the value is null-like.

    `storable_text` first (NUL removed, lone surrogates replaced by U+FFFD), then NFKC, trimmed,
    inner whitespace runs collapsed to one space, casefolded; `12.0`/`12.00` become `12` so that an
    integer column exported as floats still joins its integer twin; other numbers are kept as
    written (we do not guess at locales or precision). Tokens have no length limit.
    """
    if value is None:
        return None
    text = _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", storable_text(value))).strip().casefold()
    if text in NULL_LIKES:
        return None
    m = _ZERO_FRACTION.match(text)
    if m:
        digits = m.group(2).lstrip("0") or "0"
        return digits if m.group(1) != "-" or digits == "0" else "-" + digits
    return text


def token_set(values: Iterable[str | None]) -> frozenset[str]:
    """A column's set: its distinct tokens."""
    return frozenset(t for t in map(normalize_token, values) if t is not None)


def column_headers(raw_headers: Sequence[str | None]) -> list[str]:
    """Headers as they appear in column ids: trimmed, blanks named `column_<n>`, repeats `~2`, `~3`…"""
    base = [(h or "").strip() or f"column_{i}" for i, h in enumerate(raw_headers, start=1)]
    seen: dict[str, int] = {}
    taken = set(base)
    out: list[str] = []
    for name in base:
        n = seen.get(name, 0) + 1
        seen[name] = n
        if n == 1:
            out.append(name)
            continue
        candidate = f"{name}~{n}"
        while candidate in taken:  # a real header already spelled like our suffix
            n += 1
            candidate = f"{name}~{n}"
        seen[name] = n
        taken.add(candidate)
        out.append(candidate)
    return out


def column_id(table_id: str, header: str) -> str:
    return f"{table_id}#{header}"


def split_column_id(col_id: str) -> tuple[str, str]:
    """(table_id, header). Table ids never hold `#`, headers may: split at the first one."""
    table_id, sep, header = col_id.partition("#")
    if not sep or not table_id:
        raise ValueError(f"not a column_id (expected <table_id>#<header>): {col_id!r}")
    return table_id, header


def socrata_table_id(domain: str, dataset_id: str) -> str:
    return f"socrata:{domain}:{dataset_id}"


def ckan_table_id(host: str, package_id: str, resource_id: str) -> str:
    return f"ckan:{host}:{package_id}/{resource_id}"


def file_table_id(relative_path: str | PurePosixPath) -> str:
    """`file:<path relative to the source root>`, segments joined by `/`, one-to-one with the path.

    `%`, `#`, `\\` and characters that are not printable are percent-encoded (UTF-8; an undecodable
    byte that `os.fsdecode` kept as a lone surrogate becomes that byte), so a `#` never splits a
    column_id, every id passes the API's id checks, and `a\\b.csv` and `a/b.csv` stay two tables.
    """
    rel = PurePosixPath(str(relative_path))
    if rel.is_absolute() or ".." in rel.parts:
        raise ValueError(f"lake file path must be relative and inside the root: {relative_path!r}")
    body = "".join(_escape_id_char(c) for c in str(rel))
    trailing = len(body) - len(body.rstrip(" "))  # an id never ends in a space (the API trims ids)
    return "file:" + body[: len(body) - trailing] + "%20" * trailing


def _escape_id_char(c: str) -> str:
    if c not in "%#\\" and c.isprintable():
        return c
    code = ord(c)
    if 0xDC80 <= code <= 0xDCFF:
        return f"%{code - 0xDC00:02X}"
    return "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))


def table_bucket(table_id: str, n_buckets: int) -> int:
    """The `cells` partition of a table: a stable hash bucket, so adding or deleting a table
    rewrites one partition of the lake's hub table."""
    return mmh3.hash(table_id, seed=0, signed=False) % n_buckets


def valid_table_id(table_id: str) -> bool:
    """Cheap shape check used to reject garbage ids at the API edge before touching the database."""
    kind, sep, rest = table_id.partition(":")
    return bool(sep and rest) and kind in ("socrata", "ckan", "file") and "#" not in table_id and len(table_id) <= 2048
