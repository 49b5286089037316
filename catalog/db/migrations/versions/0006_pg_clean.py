"""PostgreSQL-safe text: crawl-derived text unbounded, keys are fixed-size digests of it

Every column that holds text from the crawl (ids, headers, titles, portal stamps and types, batch
ids, tokens) becomes TEXT, so PostgreSQL neither truncates nor refuses what SQLite stores. A
PostgreSQL B-tree entry cannot exceed about 2,700 bytes, so the primary and foreign keys that were
ids become their digests (`table_key`, `column_key`: the first 128 bits of SHA-256 of the id's
UTF-8 bytes as hex), the token dictionary is keyed by `token_key` (not unique: equal digests are
told apart by comparing the token), and the id lookup indexes become hash indexes on PostgreSQL.

Rows are kept: each changed table is copied into a temporary table together with its new keys
(computed in SQL: `sha256` on PostgreSQL, a registered function on SQLite), the old tables are
dropped children first (so no ON DELETE CASCADE fires on copied rows), the new ones created and
filled from the copies.

Revision ID: 0006_pg_clean
Revises: 0005_relations
Create Date: 2026-11-24
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_pg_clean"
down_revision: str | Sequence[str] | None = "0005_relations"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEY = sa.String(length=32)
_SQLITE_KEY_FUNCTION = "juncture_text_key_0006"

# Parents before children (creation order); dropped in the reverse order.
_TABLES = (
    "sources",
    "publish_runs",
    "tables",
    "columns",
    "column_profiles",
    "keys",
    "joinable",
    "unionable",
    "josie_tokens",
)
# The digest columns each table gains, and the id each is computed from.
_KEYS: dict[str, dict[str, str]] = {
    "tables": {"table_key": "table_id"},
    "columns": {"column_key": "column_id", "table_key": "table_id"},
    "column_profiles": {"column_key": "column_id"},
    "keys": {"table_key": "table_id"},
    "joinable": {"column_key": "column_id"},
    "unionable": {"table_key": "table_id"},
    "josie_tokens": {"token_key": "token"},
}


def _text_key(value: str | None) -> str | None:
    """The models' `text_key`, pinned here as this migration computed it."""
    if value is None:
        return None
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _key_sql() -> Callable[[str], str]:
    """A function column -> SQL expression of its digest on the migration's database."""
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        return lambda column: f"substr(encode(sha256(convert_to({column}, 'UTF8')), 'hex'), 1, 32)"
    dbapi = bind.connection.driver_connection
    dbapi.create_function(_SQLITE_KEY_FUNCTION, 1, _text_key, deterministic=True)
    return lambda column: f"{_SQLITE_KEY_FUNCTION}({column})"


def _copy_out(name: str, extra: dict[str, str]) -> None:
    """`_m_<name>`: the rows of `name` with the `extra` columns (name -> SQL expression) added."""
    added = "".join(f", {expr} AS {col}" for col, expr in extra.items())
    op.execute(f"CREATE TEMPORARY TABLE _m_{name} AS SELECT *{added} FROM {name}")


def _copy_in(name: str) -> None:
    """Fill the new `name` from `_m_<name>` (the columns they share), then drop the copy."""
    bind = op.get_bind()
    columns = [c["name"] for c in sa.inspect(bind).get_columns(name)]
    listed = ", ".join(f'"{c}"' for c in columns)
    op.execute(f"INSERT INTO {name} ({listed}) SELECT {listed} FROM _m_{name}")
    op.execute(f"DROP TABLE _m_{name}")
    if name == "keys" and bind.dialect.name == "postgresql":  # the serial id continues after the copied ids
        op.execute("SELECT setval(pg_get_serial_sequence('keys', 'id'), COALESCE(MAX(id), 0) + 1, false) FROM keys")


def _rebuild(create: Callable[[], None], extra: dict[str, dict[str, str]], josie_sets: Callable[[], None]) -> None:
    for name in _TABLES:
        _copy_out(name, extra.get(name, {}))
    for name in reversed(_TABLES):
        op.drop_table(name)
    create()
    for name in _TABLES:
        _copy_in(name)
    josie_sets()


def upgrade() -> None:
    key = _key_sql()
    extra = {name: {col: key(source) for col, source in keys.items()} for name, keys in _KEYS.items()}
    _rebuild(_create_new, extra, _josie_sets_hash_indexes)


def downgrade() -> None:
    _rebuild(_create_old, {}, _josie_sets_btree_indexes)


def _hash_index(name: str, table: str, column: str) -> None:
    op.create_index(name, table, [column], unique=False, postgresql_using="hash")


def _josie_sets_hash_indexes() -> None:
    op.drop_index("ix_josie_sets_column_id", table_name="josie_sets")
    op.drop_index("ix_josie_sets_table_id", table_name="josie_sets")
    _hash_index("ix_josie_sets_column_id", "josie_sets", "column_id")
    _hash_index("ix_josie_sets_table_id", "josie_sets", "table_id")


def _josie_sets_btree_indexes() -> None:
    op.drop_index("ix_josie_sets_column_id", table_name="josie_sets")
    op.drop_index("ix_josie_sets_table_id", table_name="josie_sets")
    op.create_index("ix_josie_sets_column_id", "josie_sets", ["column_id"], unique=True)
    op.create_index("ix_josie_sets_table_id", "josie_sets", ["table_id"], unique=False)


def _create_new() -> None:
    op.create_table(
        "sources",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("location", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_sources"),
    )
    op.create_table(
        "publish_runs",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("batch_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column("index_version", sa.Integer(), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", name="pk_publish_runs"),
    )
    op.create_index("ix_publish_runs_batch_id", "publish_runs", ["batch_id"], unique=False)
    op.create_table(
        "tables",
        sa.Column("table_key", KEY, nullable=False),
        sa.Column("table_id", sa.Text(), nullable=False),
        sa.Column("source_name", sa.Text(), nullable=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("format", sa.Text(), nullable=True),
        sa.Column("n_rows", sa.Integer(), nullable=False),
        sa.Column("n_columns", sa.Integer(), nullable=False),
        sa.Column("content_sha256", sa.String(length=64), nullable=True),
        sa.Column("source_updated_at", sa.Text(), nullable=True),
        sa.Column("keys_search_complete", sa.Boolean(), nullable=True),
        sa.Column("batch_id", sa.Text(), nullable=True),
        sa.Column("index_version", sa.Integer(), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("table_key", name="pk_tables"),
    )
    _hash_index("ix_tables_table_id", "tables", "table_id")
    _hash_index("ix_tables_source_name", "tables", "source_name")
    op.create_table(
        "columns",
        sa.Column("column_key", KEY, nullable=False),
        sa.Column("column_id", sa.Text(), nullable=False),
        sa.Column("table_key", KEY, nullable=False),
        sa.Column("table_id", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("header", sa.Text(), nullable=False),
        sa.Column("portal_type", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["table_key"], ["tables.table_key"], name="fk_columns_table_key_tables", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("column_key", name="pk_columns"),
    )
    op.create_index("ix_columns_table_key_position", "columns", ["table_key", "position"], unique=False)
    _hash_index("ix_columns_column_id", "columns", "column_id")
    _hash_index("ix_columns_table_id", "columns", "table_id")
    op.create_table(
        "column_profiles",
        sa.Column("column_key", KEY, nullable=False),
        sa.Column("column_id", sa.Text(), nullable=False),
        sa.Column("row_count", sa.Integer(), nullable=False),
        sa.Column("null_count", sa.Integer(), nullable=False),
        sa.Column("empty_count", sa.Integer(), nullable=False),
        sa.Column("distinct_count", sa.Integer(), nullable=False),
        sa.Column("distinct_exact", sa.Boolean(), nullable=False),
        sa.Column("distinct_error", sa.Float(), nullable=True),
        sa.Column("inferred_type", sa.String(length=32), nullable=False),
        sa.Column("type_share", sa.Float(), nullable=False),
        sa.Column("portal_type", sa.Text(), nullable=True),
        sa.Column("min_value", sa.Text(), nullable=True),
        sa.Column("max_value", sa.Text(), nullable=True),
        sa.Column("length_min", sa.Integer(), nullable=True),
        sa.Column("length_mean", sa.Float(), nullable=True),
        sa.Column("length_max", sa.Integer(), nullable=True),
        sa.Column("top_values", sa.JSON(), nullable=False),
        sa.Column("histogram", sa.JSON(), nullable=False),
        sa.Column("uniqueness", sa.Float(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("batch_id", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["column_key"], ["columns.column_key"], name="fk_column_profiles_column_key_columns", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("column_key", name="pk_column_profiles"),
    )
    op.create_table(
        "keys",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("table_key", KEY, nullable=False),
        sa.Column("table_id", sa.Text(), nullable=False),
        sa.Column("columns", sa.JSON(), nullable=False),
        sa.Column("exact", sa.Boolean(), nullable=False),
        sa.Column("uniqueness", sa.Float(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("batch_id", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["table_key"], ["tables.table_key"], name="fk_keys_table_key_tables", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_keys"),
    )
    op.create_index("ix_keys_table_key", "keys", ["table_key"], unique=False)
    _hash_index("ix_keys_table_id", "keys", "table_id")
    op.create_table(
        "joinable",
        sa.Column("column_key", KEY, nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("column_id", sa.Text(), nullable=False),
        sa.Column("table_id", sa.Text(), nullable=False),
        sa.Column("candidate_column_id", sa.Text(), nullable=False),
        sa.Column("candidate_table_id", sa.Text(), nullable=False),
        sa.Column("candidate_header", sa.Text(), nullable=False),
        sa.Column("overlap", sa.BigInteger(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("candidate_size", sa.BigInteger(), nullable=False),
        sa.Column("containment", sa.Float(), nullable=False),
        sa.Column("candidate_containment", sa.Float(), nullable=False),
        sa.Column("jaccard", sa.Float(), nullable=False),
        sa.Column("est_join_size", sa.Float(), nullable=False),
        sa.Column("is_key", sa.Boolean(), nullable=False),
        sa.Column("candidate_is_key", sa.Boolean(), nullable=False),
        sa.Column("direction", sa.String(length=16), nullable=False),
        sa.Column("exact", sa.Boolean(), nullable=False),
        sa.Column("method", sa.String(length=32), nullable=False),
        sa.Column("index_version", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["column_key"], ["columns.column_key"], name="fk_joinable_column_key_columns", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("column_key", "rank", name="pk_joinable"),
    )
    _hash_index("ix_joinable_column_id", "joinable", "column_id")
    _hash_index("ix_joinable_candidate_table_id", "joinable", "candidate_table_id")
    op.create_table(
        "unionable",
        sa.Column("table_key", KEY, nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("table_id", sa.Text(), nullable=False),
        sa.Column("candidate_table_id", sa.Text(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("n_aligned", sa.Integer(), nullable=False),
        sa.Column("alignment", sa.JSON(), nullable=False),
        sa.Column("exact", sa.Boolean(), nullable=False),
        sa.Column("method", sa.String(length=32), nullable=False),
        sa.Column("index_version", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["table_key"], ["tables.table_key"], name="fk_unionable_table_key_tables", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("table_key", "rank", name="pk_unionable"),
    )
    _hash_index("ix_unionable_table_id", "unionable", "table_id")
    _hash_index("ix_unionable_candidate_table_id", "unionable", "candidate_table_id")
    op.create_table(
        "josie_tokens",
        sa.Column("token_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("token_key", KEY, nullable=False),
        sa.Column("token", sa.Text(), nullable=False),
        sa.Column("frequency", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("token_id", name="pk_josie_tokens"),
    )
    op.create_index("ix_josie_tokens_token_key", "josie_tokens", ["token_key"], unique=False)


def _create_old() -> None:
    """The schema of 0001_foundation, 0004_josie and 0005_relations for the tables rebuilt here."""
    op.create_table(
        "sources",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("location", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_sources"),
    )
    op.create_table(
        "publish_runs",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("batch_id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column("index_version", sa.Integer(), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", name="pk_publish_runs"),
    )
    op.create_index("ix_publish_runs_batch_id", "publish_runs", ["batch_id"], unique=False)
    op.create_table(
        "tables",
        sa.Column("table_id", sa.String(length=2048), nullable=False),
        sa.Column("source_name", sa.String(length=200), nullable=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("format", sa.String(length=32), nullable=True),
        sa.Column("n_rows", sa.Integer(), nullable=False),
        sa.Column("n_columns", sa.Integer(), nullable=False),
        sa.Column("content_sha256", sa.String(length=64), nullable=True),
        sa.Column("source_updated_at", sa.String(length=64), nullable=True),
        sa.Column("keys_search_complete", sa.Boolean(), nullable=True),
        sa.Column("batch_id", sa.String(length=64), nullable=True),
        sa.Column("index_version", sa.Integer(), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("table_id", name="pk_tables"),
    )
    op.create_index("ix_tables_source_name", "tables", ["source_name"], unique=False)
    op.create_table(
        "columns",
        sa.Column("column_id", sa.String(length=4096), nullable=False),
        sa.Column("table_id", sa.String(length=2048), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("header", sa.Text(), nullable=False),
        sa.Column("portal_type", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["table_id"], ["tables.table_id"], name="fk_columns_table_id_tables", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("column_id", name="pk_columns"),
    )
    op.create_index("ix_columns_table_id_position", "columns", ["table_id", "position"], unique=False)
    op.create_table(
        "column_profiles",
        sa.Column("column_id", sa.String(length=4096), nullable=False),
        sa.Column("row_count", sa.Integer(), nullable=False),
        sa.Column("null_count", sa.Integer(), nullable=False),
        sa.Column("empty_count", sa.Integer(), nullable=False),
        sa.Column("distinct_count", sa.Integer(), nullable=False),
        sa.Column("distinct_exact", sa.Boolean(), nullable=False),
        sa.Column("distinct_error", sa.Float(), nullable=True),
        sa.Column("inferred_type", sa.String(length=32), nullable=False),
        sa.Column("type_share", sa.Float(), nullable=False),
        sa.Column("portal_type", sa.String(length=64), nullable=True),
        sa.Column("min_value", sa.Text(), nullable=True),
        sa.Column("max_value", sa.Text(), nullable=True),
        sa.Column("length_min", sa.Integer(), nullable=True),
        sa.Column("length_mean", sa.Float(), nullable=True),
        sa.Column("length_max", sa.Integer(), nullable=True),
        sa.Column("top_values", sa.JSON(), nullable=False),
        sa.Column("histogram", sa.JSON(), nullable=False),
        sa.Column("uniqueness", sa.Float(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("batch_id", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["column_id"], ["columns.column_id"], name="fk_column_profiles_column_id_columns", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("column_id", name="pk_column_profiles"),
    )
    op.create_table(
        "keys",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("table_id", sa.String(length=2048), nullable=False),
        sa.Column("columns", sa.JSON(), nullable=False),
        sa.Column("exact", sa.Boolean(), nullable=False),
        sa.Column("uniqueness", sa.Float(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("batch_id", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(["table_id"], ["tables.table_id"], name="fk_keys_table_id_tables", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_keys"),
    )
    op.create_index("ix_keys_table_id", "keys", ["table_id"], unique=False)
    op.create_table(
        "joinable",
        sa.Column("column_id", sa.String(length=4096), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("table_id", sa.String(length=2048), nullable=False),
        sa.Column("candidate_column_id", sa.String(length=4096), nullable=False),
        sa.Column("candidate_table_id", sa.String(length=2048), nullable=False),
        sa.Column("candidate_header", sa.Text(), nullable=False),
        sa.Column("overlap", sa.BigInteger(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("candidate_size", sa.BigInteger(), nullable=False),
        sa.Column("containment", sa.Float(), nullable=False),
        sa.Column("candidate_containment", sa.Float(), nullable=False),
        sa.Column("jaccard", sa.Float(), nullable=False),
        sa.Column("est_join_size", sa.Float(), nullable=False),
        sa.Column("is_key", sa.Boolean(), nullable=False),
        sa.Column("candidate_is_key", sa.Boolean(), nullable=False),
        sa.Column("direction", sa.String(length=16), nullable=False),
        sa.Column("exact", sa.Boolean(), nullable=False),
        sa.Column("method", sa.String(length=32), nullable=False),
        sa.Column("index_version", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["column_id"], ["columns.column_id"], name="fk_joinable_column_id_columns", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("column_id", "rank", name="pk_joinable"),
    )
    op.create_index("ix_joinable_candidate_table_id", "joinable", ["candidate_table_id"], unique=False)
    op.create_table(
        "unionable",
        sa.Column("table_id", sa.String(length=2048), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("candidate_table_id", sa.String(length=2048), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("n_aligned", sa.Integer(), nullable=False),
        sa.Column("alignment", sa.JSON(), nullable=False),
        sa.Column("exact", sa.Boolean(), nullable=False),
        sa.Column("method", sa.String(length=32), nullable=False),
        sa.Column("index_version", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["table_id"], ["tables.table_id"], name="fk_unionable_table_id_tables", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("table_id", "rank", name="pk_unionable"),
    )
    op.create_index("ix_unionable_candidate_table_id", "unionable", ["candidate_table_id"], unique=False)
    op.create_table(
        "josie_tokens",
        sa.Column("token", sa.Text(), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=False),
        sa.Column("frequency", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("token", name="pk_josie_tokens"),
    )
    op.create_index("ix_josie_tokens_token_id", "josie_tokens", ["token_id"], unique=True)
