"""Shared fixtures: one real local Spark session, throw-away settings, and catalogs on real
SQLite and the real PostgreSQL server on 127.0.0.1:5432 (a fresh database per test session and a
fresh schema per test)."""

from __future__ import annotations

import dataclasses
import itertools
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from catalog.core.settings import IndexSettings, Settings, SparkSettings, load_settings
from catalog.db.engine import make_engine, upgrade_schema

PG_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
_schema_counter = itertools.count(1)

# `make test` runs two pytest workers (`-n 2 --dist loadfile`): a test file goes whole to one
# worker (its module and session fixtures are built once). Files are handed out in collection
# order, so the longest start first and the two workers end together: the kill campaign alone is
# a quarter of the suite's time.
LONGEST_FIRST = ("tests/reliability/test_kill_campaign.py", "tests/web/", "tests/airflow/")


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = {_file(item.nodeid) for item in items if item.get_closest_marker("slow")}

    def start_rank(item: pytest.Item) -> int:
        ranks = [i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix)]
        return ranks[0] if ranks else len(LONGEST_FIRST) + (_file(item.nodeid) not in slow)

    items.sort(key=start_rank)  # stable: a file's tests keep their order


def cli_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalog_url: str, toml: str) -> Path:
    """`tmp_path` as the working folder of `juncture` commands run in-process: no JUNCTURE_*
    variable from the environment, the home and catalog given, `juncture.toml` = `toml`, and an
    empty `files/` folder to crawl."""
    monkeypatch.chdir(tmp_path)
    for var in [v for v in os.environ if v.startswith("JUNCTURE_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("JUNCTURE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("JUNCTURE_CATALOG_URL", catalog_url)
    (tmp_path / "juncture.toml").write_text(toml)
    (tmp_path / "files").mkdir(exist_ok=True)
    return tmp_path


def make_settings(home: Path, **overrides: object) -> Settings:
    """Settings for a test: everything under `home`, Spark sized for tests, no config file."""
    base = load_settings({}, cwd=home)
    spark = SparkSettings(master="local[2]", driver_memory="2g", shuffle_partitions=2, ui=False)
    return dataclasses.replace(base, spark=spark, index=IndexSettings(cells_buckets=4), **overrides)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    from spark_jobs.lake.session import get_spark

    home = Path(os.environ.get("PYTEST_SPARK_HOME", "/tmp")) / f"juncture-spark-{uuid.uuid4().hex[:8]}"
    session = get_spark(make_settings(home), "juncture.tests")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _no_cached_data_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every Spark job frees what it caches: a frame left cached holds its data and the broadcasts of
    its plan in the driver for the rest of the session (on one machine, executors share that heap),
    and a scheduled service runs batch after batch in one session."""
    yield
    if "spark" not in request.fixturenames:
        return
    spark = request.getfixturevalue("spark")
    left = spark.sparkContext._jsc.getPersistentRDDs().size()  # the JVM side: PySpark has no public accessor
    cached = not spark._jsparkSession.sharedState().cacheManager().isEmpty()
    spark.catalog.clearCache()
    assert not cached and left == 0, f"{request.node.nodeid} left data cached ({left} persistent RDDs)"


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped at the end."""
    import psycopg
    from psycopg import sql

    name = f"juncture_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres", autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    with psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres", autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


def _pg_schema_url(database_url: str) -> str:
    """A new empty schema in the session database, as a URL whose search_path points at it."""
    import psycopg
    from psycopg import sql

    schema = f"t{next(_schema_counter)}_{uuid.uuid4().hex[:6]}"
    dbname = database_url.rsplit("/", 1)[1]
    with psycopg.connect(f"host=127.0.0.1 port=5432 user=postgres dbname={dbname}", autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    return f"{database_url}?options=-csearch_path%3D{schema}"


@pytest.fixture(params=["sqlite", "postgresql"])
def catalog_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty catalog, once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'catalog.db'}"
    return _pg_schema_url(request.getfixturevalue("pg_database"))


@pytest.fixture
def catalog_engine(catalog_url: str) -> Iterator[Engine]:
    """An engine on a catalog at the current schema head (SQLite and PostgreSQL)."""
    engine = make_engine(catalog_url)
    upgrade_schema(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def catalog_settings(tmp_path: Path, catalog_url: str) -> Settings:
    """Test settings whose catalog is `catalog_url` (so a test runs on both databases)."""
    return make_settings(tmp_path, catalog_url=catalog_url)
