"""The catalog schema on real SQLite and the real PostgreSQL server: the same suite on both."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from alembic import command
from sqlalchemy import Column, Integer, MetaData, Table, insert, inspect, select
from sqlalchemy.exc import IntegrityError

from catalog import lookup
from catalog.core.errors import UnknownIdError
from catalog.db.engine import (
    alembic_config,
    current_revisions,
    expected_heads,
    head_revisions,
    open_catalog,
    session_scope,
)
from catalog.db.models import CatalogColumn, CatalogTable, ColumnProfile, PackedInt32Array, PackedInt64Array, TableKey
from catalog.db.models.base import pack_int32_list_array, pack_int32_lists, text_key

NOW = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)


def add_table(session, table_id: str, headers: list[str]) -> None:  # type: ignore[no-untyped-def]
    session.add(
        CatalogTable(
            table_id=table_id, name=table_id.rsplit("/", 1)[-1], n_rows=3, n_columns=len(headers), published_at=NOW
        )
    )
    for pos, h in enumerate(headers, start=1):
        session.add(CatalogColumn(column_id=f"{table_id}#{h}", table_id=table_id, position=pos, header=h))


def test_schema_is_created_at_head_on_first_use(catalog_url: str) -> None:
    engine = open_catalog(catalog_url)
    assert current_revisions(engine) == head_revisions() == expected_heads()
    tables = set(inspect(engine).get_table_names())
    assert {"sources", "tables", "columns", "column_profiles", "keys", "publish_runs"} <= tables


def test_migrations_downgrade_and_upgrade_again(catalog_url: str) -> None:
    engine = open_catalog(catalog_url)
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "base")
    assert "tables" not in inspect(engine).get_table_names()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
    assert "tables" in inspect(engine).get_table_names()


def test_lookup_table_and_columns(catalog_engine) -> None:  # type: ignore[no-untyped-def]
    with session_scope(catalog_engine) as s:
        add_table(s, "file:lake/b.csv", ["id", "name"])
        add_table(s, "file:lake/a.csv", ["x"])
    with session_scope(catalog_engine) as s:
        info = lookup.table(s, "file:lake/b.csv")
        assert (info.table_id, info.n_columns, info.n_rows) == ("file:lake/b.csv", 2, 3)
        cols = lookup.columns(s, "file:lake/b.csv")
        assert [(c.position, c.column, c.column_id) for c in cols] == [
            (1, "id", "file:lake/b.csv#id"),
            (2, "name", "file:lake/b.csv#name"),
        ]
        assert [t.table_id for t in lookup.tables(s)] == ["file:lake/a.csv", "file:lake/b.csv"]
        with pytest.raises(UnknownIdError):
            lookup.table(s, "file:missing.csv")
        with pytest.raises(UnknownIdError):
            lookup.columns(s, "file:missing.csv")


def test_deleting_a_table_cascades_to_columns_profiles_and_keys(catalog_engine) -> None:  # type: ignore[no-untyped-def]
    with session_scope(catalog_engine) as s:
        add_table(s, "file:t.csv", ["id"])
        s.flush()
        s.add(
            ColumnProfile(
                column_id="file:t.csv#id",
                row_count=3,
                null_count=0,
                empty_count=0,
                distinct_count=3,
                distinct_exact=True,
                inferred_type="integer",
                type_share=1.0,
                top_values=[],
                histogram=None,
                uniqueness=1.0,
                token_count=3,
            )
        )
        s.add(TableKey(table_id="file:t.csv", columns=["id"], exact=True, uniqueness=1.0, score=1.0))
    with session_scope(catalog_engine) as s:
        s.delete(s.get(CatalogTable, text_key("file:t.csv")))
    with session_scope(catalog_engine) as s:
        assert s.scalars(select(CatalogColumn)).all() == []
        assert s.scalars(select(ColumnProfile)).all() == []
        assert s.scalars(select(TableKey)).all() == []


def test_foreign_keys_are_enforced(catalog_engine) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(IntegrityError), session_scope(catalog_engine) as s:
        s.add(CatalogColumn(column_id="file:none.csv#a", table_id="file:none.csv", position=1, header="a"))


def test_packed_arrays_round_trip_on_both_databases(catalog_engine) -> None:  # type: ignore[no-untyped-def]
    meta = MetaData()
    arrays = Table(
        "packed_probe",
        meta,
        Column("id", Integer, primary_key=True),
        Column("a32", PackedInt32Array),
        Column("a64", PackedInt64Array),
    )
    meta.create_all(catalog_engine)
    big = np.array([0, -1, 2**40, -(2**62)], dtype=np.int64)
    with catalog_engine.begin() as conn:
        conn.execute(
            insert(arrays),
            [
                {"id": 1, "a32": [3, 1, 2**31 - 1, -5], "a64": big},
                {"id": 2, "a32": np.array([], dtype=np.int32), "a64": None},
                # already packed (what the bulk publishers pass): stored as given
                {
                    "id": 4,
                    "a32": next(pack_int32_lists(np.array([0, 2]), [7, -8])),
                    "a64": np.array([9], "<i8").tobytes(),
                },
            ],
        )
    with catalog_engine.connect() as conn:
        rows = {r.id: r for r in conn.execute(select(arrays))}
    assert rows[1].a32.tolist() == [3, 1, 2**31 - 1, -5]
    assert rows[1].a64.tolist() == big.tolist()
    assert rows[2].a32.tolist() == [] and rows[2].a64 is None
    assert rows[4].a32.tolist() == [7, -8] and rows[4].a64.tolist() == [9]
    with pytest.raises(Exception, match="out of range"), catalog_engine.begin() as conn:
        conn.execute(insert(arrays), [{"id": 3, "a32": [2**31]}])
    with pytest.raises(ValueError, match="out of range"):
        list(pack_int32_lists(np.array([0, 1, 1]), np.array([2**31])))
    with pytest.raises(Exception, match="whole number"), catalog_engine.begin() as conn:
        conn.execute(insert(arrays), [{"id": 5, "a64": b"\x00" * 12}])


def test_sqlite_catalog_runs_in_wal_mode(tmp_path) -> None:  # type: ignore[no-untyped-def]
    engine = open_catalog(f"sqlite:///{tmp_path / 'c.db'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_head_constants_match_alembic() -> None:
    """`HEAD` and the families' `migration_head` spare a lookup from parsing every script."""
    assert head_revisions() == expected_heads()


def test_a_sliced_list_array_packs_only_its_own_lists() -> None:
    lists = pa.array([[1, 2], [], [3], [2**31 - 1, -4, 5], [6]], pa.list_(pa.int32()))
    whole = list(pack_int32_list_array(lists))
    assert [np.frombuffer(b, "<i4").tolist() for b in whole] == lists.to_pylist()
    for start, length in [(0, 5), (1, 3), (3, 2), (2, 0)]:
        assert list(pack_int32_list_array(lists.slice(start, length))) == whole[start : start + length]
    batches = pa.table({"x": lists}).to_batches(max_chunksize=2)
    assert [b for batch in batches for b in pack_int32_list_array(batch.column("x"))] == whole
