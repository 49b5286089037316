"""What a source lister returns: one `ListedTable` per table it offers, and the id checks that keep
portal ids from ever becoming paths or SQL."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from catalog.core.errors import JunctureError
from plugins.sources.url_policy import UrlPolicy

SOCRATA_ID = re.compile(r"^[a-z0-9]{4}-[a-z0-9]{4}$")
PORTAL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,199}$")
TABULAR_FORMATS = {
    "csv": "csv",
    "tsv": "tsv",
    "tab": "tsv",
    "json": "json",
    "xlsx": "xlsx",
    "text/csv": "csv",
    "text/tab-separated-values": "tsv",
    "application/json": "json",
}


class ListingError(JunctureError):
    """A source could not be listed (unreachable, invalid JSON, unexpected shape): the crawl skips
    the whole source this run and deletes nothing from it."""


class BadIdError(JunctureError):
    """A portal handed out an id that is not safe to use."""


@dataclass(frozen=True)
class ListedTable:
    """A table a source offers. `stamp` is the portal's modification stamp (or mtime:size for files);
    `url`/`path` says where its bytes are; `policy` is the source's URL policy, which the download
    and its redirects follow. `problem` marks an entry that is listed but unusable."""

    table_id: str
    source: str
    name: str
    stamp: str
    format: str
    url: str = ""
    path: str = ""
    title: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    portal_types: tuple[str, ...] = ()
    problem: str | None = None
    policy: UrlPolicy | None = field(default=None, compare=False, repr=False)


def check_id(value: object, pattern: re.Pattern[str], what: str) -> str:
    """`value` if it matches `pattern`, else BadIdError (ids become URL segments and table ids)."""
    if not isinstance(value, str) or not pattern.match(value):
        raise BadIdError(f"unsafe or malformed {what} {str(value)[:80]!r}")
    return value


def tabular_format(fmt: str | None, url: str = "", mimetype: str | None = None) -> str | None:
    """csv/tsv/json/xlsx from a CKAN resource's format, mimetype or URL suffix; None if not tabular."""
    for hint in (fmt, mimetype):
        if hint and hint.strip().lower() in TABULAR_FORMATS:
            return TABULAR_FORMATS[hint.strip().lower()]
    path = url.lower().split("?", 1)[0]
    for suffix in ("csv", "tsv", "json", "xlsx"):
        if path.endswith("." + suffix):
            return suffix
    return None


def reject_duplicate_ids(entries: list[ListedTable]) -> list[ListedTable]:
    """Entries that share a table_id all become problems naming each other: landing both would
    let one overwrite the other's cells, and picking one would hide the other."""
    names: dict[str, list[str]] = {}
    for e in entries:
        names.setdefault(e.table_id, []).append(e.name)
    return [
        e
        if len(names[e.table_id]) == 1
        else dataclasses.replace(
            e,
            problem=f"{len(names[e.table_id])} entries map to table_id {e.table_id!r}: "
            + ", ".join(repr(n) for n in sorted(names[e.table_id])),
        )
        for e in entries
    ]
