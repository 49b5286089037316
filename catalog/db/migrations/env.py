"""Alembic environment: migrations run against the connection handed over by `catalog.db.engine`, or the
URL in the config (for `alembic` on the command line)."""

from __future__ import annotations

from functools import partial

from alembic import context
from sqlalchemy import engine_from_config, pool

from catalog.db.models import Base
from catalog.db.models.base import in_this_schema
from catalog.search.family import search_families

search_families()  # loading each index family imports its models, which registers its tables in Base.metadata

config = context.config
target_metadata = Base.metadata


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_object=partial(in_this_schema, dialect=connection.dialect.name),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = engine_from_config(
        config.get_section(config.config_ini_section, {}), prefix="sqlalchemy.", poolclass=pool.NullPool
    )
    with engine.connect() as conn:
        _run(conn)


if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
