"""Bulk inserts for the catalog publish: PostgreSQL's COPY, executemany in large chunks elsewhere.

A publish writes millions of rows (a JOSIE index of a real lake holds one posting list per distinct
value). As INSERT statements, even batched, PostgreSQL parses, plans and acknowledges each batch;
COPY streams the rows into the table in one command. The rows go through each column type's bind
processing first (the packed integer arrays become bytes), so COPY stores exactly what an INSERT
would. The COPY runs on the session's own connection, inside the publish transaction: a publish
that fails still rolls back as a whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import chain, islice
from typing import Any

from sqlalchemy import Connection, Table, insert
from sqlalchemy.orm import Session

CHUNK_ROWS = 5000  # rows per executemany where COPY is not available


def insert_rows(session: Session, model: Any, rows: Iterable[Mapping[str, Any]]) -> int:
    """Insert `rows` (dicts keyed by column name, all with the same keys) into `model`'s table;
    returns how many. COPY on PostgreSQL unless a left-out column has a Python-side default."""
    iterator = iter(rows)
    first = next(iterator, None)
    if first is None:
        return 0
    everything = chain([first], iterator)
    connection = session.connection()
    table: Table = model.__table__
    if connection.dialect.name == "postgresql" and not _python_defaults(table, first):
        return _copy(connection, table, list(first), everything)
    n = 0
    while chunk := list(islice(everything, CHUNK_ROWS)):
        session.execute(insert(model), chunk)
        n += len(chunk)
    return n


def _python_defaults(table: Table, row: Mapping[str, Any]) -> bool:
    """Whether a column the rows leave out has a default computed in Python (say a key derived
    from another column), which only an INSERT through SQLAlchemy fills in."""
    return any(c.default is not None for c in table.columns if c.name not in row)


def _copy(connection: Connection, table: Table, names: list[str], rows: Iterator[Mapping[str, Any]]) -> int:
    preparer = connection.dialect.identifier_preparer
    columns = [table.c[name] for name in names]
    processors = [c.type.dialect_impl(connection.dialect).bind_processor(connection.dialect) for c in columns]
    statement = f"COPY {preparer.format_table(table)} ({', '.join(preparer.quote(n) for n in names)}) FROM STDIN"
    driver = connection.connection.driver_connection
    if driver is None:  # pragma: no cover - a live connection always has one
        raise RuntimeError("the catalog connection has no driver connection")
    n = 0
    with driver.cursor() as cursor, cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row([p(row[k]) if p else row[k] for k, p in zip(names, processors, strict=True)])
            n += 1
    return n
