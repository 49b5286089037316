"""Crawl-derived text has no length limit in the catalog, on SQLite and PostgreSQL alike.

PostgreSQL refuses a B-tree entry over ~2,700 bytes and truncates nothing silently but rejects
VARCHAR(n) overflows, while SQLite accepts both; so each test stores what PostgreSQL used to refuse
(10 KB incompressible ids and headers, a 3,000-character token, a 200-character portal stamp) and
reads it back through the same lookups the API uses.
"""

from __future__ import annotations

import datetime as dt
import random
from functools import partial

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, delete, func, insert, select, text

from catalog import lookup
from catalog.db.engine import alembic_config, make_engine, open_catalog, session_scope
from catalog.db.models import Base, CatalogColumn, CatalogTable, ColumnProfile, JoinableColumn, TableKey
from catalog.db.models.base import in_this_schema, text_key, text_key_sql
from catalog.search.josie import models as josie_models
from catalog.search.josie.reader import DbIndexReader, clear_dictionary_cache

NOW = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)


def noise(n: int, seed: int) -> str:
    """n characters no compressor can shrink (PostgreSQL compresses index entries before the limit)."""
    rnd = random.Random(seed)
    return "".join(
        chr(rnd.choice([rnd.randrange(0x21, 0x7F), rnd.randrange(0x400, 0x4FF), rnd.randrange(0x4E00, 0x9FFF)]))
        for _ in range(n)
    )


def test_upgraded_schema_equals_the_models(catalog_engine: Engine) -> None:
    assert josie_models.JosieToken.__table__ is not None  # the JOSIE tables are in Base.metadata
    with catalog_engine.connect() as conn:
        include = partial(in_this_schema, dialect=conn.dialect.name)
        context = MigrationContext.configure(conn, opts={"compare_type": True, "include_object": include})
        diff = compare_metadata(context, Base.metadata)
    assert diff == []


def test_long_ids_headers_and_stamps_round_trip_and_cascade(catalog_engine: Engine) -> None:
    table_id = "ckan:portal.example:" + noise(10_000, 1)
    header = noise(10_000, 2)
    stamp = "2026-11-24T12:00:00.123456+00:00 (metadata_modified, revision " + "7" * 120 + ")"
    with session_scope(catalog_engine) as s:
        s.add(
            CatalogTable(
                table_id=table_id,
                name=noise(5000, 3),
                title=noise(5000, 4),
                n_rows=1,
                n_columns=2,
                source_name="src:" + noise(3000, 5),
                format="x" * 100,
                source_updated_at=stamp,
                batch_id="b" * 100,
                published_at=NOW,
            )
        )
        s.add(
            CatalogColumn(
                column_id=f"{table_id}#{header}", table_id=table_id, position=1, header=header, portal_type="t" * 500
            )
        )
        s.add(CatalogColumn(column_id=f"{table_id}#id", table_id=table_id, position=2, header="id"))
        s.flush()
        s.add(
            ColumnProfile(
                column_id=f"{table_id}#{header}",
                row_count=1,
                null_count=0,
                empty_count=0,
                distinct_count=1,
                distinct_exact=True,
                inferred_type="text",
                type_share=1.0,
                portal_type="t" * 500,
                min_value=noise(70_000, 6),
                top_values=[],
                histogram=None,
                uniqueness=1.0,
                token_count=1,
            )
        )
        s.add(TableKey(table_id=table_id, columns=[header], exact=True, uniqueness=1.0, score=1.0))
        s.execute(
            insert(JoinableColumn),
            [
                {
                    "column_id": f"{table_id}#{header}",
                    "rank": 1,
                    "table_id": table_id,
                    "candidate_column_id": f"{table_id}#id",
                    "candidate_table_id": table_id,
                    "candidate_header": "id",
                    "overlap": 1,
                    "size": 1,
                    "candidate_size": 1,
                    "containment": 1.0,
                    "candidate_containment": 1.0,
                    "jaccard": 1.0,
                    "est_join_size": 1.0,
                    "is_key": True,
                    "candidate_is_key": True,
                    "direction": "one-to-one",
                    "exact": True,
                    "method": "exact",
                    "index_version": 1,
                }
            ],
        )
    with catalog_engine.connect() as conn:
        info = lookup.table(conn, table_id)
        assert info.table_id == table_id and info.source_updated_at == stamp
        assert [c.column for c in lookup.columns(conn, table_id)] == [header, "id"]
        assert lookup.profile(conn, f"{table_id}#{header}").column == header
        assert lookup.keys(conn, table_id)[0].columns == [header]
        assert [j.column_id for j in lookup.joinable(conn, f"{table_id}#{header}")] == [f"{table_id}#id"]
        assert [t.table_id for t in lookup.tables(conn, source="src:" + noise(3000, 5))] == [table_id]
    with session_scope(catalog_engine) as s:
        s.execute(delete(CatalogTable).where(CatalogTable.table_id == table_id))
    with catalog_engine.connect() as conn:
        for model in (CatalogColumn, ColumnProfile, TableKey, JoinableColumn):
            assert conn.scalar(select(func.count()).select_from(model)) == 0


def test_long_tokens_are_found_exactly_even_when_digests_collide(catalog_engine: Engine) -> None:
    tokens = [noise(3000, 10 + i) for i in range(3)] + ["short"]
    token_table = josie_models.JosieToken.__table__
    with catalog_engine.begin() as conn:
        conn.execute(
            insert(token_table),
            [{"token": t, "token_id": i, "frequency": 1, "group_id": i} for i, t in enumerate(tokens)],
        )
        # a stored token that shares the digest of tokens[0] but is another string: never a match
        conn.execute(
            insert(token_table),
            [
                {
                    "token": tokens[0] + "x",
                    "token_key": text_key(tokens[0]),
                    "token_id": 9,
                    "frequency": 1,
                    "group_id": 9,
                }
            ],
        )
        conn.execute(insert(josie_models.JosieMeta.__table__), [{"key": "index_version", "value": "1"}])
    for cached in (False, True):
        clear_dictionary_cache()
        with catalog_engine.connect() as conn:
            reader = DbIndexReader(conn, cache_dictionary=cached)
            found = reader.lookup_tokens([tokens[0], tokens[2], "absent", tokens[1][:-1]])
            assert [q.token_id for q in found] == [0, 2]
            ids, _, _ = reader.lookup_arrays([tokens[1], "short", tokens[0]])
            assert ids.tolist() == [0, 1, 3]


def test_python_and_postgresql_digests_agree(pg_database: str) -> None:
    """The migration keys existing rows in SQL on PostgreSQL (SQLite calls `text_key` itself); new
    rows are keyed in Python: both must be the same function."""
    engine = make_engine(pg_database)
    values = ["", "a", "é\u05d0\U0001f600", noise(3000, 20)]
    with engine.connect() as conn:
        got = [conn.scalar(text(f"SELECT {text_key_sql('CAST(:v AS text)')}"), {"v": v}) for v in values]
    engine.dispose()
    assert got == [text_key(v) for v in values]


def test_upgrade_from_0005_keeps_rows_and_keys_them(catalog_url: str) -> None:
    engine = make_engine(catalog_url)
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0005_relations")
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO tables (table_id, name, n_rows, n_columns, index_version, published_at) "
                "VALUES ('file:é.csv', 'é', 1, 1, 1, :now)"
            ),
            {"now": NOW},
        )
        conn.execute(
            text(
                "INSERT INTO columns (column_id, table_id, position, header) "
                "VALUES ('file:é.csv#ü', 'file:é.csv', 1, 'ü')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO keys (table_id, columns, exact, uniqueness, score) "
                "VALUES ('file:é.csv', '[\"ü\"]', true, 1.0, 1.0)"
            )
        )
        conn.execute(text("INSERT INTO josie_tokens (token, token_id, frequency, group_id) VALUES ('ü', 0, 1, 0)"))
        conn.execute(text("INSERT INTO josie_meta (key, value) VALUES ('index_version', '1')"))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
    with engine.connect() as conn:
        assert conn.execute(select(CatalogTable.table_key, CatalogTable.table_id)).all() == [
            (text_key("file:é.csv"), "file:é.csv")
        ]
        assert conn.execute(select(CatalogColumn.column_key, CatalogColumn.table_key)).all() == [
            (text_key("file:é.csv#ü"), text_key("file:é.csv"))
        ]
        assert [c.column for c in lookup.columns(conn, "file:é.csv")] == ["ü"]
        assert lookup.keys(conn, "file:é.csv")[0].columns == ["ü"]
        assert [q.token_id for q in DbIndexReader(conn).lookup_tokens(["ü"])] == [0]
    with session_scope(engine) as s:  # a key row inserted after the copy gets a fresh id
        s.add(TableKey(table_id="file:é.csv", columns=["ü", "ü"], exact=False, uniqueness=0.5, score=0.5))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0005_relations")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT column_id FROM columns")).scalars().all() == ["file:é.csv#ü"]
        assert conn.execute(text("SELECT count(*) FROM keys")).scalar() == 2
    engine.dispose()
    open_catalog(catalog_url).dispose()  # and up again to head
