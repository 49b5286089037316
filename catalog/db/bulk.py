"""Bulk inserts for the catalog publish: PostgreSQL's COPY, the driver's executemany elsewhere.

A publish writes millions of rows (a JOSIE index of a real lake holds one posting list per distinct
value). As INSERT statements, even batched, PostgreSQL parses, plans and acknowledges each batch;
COPY streams the rows into the table in one command. The rows go through each column type's bind
processing first (the packed integer arrays become bytes), so COPY stores exactly what an INSERT
would. The COPY runs on the session's own connection, inside the publish transaction: a publish
that fails still rolls back as a whole. Other databases (SQLite) get the driver's executemany with
one compiled INSERT, the rows bound the same way.
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
    if _python_defaults(table, first):
        n = 0
        while chunk := list(islice(everything, CHUNK_ROWS)):
            session.execute(insert(model), chunk)
            n += len(chunk)
        return n
    names = [c.name for c in table.columns if c.name in first]  # the compiled INSERT's order
    if len(names) != len(first):
        raise KeyError(f"{table.name} has no column {sorted(set(first) - set(names))}")
    if connection.dialect.name == "postgresql":
        return _copy(connection, table, names, everything)
    return _executemany(connection, table, names, everything)


def _python_defaults(table: Table, row: Mapping[str, Any]) -> bool:
    """Whether a column the rows leave out has a default computed in Python (say a key derived
    from another column), which only an INSERT through SQLAlchemy fills in."""
    return any(c.default is not None for c in table.columns if c.name not in row)


def _bound_rows(
    connection: Connection, table: Table, names: list[str], rows: Iterator[Mapping[str, Any]]
) -> Iterator[list[Any]]:
    """Each row's values in `names` order after the column type's bind processing for this dialect
    (what an INSERT through SQLAlchemy would send)."""
    dialect = connection.dialect
    processors = [table.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names]
    for row in rows:
        yield [p(row[k]) if p else row[k] for k, p in zip(names, processors, strict=True)]


def _executemany(connection: Connection, table: Table, names: list[str], rows: Iterator[Mapping[str, Any]]) -> int:
    """The driver's own executemany with one compiled statement: SQLAlchemy's ORM insert builds
    and processes a parameter dict per row, which on a few million rows is most of the publish."""
    statement = str(insert(table).compile(dialect=connection.dialect, column_keys=names))
    bound = _bound_rows(connection, table, names, rows)
    n = 0
    while chunk := list(islice(bound, CHUNK_ROWS)):
        connection.exec_driver_sql(statement, [tuple(values) for values in chunk])
        n += len(chunk)
    return n


def _copy(connection: Connection, table: Table, names: list[str], rows: Iterator[Mapping[str, Any]]) -> int:
    preparer = connection.dialect.identifier_preparer
    statement = f"COPY {preparer.format_table(table)} ({', '.join(preparer.quote(n) for n in names)}) FROM STDIN"
    driver = connection.connection.driver_connection
    if driver is None:  # pragma: no cover - a live connection always has one
        raise RuntimeError("the catalog connection has no driver connection")
    n = 0
    with driver.cursor() as cursor, cursor.copy(statement) as copy:
        for values in _bound_rows(connection, table, names, rows):
            copy.write_row(values)
            n += 1
    return n
