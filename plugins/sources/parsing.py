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

Cell values are the raw texts; an empty field is None. Headers are raw (blank and repeated headers
are named by `catalog.core.identity.column_headers` when landing).
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc

SAMPLE_BYTES = 64 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGIC = b"PK\x03\x04"
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


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


class CappedReader(io.RawIOBase):
    """A read-only stream that fails once more than `limit` bytes came out of `inner`."""

    def __init__(self, inner: IO[bytes], limit: int, what: str) -> None:
        self.inner, self.limit, self.what, self.n = inner, limit, what, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self.inner.read(len(b))
        self.n += len(data)
        if self.n > self.limit:
            raise ParseError(f"{self.what} larger than {self.limit} bytes (a gzip bomb?)")
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
        return io.BufferedReader(CappedReader(gzip.GzipFile(fileobj=f), limits.max_decompressed_bytes,
                                              "decompressed content"), SAMPLE_BYTES)
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
    from charset_normalizer import from_bytes

    best = from_bytes(sample).best()
    if best is not None and best.encoding:
        return str(best.encoding)
    return "latin-1"


def check_not_html(text_sample: str) -> None:
    head = text_sample.lstrip("\ufeff \t\r\n")[:512].lower()
    if head.startswith(("<!doctype html", "<html", "<head", "<body")) or (
            head.startswith("<") and ("<html" in head or "<body" in head or "<title" in head)):
        raise ParseError("an HTML page was served instead of data (an error or login page?)")


def parse_file(path: str, fmt: str, limits: ParseLimits) -> ParsedContent:
    """Parse a local file of format csv, tsv, json, xlsx, parquet (a file) or delta (a folder)."""
    if fmt == "delta":
        return _parse_delta(path)
    if os.path.getsize(path) == 0:
        raise ParseError("empty file")
    if fmt == "parquet":
        return _parse_parquet([path])
    with open(path, "rb") as f:
        magic = f.read(4)
    if fmt == "xlsx" or (magic == _ZIP_MAGIC and fmt in ("csv", "tsv")):
        return _parse_xlsx(path)
    with open_payload(path, limits) as stream:
        sample = stream.read(SAMPLE_BYTES)
    if not sample.strip(b" \t\r\n\x00\xef\xbb\xbf\xff\xfe"):
        raise ParseError("empty file" if not sample else "file holds only whitespace")
    encoding = detect_encoding(sample)
    text_sample = sample.decode(encoding, errors="replace")
    check_not_html(text_sample)
    if fmt == "json":
        return _parse_json(path, encoding, limits)
    delimiter = "\t" if fmt == "tsv" else ","
    first_line = text_sample.split("\n", 1)[0]
    if fmt == "csv" and "," not in first_line and "\t" in first_line:
        delimiter = "\t"
    try:
        parsed = _parse_csv_arrow(path, encoding, delimiter, text_sample, limits)
    except _FallBackError:
        parsed = _parse_csv_python(path, encoding, delimiter, limits)
    parsed.encoding = encoding
    return parsed


class _FallBackError(Exception):
    pass


def _header_width(text_sample: str, delimiter: str) -> int:
    try:
        first = next(csv.reader(io.StringIO(text_sample.lstrip("\ufeff")), delimiter=delimiter))
    except (StopIteration, csv.Error):
        return 0
    return len(first)


def _parse_csv_arrow(path: str, encoding: str, delimiter: str, text_sample: str, limits: ParseLimits) -> ParsedContent:
    import pyarrow.csv as pcsv

    width = _header_width(text_sample, delimiter)
    if width == 0:
        raise _FallBackError()
    names = [f"f{i}" for i in range(width)]
    arrow_encoding = "utf8" if encoding in ("utf-8", "utf-8-sig", "ascii") else encoding
    block = max(1 << 20, min(limits.max_cell_bytes * 2, 64 << 20))
    try:
        with open_payload(path, limits) as stream:
            table = pcsv.read_csv(
                stream,
                read_options=pcsv.ReadOptions(column_names=names, encoding=arrow_encoding, block_size=block,
                                              use_threads=False),
                parse_options=pcsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
                convert_options=pcsv.ConvertOptions(column_types=dict.fromkeys(names, pa.string()),
                                                    strings_can_be_null=True, null_values=[""],
                                                    quoted_strings_can_be_null=True),
            )
    except ParseError:
        raise
    except (pa.ArrowInvalid, pa.ArrowException, UnicodeDecodeError, ValueError):
        raise _FallBackError() from None
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


def _parse_csv_python(path: str, encoding: str, delimiter: str, limits: ParseLimits) -> ParsedContent:
    old_limit = csv.field_size_limit()
    csv.field_size_limit(max(limits.max_cell_bytes, 1))
    ragged_short = ragged_long = quote_cells = 0
    try:
        with open_payload(path, limits) as raw, io.TextIOWrapper(raw, encoding=encoding, errors="replace",
                                                                   newline="") as text:
            reader = csv.reader(text, delimiter=delimiter, strict=False)
            try:
                header = next(reader, None)
                if header is None:
                    raise ParseError("empty file")
                width = len(header)
                cols: list[list[str | None]] = [[] for _ in range(width)]
                for row in reader:
                    if not row:
                        continue
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
                    raise ParseError(f"a cell is over the limit of {limits.max_cell_bytes} bytes "
                                     f"(line {reader.line_num})") from None
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
    cols: list[list[str | None]] = [[] for _ in range(width)]
    short = long = 0
    for row in rows:
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
    problems = [p for p, n in ((f"{short} short rows padded with nulls", short),
                               (f"{long} long rows cut to {width} columns", long)) if n]
    return ParsedContent([None if h is None else str(h) for h in header], cols,
                         len(cols[0]) if cols else 0, problems=problems)


def _parse_json(path: str, encoding: str, limits: ParseLimits) -> ParsedContent:
    try:
        with open_payload(path, limits) as raw, io.TextIOWrapper(raw, encoding=encoding) as text:
            doc = json.load(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise ParseError(f"invalid JSON: {e}") from None
    if isinstance(doc, dict):
        if isinstance(doc.get("columns"), list) and isinstance(doc.get("data"), list):
            names = [c.get("name") if isinstance(c, dict) else c for c in doc["columns"]]
            return _rows_to_content(names, doc["data"], limits)
        for key in ("data", "records", "rows", "results", "result"):
            if isinstance(doc.get(key), list):
                doc = doc[key]
                break
    if not isinstance(doc, list):
        raise ParseError("JSON is not a list of records")
    if not doc:
        raise ParseError("JSON holds no records")
    if all(isinstance(r, dict) for r in doc):
        names: list[str] = []
        seen: set[str] = set()
        for r in doc:
            for k in r:
                if k not in seen:
                    seen.add(k)
                    names.append(k)
        return _rows_to_content(names, ([r.get(k) for k in names] for r in doc), limits)
    if all(isinstance(r, list) for r in doc):
        return _rows_to_content(doc[0], doc[1:], limits)
    raise ParseError("JSON records are neither all objects nor all arrays")


def _parse_xlsx(path: str) -> ParsedContent:
    try:
        import openpyxl
    except ImportError:  # pragma: no cover - openpyxl is installed
        raise ParseError("no XLSX reader installed") from None
    try:
        wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as e:
        raise ParseError(f"unreadable XLSX: {type(e).__name__}: {e}") from None
    try:
        ws = wb.worksheets[0]
        rows = ws.iter_rows(values_only=True)
        header = next(rows, None)
        if header is None:
            raise ParseError("empty spreadsheet")
        return _rows_to_content(list(header), rows, ParseLimits())
    finally:
        wb.close()


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


def _parse_parquet(files: list[str]) -> ParsedContent:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(files) if len(files) != 1 else pq.read_table(files[0])
    except (pa.ArrowException, OSError) as e:
        raise ParseError(f"unreadable Parquet: {e}") from None
    return arrow_as_text(table)


def _parse_delta(path: str) -> ParsedContent:
    from urllib.parse import unquote

    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    from spark_jobs.lake.store import delta_file_paths

    try:
        dt = DeltaTable(path)
        schema = pa.schema(dt.schema().to_arrow())  # type: ignore[arg-type]
        part_cols = list(dt.metadata().partition_columns)
        data_schema = pa.schema([f for f in schema if f.name not in part_cols])
        parts = []
        for uri in sorted(delta_file_paths(dt)):
            piece = pq.read_table(uri, schema=data_schema)
            values = dict(unquote(seg).split("=", 1) for seg in uri.split("/") if "=" in seg)
            for col in part_cols:  # Hive-style folders hold the partition values
                raw = values.get(col)
                piece = piece.append_column(col, pa.array([None if raw in (None, "__HIVE_DEFAULT_PARTITION__")
                                                           else raw] * piece.num_rows, pa.string()))
            parts.append(piece.select(schema.names))
        table = pa.concat_tables(parts, promote_options="permissive") if parts else schema.empty_table()
    except Exception as e:
        raise ParseError(f"unreadable Delta table: {type(e).__name__}: {e}") from None
    return arrow_as_text(table)


def _open_binary(path_or_uri: str):  # type: ignore[no-untyped-def]
    """A local path with `open`, a remote URI (s3://, gs://, …) through pyarrow's filesystems."""
    if "://" not in path_or_uri:
        return open(path_or_uri, "rb")
    import pyarrow.fs as pafs

    fs, inner = pafs.FileSystem.from_uri(path_or_uri)
    return fs.open_input_stream(inner)


def delta_content_sha256(path: str) -> str:
    """A content hash of a Delta table's current snapshot: its data files' bytes, in path order."""
    import hashlib
    from urllib.parse import unquote, urlsplit

    from deltalake import DeltaTable

    from spark_jobs.lake.store import delta_file_paths

    digest = hashlib.sha256()
    for uri in sorted(delta_file_paths(DeltaTable(path))):
        local = unquote(urlsplit(uri).path) if uri.startswith("file:") else uri
        digest.update(os.path.basename(local).encode() + b"\0")
        with _open_binary(local) as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()
