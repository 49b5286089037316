"""Precompiled SELECTs on the driver's cursor (`catalog.db.prepared`), on SQLite and PostgreSQL:
the same rows as SQLAlchemy's execution, never another statement's SQL, and no cursor that
outlives its connection."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Column, Engine, Integer, MetaData, String, Table, bindparam, insert, select

from catalog.db.engine import make_engine
from catalog.db.prepared import DriverCursor, PreparedSelect, driver_rows

METADATA = MetaData()
PAIRS = Table(
    "prepared_test_pairs",
    METADATA,
    Column("k", Integer, primary_key=True),
    Column("a", Integer),
    Column("b", Integer),
    Column("label", String(20)),
)
ROWS = [{"k": k, "a": k * 10, "b": k * 100, "label": f"row {k}"} for k in range(1, 8)]


def _fill(engine: Engine) -> None:
    METADATA.create_all(engine)
    with engine.begin() as conn:
        conn.execute(insert(PAIRS), ROWS)


@pytest.fixture
def pairs(catalog_engine: Engine) -> Iterator[Engine]:
    _fill(catalog_engine)
    yield catalog_engine
    METADATA.drop_all(catalog_engine)


def test_statements_built_on_the_fly_never_run_each_others_sql(pairs: Engine) -> None:
    """Statements made, run and dropped one after another often land at the same address, so they
    share an `id()`: a cache keyed by it ran the previous statement's SQL for the next one."""
    seen: dict[int, str] = {}
    reused = 0
    with pairs.connect() as conn:
        for i in range(2000):  # until the hazard has occurred a few times (addresses are reused often, not always)
            if i >= 60 and reused >= 3:
                break
            column = (PAIRS.c.a, PAIRS.c.b)[i % 2]
            statement = select(column).where(PAIRS.c.k == bindparam("k"))
            reused += seen.get(id(statement), column.name) != column.name
            seen[id(statement)] = column.name
            assert driver_rows(conn, PreparedSelect(statement), {"k": 3}) == [(30 if column.name == "a" else 300,)]
            cursor = DriverCursor(conn)
            assert cursor.bind(PreparedSelect(statement)).all({"k": 2}) == [(20 if column.name == "a" else 200,)]
            del statement, cursor
            # the statement was made this iteration: the young generations hold it (a full
            # collection costs 30 ms late in a test session, 2,000 times)
            gc.collect(1)
    assert reused >= 3  # the hazard did occur in this run: different statements shared an id


def test_driver_reads_equal_sqlalchemys(pairs: Engine) -> None:
    """Named parameters, a value bound in the statement itself, the IN-list shape read in blocks,
    a LIMIT parameter: the driver's rows equal SQLAlchemy's."""
    by_label = PreparedSelect(
        select(PAIRS.c.k, PAIRS.c.label)
        .where(PAIRS.c.label != "row 5", PAIRS.c.a >= bindparam("low"))
        .order_by(PAIRS.c.k)
        .limit(bindparam("n"))
    )
    in_list = PreparedSelect(
        select(PAIRS.c.k, PAIRS.c.b).where(PAIRS.c.k.in_([bindparam(f"p{i}") for i in range(4)])).order_by(PAIRS.c.k)
    )
    with pairs.connect() as conn:
        params = {"low": 30, "n": 3}
        expected = [tuple(r) for r in conn.execute(by_label.statement, params)]
        assert expected == [(3, "row 3"), (4, "row 4"), (6, "row 6")]
        named = driver_rows(conn, by_label, params)
        assert named == expected and [r.label for r in named] == ["row 3", "row 4", "row 6"]
        cursor = DriverCursor(conn)
        assert [tuple(r) for r in cursor.bind(by_label).all(params)] == expected
        assert tuple(cursor.bind(by_label).first(low=60, n=1)) == (6, "row 6")
        assert [tuple(r) for r in cursor.bind(in_list).all_in([7, 2, 99, 4])] == [(2, 200), (4, 400), (7, 700)]


def test_one_statement_on_both_databases_and_two_connections(pairs: Engine, tmp_path: Path) -> None:
    """A statement keeps one compiled form per dialect (SQLite binds by position, psycopg by name),
    and each connection reads through a cursor of its own."""
    other = make_engine(f"sqlite:///{tmp_path / 'other.db'}")
    _fill(other)
    with other.begin() as conn:
        conn.execute(PAIRS.update().where(PAIRS.c.k == 1).values(a=-1))
    statement = PreparedSelect(select(PAIRS.c.a).where(PAIRS.c.k == bindparam("k")))
    with pairs.connect() as a, pairs.connect() as b, other.connect() as c:
        ca, cb, cc = DriverCursor(a), DriverCursor(b), DriverCursor(c)
        for _round in range(2):
            assert ca.bind(statement).first(k=1) == (10,)
            assert cc.bind(statement).first(k=1) == (-1,)
            assert cb.bind(statement).first(k=2) == (20,)
            assert driver_rows(c, statement, {"k": 1}) == [(-1,)]
        assert ca._cursor is not cb._cursor
    assert len({statement.form(e.dialect).sql for e in (pairs, other)}) == (2 if pairs.dialect.name != "sqlite" else 1)
    other.dispose()


def test_a_replaced_connection_gets_a_new_cursor(pairs: Engine) -> None:
    """After SQLAlchemy invalidates a connection (a server restart, say) and reconnects, the reads
    go through a cursor of the new driver connection, not the dead one."""
    statement = PreparedSelect(select(PAIRS.c.b).where(PAIRS.c.k == bindparam("k")))
    with pairs.connect() as conn:
        bound = DriverCursor(conn).bind(statement)
        assert bound.first(k=4) == (400,)
        conn.invalidate()  # closes the driver's connection
        conn.rollback()
        assert bound.first(k=5) == (500,)
