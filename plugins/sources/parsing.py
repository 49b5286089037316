"""Parsing downloaded files into tables of raw cell texts, leniently and safely.

Every input either parses (problems such as ragged rows or stray quotes are counted and reported)
or raises `ParseError` with a readable reason that the crawl records for that one dataset:

* gzip input is unpacked as a stream and capped (`max_decompressed_bytes`): a gzip bomb fails;
* an empty file, an HTML page served as CSV, a cell larger than `max_cell_bytes` and invalid JSON
  fail; a header-only file is a table with no rows;
* the encoding is detected: a BOM (UTF-8, UTF-16, UTF-32) wins, then strict UTF-8, then
  charset-normalizer, then latin-1 (which decodes anything);
* CSV goes through pyarrow (fast, all columns as text); when pyarrow refuses the file (ragged rows,
  quotes that break the column count, oversized rows) the Python csv reader parses it leniently:
  short rows are padded with nulls, long rows are cut, and both are counted.

A file cannot exhaust memory: `ParseLimits` caps rows, columns and cells per table, checked while
the file is read and before its cells are held (a CSV's header is scanned as a stream, CSV rows
arrive in batches, an XLSX sheet's declared dimension is ignored and its rows counted as they come,
Parquet and Delta sizes are read from their metadata, JSON is refused above `max_json_bytes`), and
compressed or binary content other than gzip (bzip2, xz, zstd, 7z, RAR, PDF, images, executables)
is refused instead of landing as a one-column table of garbage.

Cell values are the raw texts; an empty field is None. Headers are raw (blank and repeated headers
are named by `catalog.core.identity.column_headers` when landing).
"""

from __future__ import annotations

import codecs
import csv
import gzip
import hashlib
import io
import json
import os
import re
import unicodedata
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, cast
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from charset_normalizer import from_bytes
from deltalake import DeltaTable

if TYPE_CHECKING:
    from catalog.core.settings import CrawlSettings

SAMPLE_BYTES = 64 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGIC = b"PK\x03\x04"
# Formats that are not text and that we do not unpack: refused by their first bytes.
_REFUSED_MAGIC = (
    (b"BZh", "bzip2-compressed"),
    (b"\xfd7zXZ\x00", "xz-compressed"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!\x1a\x07", "a RAR archive"),
    (b"%PDF-", "a PDF document"),
    (b"\x7fELF", "an executable"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\x04\x22\x4d\x18", "LZ4-compressed"),
    (b"PAR1", "a Parquet file"),
    (_ZIP_MAGIC, "a ZIP archive"),
)
_BINARY_SHARE = 0.05  # decoded text with more control or undecodable characters than this is binary
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


class ParseError(Exception):
    """This file cannot be read as a table; `reason` is shown to the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class ParsedContent:
    headers: list[str | None]
    columns: list[Any]  # one pa.Array or list of str|None per column, all of n_rows
    n_rows: int
    encoding: str | None = None
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ParseLimits:
    max_cell_bytes: int = 1024 * 1024
    max_decompressed_bytes: int = 1024 * 1024 * 1024
    max_rows: int = 10_000_000
    max_columns: int = 16_384
    max_cells: int = 20_000_000
    max_json_bytes: int = 64 * 1024 * 1024
    max_file_bytes: int | None = None  # None: no cap on the file itself (a crawl caps downloads)

    @classmethod
    def from_settings(cls, crawl: CrawlSettings) -> ParseLimits:
        return cls(
            max_cell_bytes=crawl.max_cell_bytes,
            max_decompressed_bytes=crawl.max_decompressed_bytes,
            max_rows=crawl.max_rows,
            max_columns=crawl.max_columns,
            max_cells=crawl.max_cells,
            max_json_bytes=crawl.max_json_bytes,
            max_file_bytes=crawl.max_download_bytes,
        )

    def check_shape(self, n_rows: int, n_columns: int) -> None:
        """ParseError when a table of this shape is over a limit (called as rows arrive)."""
        if n_columns > self.max_columns:
            raise ParseError(f"more than {self.max_columns} columns (crawl.max_columns)")
        if n_rows > self.max_rows:
            raise ParseError(f"more than {self.max_rows} rows (crawl.max_rows)")
        if n_rows * n_columns > self.max_cells:
            raise ParseError(f"more than {self.max_cells} cells: {n_rows} rows x {n_columns} columns (crawl.max_cells)")


class CappedReader(io.RawIOBase):
    """A read-only stream that fails once more than `limit` bytes came out of `inner`."""

    def __init__(self, inner: IO[bytes], limit: int, what: str, hint: str = " (a gzip bomb?)") -> None:
        self.inner, self.limit, self.what, self.n, self.hint = inner, limit, what, 0, hint

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self.inner.read(len(b))
        self.n += len(data)
        if self.n > self.limit:
            raise ParseError(f"{self.what} larger than {self.limit} bytes{self.hint}")
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.inner.close()
        super().close()


def open_payload(path: str, limits: ParseLimits) -> IO[bytes]:
    """The file's bytes, gunzipped as a capped stream when the file is gzip."""
    f = open(path, "rb")  # noqa: SIM115 - returned to the caller
    if f.read(2) == _GZIP_MAGIC:
        f.seek(0)
        return io.BufferedReader(
            CappedReader(
                cast(IO[bytes], gzip.GzipFile(fileobj=f)), limits.max_decompressed_bytes, "decompressed content"
            ),
            SAMPLE_BYTES,
        )
    f.seek(0)
    return f


def detect_encoding(sample: bytes) -> str:
    for bom, name in _BOMS:
        if sample.startswith(bom):
            return name
    try:
        codecs.getincrementaldecoder("utf-8")().decode(sample, final=False)
        return "utf-8"
    except UnicodeDecodeError:
        pass
    if b"\x00" in sample[:4096]:  # UTF-16 without a BOM: every other byte is NUL for ASCII text
        even, odd = sample[0:4096:2].count(0), sample[1:4096:2].count(0)
        if odd > 4 * max(even, 1):
            return "utf-16-le"
        if even > 4 * max(odd, 1):
            return "utf-16-be"
    best = from_bytes(sample).best()
    if best is None or not best.encoding:
        return "latin-1"
    return _prefer_western(sample, str(best.encoding), best.chaos)


def _prefer_western(sample: bytes, guess: str, chaos: float) -> str:
    """Windows-1252 instead of another single-byte code page that reads the bytes no better.

    Single-byte code pages decode any bytes, and on short samples the detector often cannot tell
    them apart: a Latin-1 file ("São Paulo", "Genève") came out as cp1250 ("Săo Paulo", "Genčve").
    Open data is mostly Western, so a tie goes to cp1252; a file that really is Central European
    reads worse as cp1252 (its letters become symbols) and keeps its code page."""
    if guess in _WESTERN or guess.startswith(("utf", "ascii")) or not _single_byte(guess):
        return guess
    western = from_bytes(sample, cp_isolation=["cp1252"]).best()
    if western is not None and western.chaos <= chaos + 0.01:
        return "cp1252"
    return guess


_WESTERN = ("cp1252", "latin_1", "iso8859_15")


def _single_byte(encoding: str) -> bool:
    try:
        return len("\u00e9".encode(encoding, errors="ignore")) <= 1
    except LookupError:
        return False


def check_not_html(text_sample: str) -> None:
    head = text_sample.lstrip("\ufeff \t\r\n")[:512].lower()
    if head.startswith(("<!doctype html", "<html", "<head", "<body")) or (
        head.startswith("<") and ("<html" in head or "<body" in head or "<title" in head)
    ):
        raise ParseError("an HTML page was served instead of data (an error or login page?)")


def parse_file(path: str, fmt: str, limits: ParseLimits) -> ParsedContent:
    """Parse a local file of format csv, tsv, json, xlsx, parquet (a file) or delta (a folder)."""
    if fmt == "delta":
        return _parse_delta(path, limits)
    size = os.path.getsize(path)
    if size == 0:
        raise ParseError("empty file")
    if limits.max_file_bytes is not None and size > limits.max_file_bytes:
        raise ParseError(f"file of {size} bytes is over the limit of {limits.max_file_bytes}")
    if fmt == "parquet":
        return _parse_parquet([path], limits)
    with open(path, "rb") as f:
        magic = f.read(4)
    if fmt == "xlsx" or (magic == _ZIP_MAGIC and fmt in ("csv", "tsv")):
        return _parse_xlsx(path, limits)
    with open_payload(path, limits) as stream:
        sample = stream.read(SAMPLE_BYTES)
    if not sample.strip(b" \t\r\n\x00\xef\xbb\xbf\xff\xfe"):
        raise ParseError("empty file" if not sample else "file holds only whitespace")
    check_not_binary_magic(sample)
    encoding = detect_encoding(sample)
    text_sample = sample.decode(encoding, errors="replace")
    check_not_html(text_sample)
    check_text(text_sample)
    if fmt == "json":
        return _parse_json(path, encoding, limits)
    delimiter = "\t" if fmt == "tsv" else ","
    first_line = text_sample.split("\n", 1)[0]
    if fmt == "csv" and "," not in first_line and "\t" in first_line:
        delimiter = "\t"
    width = first_record_width(path, encoding, delimiter, limits)
    try:
        parsed = _parse_csv_arrow(path, encoding, delimiter, width, limits)
    except _FallBackError:
        parsed = _parse_csv_python(path, encoding, delimiter, limits)
    parsed.encoding = encoding
    return parsed


def check_not_binary_magic(sample: bytes) -> None:
    """ParseError for content that announces a format we do not read as text (only gzip is unpacked)."""
    for magic, what in _REFUSED_MAGIC:
        if sample.startswith(magic):
            raise ParseError(f"the content is {what}, not a table (only gzip is unpacked)")


def check_text(text_sample: str) -> None:
    """ParseError when decoded text is mostly control or undecodable characters: binary content."""
    if not text_sample:
        return
    # NUL is left out: a text cell may hold one (the token contract handles it), and a few odd
    # characters in a small file are data, not a sign of binary content.
    bad = sum(1 for c in text_sample if c == "\ufffd" or (c not in "\t\n\r\f\x00" and unicodedata.category(c) == "Cc"))
    if bad >= 16 and bad > _BINARY_SHARE * len(text_sample):
        raise ParseError(
            f"binary content, not text ({bad} of the first {len(text_sample)} characters are "
            "control or undecodable characters)"
        )


def first_record_width(path: str, encoding: str, delimiter: str, limits: ParseLimits) -> int:
    """The number of fields in the first CSV record (0: none), read as a stream and cut off once it
    passes `max_columns`, so a single 20 MB line of delimiters never becomes millions of fields.

    The scan toggles "quoted" at every quote (an escaped `""` toggles twice), which may read past the
    record's real end but not stop short of it; Python's csv reader then splits the text it kept."""
    special = re.compile('["\r\n' + re.escape(delimiter) + "]")
    fields, in_quotes, content, complete = 1, False, False, True
    kept: list[str] = []
    with (
        open_payload(path, limits) as raw,
        io.TextIOWrapper(raw, encoding=encoding, errors="replace", newline="") as text,
    ):
        while chunk := text.read(SAMPLE_BYTES):
            if len(kept) * SAMPLE_BYTES <= limits.max_cell_bytes * 2:
                kept.append(chunk)
            else:
                complete = False
            pos, end = 0, None
            for m in special.finditer(chunk):
                c, content = m.group(), content or m.start() > pos
                pos = m.end()
                if c == '"':
                    in_quotes, content = not in_quotes, True
                elif in_quotes:
                    continue
                elif c == delimiter:
                    fields, content = fields + 1, True
                    if fields > limits.max_columns:
                        raise ParseError(f"the header has more than {limits.max_columns} columns (crawl.max_columns)")
                elif content:
                    end = m.start()
                    break
            if end is not None:
                break
            content = content or pos < len(chunk)
    if not complete:
        return fields
    try:
        first = next(csv.reader(io.StringIO("".join(kept).lstrip("\ufeff")), delimiter=delimiter), [])
    except csv.Error:
        return fields
    return len(first)


class _FallBackError(Exception):
    pass


def _parse_csv_arrow(path: str, encoding: str, delimiter: str, width: int, limits: ParseLimits) -> ParsedContent:

    if width == 0:
        raise _FallBackError()
    names = [f"f{i}" for i in range(width)]
    arrow_encoding = "utf8" if encoding in ("utf-8", "utf-8-sig", "ascii") else encoding
    block = max(1 << 20, min(limits.max_cell_bytes * 2, 64 << 20))
    batches: list[pa.RecordBatch] = []
    n = 0
    try:
        with open_payload(path, limits) as stream:
            reader = pcsv.open_csv(
                stream,
                read_options=pcsv.ReadOptions(
                    column_names=names, encoding=arrow_encoding, block_size=block, use_threads=False
                ),
                parse_options=pcsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
                convert_options=pcsv.ConvertOptions(
                    column_types=dict.fromkeys(names, pa.string()),
                    strings_can_be_null=True,
                    null_values=[""],
                    quoted_strings_can_be_null=True,
                ),
            )
            for batch in reader:  # rows arrive a block at a time: the limits stop a bomb early
                n += batch.num_rows
                limits.check_shape(max(n - 1, 0), width)
                batches.append(batch)
    except ParseError:
        raise
    except (pa.ArrowInvalid, pa.ArrowException, UnicodeDecodeError, ValueError):
        raise _FallBackError() from None
    table = pa.Table.from_batches(batches, schema=pa.schema([(name, pa.string()) for name in names]))
    if table.num_rows == 0:
        raise ParseError("empty file")
    problems: list[str] = []
    for col in table.columns:
        longest = pc.max(pc.binary_length(col)).as_py() or 0
        if longest > limits.max_cell_bytes:
            raise ParseError(f"a cell of {longest} bytes is over the limit of {limits.max_cell_bytes}")
    headers = [table.column(i)[0].as_py() or "" for i in range(width)]
    if headers and isinstance(headers[0], str):
        headers[0] = headers[0].lstrip("\ufeff")
    body = table.slice(1)
    columns = [body.column(i).combine_chunks() for i in range(width)]
    if body.num_rows:
        last = [c[body.num_rows - 1].as_py() for c in columns]
        if any(isinstance(v, str) and v.count("\n") > 1 for v in last):
            problems.append("the last row holds a multi-line value (an unterminated quote?)")
    return ParsedContent(headers, columns, body.num_rows, problems=problems)


def _guarded_lines(text: IO[str], delimiter: str, limits: ParseLimits) -> Iterator[str]:
    """The lines of `text`, refusing one with more delimiters than `max_columns` allows before the
    csv module turns it into a list (quoted delimiters count too: such a line is refused)."""
    for number, line in enumerate(text, start=1):
        if line.count(delimiter) >= limits.max_columns:
            raise ParseError(f"line {number} has more than {limits.max_columns} fields (crawl.max_columns)")
        yield line


def _parse_csv_python(path: str, encoding: str, delimiter: str, limits: ParseLimits) -> ParsedContent:
    old_limit = csv.field_size_limit()
    csv.field_size_limit(max(limits.max_cell_bytes, 1))
    ragged_short = ragged_long = quote_cells = 0
    try:
        with (
            open_payload(path, limits) as raw,
            io.TextIOWrapper(raw, encoding=encoding, errors="replace", newline="") as text,
        ):
            reader = csv.reader(_guarded_lines(text, delimiter, limits), delimiter=delimiter, strict=False)
            try:
                header = next(reader, None)
                if header is None:
                    raise ParseError("empty file")
                width = len(header)
                limits.check_shape(0, width)
                cols: list[list[str | None]] = [[] for _ in range(width)]
                n_rows = 0
                for row in reader:
                    if not row:
                        continue
                    n_rows += 1
                    limits.check_shape(n_rows, width)
                    if len(row) < width:
                        ragged_short += 1
                        row = row + [""] * (width - len(row))
                    elif len(row) > width:
                        ragged_long += 1
                        row = row[:width]
                    for j, v in enumerate(row):
                        if '"' in v:
                            quote_cells += 1
                        cols[j].append(v if v != "" else None)
            except csv.Error as e:
                if "field larger than field limit" in str(e):
                    raise ParseError(
                        f"a cell is over the limit of {limits.max_cell_bytes} bytes (line {reader.line_num})"
                    ) from None
                raise ParseError(f"malformed CSV at line {reader.line_num}: {e}") from None
    finally:
        csv.field_size_limit(old_limit)
    if header and header[0]:
        header[0] = header[0].lstrip("\ufeff")
    problems = []
    if ragged_short:
        problems.append(f"{ragged_short} short rows padded with nulls")
    if ragged_long:
        problems.append(f"{ragged_long} long rows cut to the header's {width} columns")
    if quote_cells:
        problems.append(f"{quote_cells} cells hold stray quote characters")
    n = len(cols[0]) if cols else 0
    return ParsedContent(list(header), list(cols), n, problems=problems)


def cell_text(value: Any) -> str | None:
    """A JSON/spreadsheet/Parquet value as the text a CSV export would show."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value != value:
            return None
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _rows_to_content(header: Sequence[Any], rows: Iterable[Sequence[Any]], limits: ParseLimits) -> ParsedContent:
    width = len(header)
    limits.check_shape(0, width)
    cols: list[list[str | None]] = [[] for _ in range(width)]
    short = long = 0
    for n_rows, row in enumerate(rows, start=1):
        limits.check_shape(n_rows, width)
        row = list(row)
        if len(row) < width:
            short += 1
            row += [None] * (width - len(row))
        elif len(row) > width:
            long += 1
            row = row[:width]
        for j, v in enumerate(row):
            t = cell_text(v)
            if t is not None and len(t) > limits.max_cell_bytes:
                raise ParseError(f"a cell of {len(t)} characters is over the limit of {limits.max_cell_bytes}")
            cols[j].append(None if t == "" else t)
    problems = [
        p
        for p, n in (
            (f"{short} short rows padded with nulls", short),
            (f"{long} long rows cut to {width} columns", long),
        )
        if n
    ]
    return ParsedContent(
        [None if h is None else str(h) for h in header], cols, len(cols[0]) if cols else 0, problems=problems
    )


def _parse_json(path: str, encoding: str, limits: ParseLimits) -> ParsedContent:
    try:
        with (
            open_payload(path, limits) as raw,
            io.TextIOWrapper(
                io.BufferedReader(
                    CappedReader(
                        raw, limits.max_json_bytes, "JSON document", " (JSON is parsed in memory: crawl.max_json_bytes)"
                    )
                ),
                encoding=encoding,
            ) as text,
        ):
            doc = json.load(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise ParseError(f"invalid JSON: {e}") from None
    if isinstance(doc, dict):
        if isinstance(doc.get("columns"), list) and isinstance(doc.get("data"), list):
            declared = [c.get("name") if isinstance(c, dict) else c for c in doc["columns"]]
            return _rows_to_content(declared, doc["data"], limits)
        for key in ("data", "records", "rows", "results", "result"):
            if isinstance(doc.get(key), list):
                doc = doc[key]
                break
    if not isinstance(doc, list):
        raise ParseError("JSON is not a list of records")
    if not doc:
        raise ParseError("JSON holds no records")
    if all(isinstance(r, dict) for r in doc):
        limits.check_shape(len(doc), 1)
        names: list[str] = []
        seen: set[str] = set()
        for r in doc:
            for k in r:
                if k not in seen:
                    seen.add(k)
                    names.append(k)
                    limits.check_shape(len(doc), len(names))
        return _rows_to_content(names, ([r.get(k) for k in names] for r in doc), limits)
    if all(isinstance(r, list) for r in doc):
        return _rows_to_content(doc[0], doc[1:], limits)
    raise ParseError("JSON records are neither all objects nor all arrays")


def _parse_xlsx(path: str, limits: ParseLimits) -> ParsedContent:
    """The first sheet, streamed. The sheet's declared dimension is ignored (a 4 KB file may declare
    `A1:XFD20000` and have every row padded to it): rows are taken as stored, the table is as wide
    as its widest row, and the limits are checked as rows arrive."""
    try:
        import openpyxl  # deferred: only the formats that need it load it
    except ImportError:  # pragma: no cover - openpyxl is installed
        raise ParseError("no XLSX reader installed") from None
    try:
        with zipfile.ZipFile(path) as z:
            unpacked = sum(i.file_size for i in z.infolist())
    except (zipfile.BadZipFile, OSError) as e:
        raise ParseError(f"unreadable XLSX: {type(e).__name__}: {e}") from None
    if unpacked > limits.max_decompressed_bytes:
        raise ParseError(
            f"XLSX unpacks to {unpacked} bytes, over the limit of {limits.max_decompressed_bytes} (a zip bomb?)"
        )
    try:
        wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as e:
        raise ParseError(f"unreadable XLSX: {type(e).__name__}: {e}") from None
    try:
        ws = wb.worksheets[0]
        if hasattr(ws, "reset_dimensions"):
            ws.reset_dimensions()
        rows = ws.iter_rows(values_only=True)
        header = next(rows, None)
        if header is None:
            raise ParseError("empty spreadsheet")
        return _sheet_content(list(header), rows, limits)
    finally:
        wb.close()


def _sheet_content(header: list[Any], rows: Iterable[Sequence[Any]], limits: ParseLimits) -> ParsedContent:
    """Like `_rows_to_content`, but a row longer than the header widens the table (spreadsheets
    store no trailing empty cells, so width is the widest row), and short rows are not a problem."""
    limits.check_shape(0, len(header))
    cols: list[list[str | None]] = [[] for _ in header]
    n = 0
    for row in rows:
        n += 1
        width = max(len(cols), len(row))
        limits.check_shape(n, width)
        while len(cols) < width:
            cols.append([None] * (n - 1))
            header.append(None)
        for j in range(width):
            t = cell_text(row[j]) if j < len(row) else None
            if t is not None and len(t) > limits.max_cell_bytes:
                raise ParseError(f"a cell of {len(t)} characters is over the limit of {limits.max_cell_bytes}")
            cols[j].append(None if t == "" else t)
    while cols and header[-1] is None and all(v is None for v in cols[-1]):
        cols.pop()  # trailing columns that are empty everywhere (formatting, not data)
        header.pop()
    return ParsedContent([None if h is None else str(h) for h in header], cols, n)


def arrow_as_text(table: pa.Table) -> ParsedContent:
    cols = []
    for col in table.columns:
        try:
            if pa.types.is_floating(col.type):
                raise pa.ArrowNotImplementedError("floats go through cell_text")
            cols.append(col.cast(pa.string()).combine_chunks())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            cols.append([cell_text(v) for v in col.to_pylist()])
    return ParsedContent(list(table.column_names), cols, table.num_rows)


def _parse_parquet(files: list[str], limits: ParseLimits) -> ParsedContent:

    try:
        metas = [pq.ParquetFile(f).metadata for f in files]
        limits.check_shape(sum(m.num_rows for m in metas), max(m.num_columns for m in metas))
        table = pq.read_table(files) if len(files) != 1 else pq.read_table(files[0])
    except (pa.ArrowException, OSError) as e:
        raise ParseError(f"unreadable Parquet: {e}") from None
    return arrow_as_text(table)


def _parse_delta(path: str, limits: ParseLimits) -> ParsedContent:

    try:
        dt = DeltaTable(path)
        schema = pa.schema(dt.schema().to_arrow())
        part_cols = list(dt.metadata().partition_columns)
        records = pa.table(dt.get_add_actions(flatten=True)).column("num_records").to_pylist()
        limits.check_shape(sum(r or 0 for r in records), len(schema))
        data_schema = pa.schema([f for f in schema if f.name not in part_cols])
        parts = []
        for uri in sorted(_delta_files(dt)):
            piece = pq.read_table(uri, schema=data_schema)
            values = dict(unquote(seg).split("=", 1) for seg in uri.split("/") if "=" in seg)
            for col in part_cols:  # Hive-style folders hold the partition values
                raw = values.get(col)
                piece = piece.append_column(
                    col,
                    pa.array(
                        [None if raw in (None, "__HIVE_DEFAULT_PARTITION__") else raw] * piece.num_rows, pa.string()
                    ),
                )
            parts.append(piece.select(schema.names))
        table = pa.concat_tables(parts, promote_options="permissive") if parts else schema.empty_table()
    except ParseError:
        raise
    except Exception as e:
        raise ParseError(f"unreadable Delta table: {type(e).__name__}: {e}") from None
    return arrow_as_text(table)


def _open_binary(path_or_uri: str):
    """A local path with `open`, a remote URI (s3://, gs://, …) through pyarrow's filesystems."""
    if "://" not in path_or_uri:
        return open(path_or_uri, "rb")

    fs, inner = pafs.FileSystem.from_uri(path_or_uri)
    return fs.open_input_stream(inner)


def delta_content_sha256(path: str) -> str:
    """A content hash of a Delta table's current snapshot: its data files' bytes, in path order."""

    digest = hashlib.sha256()
    for uri in sorted(_delta_files(DeltaTable(path))):
        local = unquote(urlsplit(uri).path) if uri.startswith("file:") else uri
        digest.update(os.path.basename(local).encode() + b"\0")
        with _open_binary(local) as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def _delta_files(table: DeltaTable) -> list[str]:
    """The snapshot's data files as paths pyarrow opens (delta-rs percent-encodes local paths)."""
    return [uri if "://" in uri else unquote(uri) for uri in table.file_uris()]
