"""The two sides of `juncture autojoin` and POST /v1/autojoin: a CSV file (or CSV text) or a lake
table_id. CSV parsing is the n-ary search's (`catalog.search.mate.query`); a lake table is read
from bronze `cells` with delta-rs (no Spark): one bucket, one table_id."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from catalog.core.errors import UnknownIdError, UserError
from catalog.core.identity import table_bucket, valid_table_id
from catalog.search.autojoin.join import Table
from catalog.search.mate.query import parse_csv, read_csv

if TYPE_CHECKING:
    from catalog.core.settings import Settings

MAX_LAKE_CELLS = 50_000_000  # a lake table read whole by one process


def csv_table(text: str, *, what: str) -> Table:
    headers, rows = parse_csv(text, what=what)
    return Table.from_rows(headers, rows)


def open_side(spec: str, settings: Settings, *, what: str) -> Table:
    """A CSV file when `spec` names one, else a lake table_id."""
    if not os.path.exists(spec) and valid_table_id(spec):
        return lake_table(spec, settings)
    if os.path.exists(spec):
        headers, rows = read_csv(spec)
        return Table.from_rows(headers, rows)
    if spec.lower().endswith(".csv"):
        raise UserError(f"{what}: no such file {spec!r}")
    raise UserError(f"{what}: {spec!r} is neither a CSV file nor a lake table_id (socrata:…, ckan:…, file:…)")


def lake_table(table_id: str, settings: Settings) -> Table:
    """A lake table's columns from bronze, as landed (raw cell text, rows in file order)."""
    from spark_jobs.lake.bronze import CELLS, DATASETS  # deferred: the lake loads only to read a table
    from spark_jobs.lake.store import LakeStore  # deferred: as above

    store = LakeStore(settings.lake)
    if not store.exists(DATASETS):
        raise UnknownIdError("table", table_id)
    meta = store.read_arrow(DATASETS, columns=["table_id", "headers", "n_rows"], where={"table_id": [table_id]})
    meta = meta.filter(pc.equal(meta["table_id"], table_id))
    if meta.num_rows == 0:
        raise UnknownIdError("table", table_id)
    headers = meta["headers"][0].as_py()
    n_rows = int(meta["n_rows"][0].as_py() or 0)
    if n_rows * len(headers) > MAX_LAKE_CELLS:
        raise UserError(f"{table_id}: {n_rows} rows x {len(headers)} columns is more than autojoin reads")
    bucket = table_bucket(table_id, settings.index.cells_buckets)
    # the table's bucket, and in it only the files whose table_id range holds it (bronze keeps a
    # bucket's files in table_id order): a whole bucket of the portal's seed is 6 M cells
    where: dict[str, list[object]] = {"bucket": [bucket], "table_id": [table_id]}
    cells = store.read_arrow(CELLS, columns=["row", "col", "value"], where=where)
    columns = cells_columns(cells, range(1, len(headers) + 1))
    return Table(tuple(headers), tuple(columns[p] for p in range(1, len(headers) + 1)))


def cells_columns(cells: pa.Table, positions: Iterable[int]) -> dict[int, pa.Array]:
    """One table's columns at `positions` (1-based) from its bronze cells (row, col, value), as
    landed: rows in file order up to the table's last row, empty cells null."""
    rows = cells["row"].to_numpy()
    cols = cells["col"].to_numpy()
    n = int(rows.max()) + 1 if len(rows) else 0
    columns = {}
    for position in positions:
        mine = cols == position
        index = np.full(n, -1, np.int64)
        index[rows[mine]] = np.nonzero(mine)[0]
        values = cells["value"].take(pa.array(np.where(index >= 0, index, 0))) if len(cells) else pa.nulls(n)
        values = pc.if_else(pa.array(index >= 0), values, pa.scalar(None, pa.string()))
        columns[position] = pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.string()), values)
    return columns
