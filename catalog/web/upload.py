"""The "search with my table" form's body: read as a stream with a size cap, then parsed as a form.

The API's size check (`catalog.api.app.RequestSizeLimit`) answers an oversized body with JSON before
routing; a browser posting a form needs a page that says what went wrong instead, so the upload
route limits its own body: a declared length over the cap is refused at once, and a body is read
chunk by chunk and refused as soon as it passes the cap (a missing or false length gains nothing).
The rest of an oversized body is drained up to `DRAIN_BYTES` before answering, because a browser
that is still sending when the server answers and closes often shows a reset connection, not the
page. Within the cap the bytes are replayed to Starlette's form parser (python-multipart)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request

from catalog.core.errors import UserError
from catalog.search.mate.query import QueryTable, parse_csv

MAX_UPLOAD_BYTES = 2 * 1024 * 1024
DRAIN_BYTES = 64 * 1024 * 1024
MAX_FIELDS = 20


class UploadTooLargeError(UserError):
    """The posted form is over the upload cap."""

    def __init__(self, cap: int) -> None:
        super().__init__(f"the upload is over the limit of {cap // 1024 // 1024} MB: send a smaller CSV or a sample")
        self.cap = cap


async def read_capped(request: Request, cap: int = MAX_UPLOAD_BYTES) -> bytes:
    """The request body, or `UploadTooLargeError` once it passes `cap` bytes."""
    length = request.headers.get("content-length")
    over = length is not None and length.isdigit() and int(length) > cap
    data = bytearray()
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if not over:
            data += chunk
            over = len(data) > cap
        if over and received > DRAIN_BYTES:
            break
    if over:
        raise UploadTooLargeError(cap)
    return bytes(data)


@dataclass(frozen=True)
class SearchForm:
    """What the user sent: the query table and how to search with it."""

    table: QueryTable
    text: str  # the table as text, shown again in the form so another column can be picked
    column: str | None
    key: str | None
    threshold: float
    k: int
    transform: bool = False  # also search for joins through a learned transformation (seconds)


async def parse_form(request: Request, body: bytes) -> Mapping[str, Any]:
    """The form fields of `body` (multipart or url-encoded), by Starlette's parser."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    form = await Request(request.scope, replay).form(max_files=1, max_fields=MAX_FIELDS, max_part_size=len(body) + 1)
    return dict(form)


def _number(raw: Any, name: str, kind: type, low: float, high: float, default: Any) -> Any:
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = kind(str(raw).strip())
    except ValueError:
        raise UserError(f"{name} must be a number, got {str(raw)[:40]!r}") from None
    if not low <= value <= high:
        raise UserError(f"{name} must be between {low} and {high}, got {value}")
    return value


async def search_form(fields: Mapping[str, Any]) -> SearchForm:
    """The query table from the uploaded file (when one was chosen) or the pasted text: CSV with a
    header row, or one value per line (`format=values`: a one-column table named `value`)."""
    upload = fields.get("file")
    text = ""
    if isinstance(upload, UploadFile) and upload.filename:
        raw = await upload.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UserError("the uploaded file is not UTF-8 text (save the CSV as UTF-8)") from None
    if not text.strip():
        text = str(fields.get("text") or "")
    if not text.strip():
        raise UserError("choose a CSV file or paste values first")
    if fields.get("format") == "values":
        table: QueryTable = (["value"], [[line] for line in text.splitlines()])
    else:
        table = parse_csv(text, what="the CSV")
        if not table[1]:
            raise UserError("the CSV has a header row but no data rows")
    column = str(fields.get("column") or "").strip() or None
    if column is not None and column not in table[0]:
        raise UserError(f"the table has no column {column!r} (its columns: {', '.join(table[0])})")
    key = str(fields.get("key") or "").strip() or None
    threshold = _number(fields.get("threshold"), "threshold", float, 0.01, 1.0, 0.5)
    k = _number(fields.get("k"), "k", int, 1, 100, 10)
    return SearchForm(table, text, column, key, threshold, k, transform=fields.get("transform") == "on")
