"""Precompiled SELECTs run on the driver's cursor: the one way hot catalog reads skip SQLAlchemy's
per-execution work.

A lookup or a JOSIE posting-list read is one indexed row or a few; SQLAlchemy's execution context
around it (result set-up, the cursor's description, row processing) costs more than the read itself.
A `PreparedSelect` compiles its statement once per dialect and keeps each compiled form on itself,
so the cache lives exactly as long as the statement it belongs to. Nothing is looked up by object
identity: an `id()` is reused by the next object allocated at the same address, so a cache keyed by
`id(statement)` hands a statement built on the fly the SQL of one that has since been collected.

The driver receives the compiled SQL text, and its own per-connection caches key by that text:
psycopg's server-side prepared statements (`prepare=True`) and sqlite3's statement cache. A
`DriverCursor` holds one cursor of one `Connection` and opens a new one when SQLAlchemy has
replaced the connection underneath (after an invalidation), so a cursor never outlives its
connection.

Parameters reach the driver as given, without SQLAlchemy's bind processing, and rows come back as
the driver makes them. Use it for statements whose parameters and columns are plain values on
that driver; the statements' tests compare both ways.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from sqlalchemy import Connection, Select, select
from sqlalchemy.engine import Dialect


class DriverForm(NamedTuple):
    """A statement compiled for one dialect: the SQL text and how to order its parameters."""

    sql: str
    order: tuple[str, ...] | None  # positional paramstyles (SQLite's qmark): parameter names in order
    fixed: dict[str, Any]  # values bound in the statement itself, merged under the caller's
    in_order: bool  # positional, with exactly the parameters p0 … pN in that order (`all_in`)
    row: Any  # a namedtuple type of the selected columns' names

    def args(self, params: Mapping[str, Any]) -> Any:
        """The driver's parameters: a tuple for a positional paramstyle, else a dict."""
        values = {**self.fixed, **params} if self.fixed else params
        if self.order is None:
            return values
        return tuple(values[name] for name in self.order)


class PreparedSelect:
    """A `select()` compiled once per dialect (the form lives on this object; see the module)."""

    def __init__(self, statement: Select[Any]) -> None:
        self.statement = statement
        self._forms: dict[tuple[str, str, str], DriverForm] = {}

    def form(self, dialect: Dialect) -> DriverForm:
        key = (dialect.name, dialect.driver, dialect.paramstyle)
        form = self._forms.get(key)
        if form is None:  # two threads may both compile it: the results are equal
            form = self._forms[key] = _compile(self.statement, dialect)
        return form


def _compile(statement: Select[Any], dialect: Dialect) -> DriverForm:
    compiled = statement.compile(dialect=dialect)
    if compiled.post_compile_params or compiled.literal_execute_params:
        raise ValueError("a statement with expanding or literal-execute parameters needs SQLAlchemy's execution")
    order = tuple(compiled.positiontup or ()) if compiled.positional else None
    fixed = {name: bind.effective_value for bind, name in compiled.bind_names.items() if not bind.required}
    in_order = order is not None and not fixed and order == tuple(f"p{i}" for i in range(len(order)))
    row = collections.namedtuple("Row", list(statement.selected_columns.keys()), rename=True)  # type: ignore[misc]
    return DriverForm(str(compiled), order, fixed, in_order, row)


def _execute(cursor: Any, driver: str, sql: str, args: Any) -> Any:
    if driver == "psycopg":  # prepared on the server once per connection (psycopg keys it by text)
        return cursor.execute(sql, args, prepare=True)
    return cursor.execute(sql, args)


def driver_rows(connection: Connection, prepared: PreparedSelect, params: Mapping[str, Any]) -> list[Any]:
    """The statement's rows as namedtuples of its column names, read on a cursor of its own; the
    driver's errors propagate as the driver raises them. The connection's transaction state is the
    caller's business (the API's reader connections are in autocommit)."""
    form = prepared.form(connection.dialect)
    cursor: Any = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        _execute(cursor, connection.dialect.driver, form.sql, form.args(params))
        return list(map(form.row._make, cursor.fetchall()))
    finally:
        cursor.close()


class DriverCursor:
    """One connection's driver cursor, reused by every `PreparedSelect` run through it: for loops of
    many small reads (a JOSIE search reads hundreds of posting lists). Rows are the driver's tuples."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._driver = connection.dialect.driver
        self._dbapi: Any = None
        self._cursor: Any = None

    def execute(self, sql: str, args: Any) -> Any:
        """Run a `DriverForm`'s SQL with `args` in the driver's shape (`DriverForm.args`); the cursor
        to fetch from."""
        dbapi = self.connection.connection.dbapi_connection
        if dbapi is not self._dbapi:  # first use, or SQLAlchemy replaced the driver's connection
            if not self.connection.in_transaction():
                self.connection.execute(select(1))  # begin the transaction the SQLAlchemy way
                dbapi = self.connection.connection.dbapi_connection
            self._dbapi, self._cursor = dbapi, dbapi.cursor()  # type: ignore[union-attr]
        return _execute(self._cursor, self._driver, sql, args)

    def bind(self, prepared: PreparedSelect) -> BoundSelect:
        return BoundSelect(self, prepared)


class BoundSelect:
    """A `PreparedSelect` run through one `DriverCursor`."""

    def __init__(self, cursor: DriverCursor, prepared: PreparedSelect) -> None:
        self.cursor = cursor
        self.prepared = prepared
        self.form = prepared.form(cursor.connection.dialect)

    def first(self, **params: Any) -> Any:
        return self.cursor.execute(self.form.sql, self.form.args(params)).fetchone()

    def all(self, params: Mapping[str, Any]) -> list[Any]:
        return self.cursor.execute(self.form.sql, self.form.args(params)).fetchall()

    def all_in(self, values: Sequence[Any]) -> list[Any]:
        """`all` for a statement whose parameters are p0 … pN, given in order: passed straight
        through when the driver binds them by position in that order (SQLite), skipping a dict of N
        entries."""
        if self.form.in_order:
            return self.cursor.execute(self.form.sql, tuple(values)).fetchall()
        return self.all({f"p{i}": v for i, v in enumerate(values)})
