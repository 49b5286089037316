"""The precomputed transformation lists through the real pipeline, on both catalog databases: a
lake built from the real tables the project ships (starwars characters as "Last, First" beside
the starwars table's "First Last", drag queens with a title, airline labels with their code) is
landed as a crawl lands it and tokenized by Spark, then published; each list's program equals
what Auto-Join learns online for that pair, a batch that adds, deletes and edits tables leaves the
lists a full recompute makes (a publish killed before its commit leaves the previous ones), and
the lookup answers by the CLI (`lookup joinable COLUMN --transform`), over HTTP and on the table
page."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from markupsafe import escape
from sqlalchemy import Connection, delete, select

from bench.autojoin_cases import cases
from catalog.api.app import create_app
from catalog.cli.main import main
from catalog.core.errors import UserError
from catalog.core.identity import file_table_id
from catalog.core.settings import Settings
from catalog.db.engine import open_catalog
from catalog.search.autojoin.join import Table, autojoin
from catalog.search.autojoin.lists import FROM_CANDIDATE, PENDING, TO_CANDIDATE, transform_joinable
from catalog.search.autojoin.models import TransformList
from catalog.search.autojoin.settings import autojoin_settings
from catalog.search.autojoin.tables import lake_table
from spark_jobs.autojoin.publish import refresh_lists, transform_lists_publisher
from spark_jobs.crawl.land import ParsedTable, land_batch
from spark_jobs.lake import faults
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.store import LakeStore
from spark_jobs.profile import tokens as column_tokens
from spark_jobs.publish import catalog as publish_catalog
from spark_jobs.publish.catalog import publish_tables
from tests.conftest import _pg_schema_url, cli_home, make_settings

pytestmark = pytest.mark.slow

CHARACTERS = file_table_id("characters.csv")
STARWARS = file_table_id("starwars.csv")
Lists = dict[str, list[tuple[Any, ...]]]
REORDER = 'Concat(SplitSubstr(character, ", ", -1), " ", SplitSubstr(character, ", ", 0))'


@dataclass(frozen=True)
class Lake:
    """The test lake after its two batches (landed and tokenized, not published: `published`
    publishes them into a catalog on each database)."""

    home: Path
    first: ChangeBatch
    second: ChangeBatch


def _parsed(name: str, table: tuple[list[str], list[list[str | None]]], columns: list[str]) -> ParsedTable:
    """The table's `columns` as a lake table `file:<name>` (the cases' noise columns left out)."""
    headers, rows = table
    at = [headers.index(c) for c in columns]
    return ParsedTable(file_table_id(name), columns, [[r[i] for r in rows] for i in at], name=name)


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, spark) -> Lake:  # type: ignore[no-untyped-def]
    """Batch 1: starwars and its characters as "Last, First", drag queens and their titles, airlines
    and their labels. Batch 2: bakers and their e-mails added, the airline labels deleted, the
    characters edited (fewer rows). Only the stages the lists read run (bronze, column tokens)."""
    home = tmp_path_factory.mktemp("autojoin-lists")
    settings = make_settings(home)
    store = LakeStore(settings.lake, spark)
    by_name = {c.name: c for c in cases()}
    starwars, queens = by_name["starwars last, first"], by_name["queens prefixed"]
    airlines, bakers = by_name["airline code - name"], by_name["bakers e-mail"]
    first = [
        _parsed("starwars.csv", starwars.target, ["name", "height", "mass", "hair_color", "homeworld", "species"]),
        _parsed("characters.csv", starwars.source, ["character"]),
        _parsed("queens.csv", queens.target, ["contestant", "season", "age", "hometown"]),
        _parsed("titles.csv", queens.source, ["title"]),
        _parsed("airlines.csv", airlines.target, ["name", "carrier"]),
        _parsed("airline_labels.csv", airlines.source, ["airline"]),
        _parsed("economics.csv", by_name["economics date us"].target, ["pce", "pop"]),  # numbers only
    ]
    headers, rows = starwars.source
    second = [
        _parsed("bakers.csv", bakers.target, ["baker_full", "baker", "series"]),
        _parsed("emails.csv", bakers.source, ["email"]),
        _parsed("characters.csv", (headers, rows[:30]), ["character"]),
    ]
    batches = []
    for added, deleted in ((first, []), (second, [file_table_id("airline_labels.csv")])):
        batch = land_batch(store, added, deleted, n_buckets=settings.index.cells_buckets)
        column_tokens.run(spark, settings, batch)
        batches.append(batch)
    return Lake(home, batches[0], batches[1])


def _lists(conn: Connection) -> Lists:
    rows = conn.execute(
        select(TransformList.column_id, TransformList.rank, TransformList.candidate_column_id)
        .add_columns(TransformList.n_shared, TransformList.program, TransformList.direction)
        .add_columns(TransformList.coverage, TransformList.fuzzy)
        .order_by(TransformList.column_id, TransformList.rank)
    ).tuples()
    out: dict[str, list[tuple[Any, ...]]] = {}
    for column_id, *row in rows:
        out.setdefault(column_id, []).append((*row[:-1], bool(row[-1])))
    return out


def _publish(settings: Settings, batch: ChangeBatch) -> dict[str, Any]:
    """Publish `batch` as the pipeline's publish does, with the publishers the lists need (the
    tables and columns, then the lists)."""
    return publish_catalog.run(None, settings, batch, [publish_tables, transform_lists_publisher(settings)])


def _full_recompute(settings: Settings) -> tuple[Lists, dict[str, int]]:
    """The lists a full recompute of the lake makes (in a transaction rolled back), and its counts."""
    with open_catalog(settings.catalog_url).connect() as conn, conn.begin() as transaction:
        conn.execute(delete(TransformList))
        counts = refresh_lists(conn, LakeStore(settings.lake), settings, None)
        full = _lists(conn)
        transaction.rollback()
    assert counts["autojoin_lists_pending"] == 0
    return full, counts


def _online(settings: Settings, column_id: str, candidate_id: str) -> tuple[str | None, str | None, int]:
    """(program, direction, coverage) that `autojoin` learns online for the pair: its two columns
    as one-column tables, read from the lake, in the pair's one order (column ids sorted)."""

    def side(cid: str) -> Table:
        table_id, header = cid.split("#", 1)
        table = lake_table(table_id, settings)
        return Table((header,), (table.columns[table.headers.index(header)],))

    first, second = sorted((column_id, candidate_id))
    result = autojoin(side(first), side(second), autojoin_settings(settings))
    if result.program is None:
        return None, None, 0
    reads = second if result.reversed else first
    return str(result.program), TO_CANDIDATE if reads == column_id else FROM_CANDIDATE, result.coverage


@dataclass(frozen=True)
class Published:
    """The test lake's two batches published into an empty catalog: the lists after the second
    batch and its publish's counts, and a full recompute's lists and counts."""

    settings: Settings
    lists: Lists
    counts: dict[str, Any]
    full: Lists
    full_counts: dict[str, int]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def published(request: pytest.FixtureRequest, lake: Lake, tmp_path_factory: pytest.TempPathFactory) -> Published:
    """The lake published once per database (the tests only read it, or roll back what they write)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('catalog') / 'catalog.db'}"
    else:
        url = _pg_schema_url(request.getfixturevalue("pg_database"))
    # a work bound this lake never reaches (it learns a few dozen pairs): these tests compare
    # complete lists; the bound's own test lowers it
    settings = make_settings(lake.home, catalog_url=url)
    settings = dataclasses.replace(settings, index=settings.index.with_family("autojoin", list_max_pairs=200))
    _publish(settings, lake.first)
    with open_catalog(settings.catalog_url).connect() as conn:
        first = _lists(conn)
    # the second publish killed after its lists were made, before its commit: the first batch's
    # lists stay whole, and the rerun makes the second's
    with faults.injected("publish:batch"), pytest.raises(faults.InjectedFault):
        _publish(settings, lake.second)
    with open_catalog(settings.catalog_url).connect() as conn:
        assert _lists(conn) == first
    counts = _publish(settings, lake.second)
    with open_catalog(settings.catalog_url).connect() as conn:
        lists = _lists(conn)
    full, full_counts = _full_recompute(settings)
    return Published(settings, lists, counts, full, full_counts)


def test_a_batch_leaves_the_lists_a_full_recompute_makes(published: Published) -> None:
    lists = published.lists
    assert lists == published.full
    assert not any(c.startswith(file_table_id("airline_labels.csv")) for c in lists)
    emails = lists[f"{file_table_id('emails.csv')}#email"]
    assert any(r[1] == f"{file_table_id('bakers.csv')}#baker_full" and r[3] is not None for r in emails[1:])
    # the batch learned only the pairs of its tables: fewer than a full recompute learns
    assert 0 < published.counts["autojoin_pairs_learned"] < published.full_counts["autojoin_pairs_learned"]


def test_lists_over_the_work_bound_wait_and_the_next_publish_learns_them(published: Published) -> None:
    settings, lists = published.settings, published.lists
    small = {"list_max_pairs": 2, "list_backlog_pairs": 2}
    bounded = dataclasses.replace(settings, index=settings.index.with_family("autojoin", **small))
    # a batch's bound is small, the backlog's is not: the backlog learns what batches left
    batches = dataclasses.replace(settings, index=settings.index.with_family("autojoin", list_max_pairs=2))
    subject = f"{CHARACTERS}#character"
    with open_catalog(settings.catalog_url).connect() as conn, conn.begin() as transaction:
        conn.execute(delete(TransformList))
        counts = refresh_lists(conn, LakeStore(settings.lake), bounded, None)
        assert counts["autojoin_pairs_learned"] <= 2 and counts["autojoin_lists_pending"] > 0
        waiting = _lists(conn)
        assert all(
            len(rows) == 1 and rows[0][5] == PENDING
            for c, rows in waiting.items()
            if c not in lists or rows != lists[c]
        )
        if waiting[subject][0][5] == PENDING:
            with pytest.raises(UserError, match="not precomputed yet"):
                transform_joinable(conn, subject)
        # a change batch's publish learns what its changes call for: a waiting list of a table it
        # touched, not the others (the backlog's publish after it does)
        pending = sorted(c for c, rows in waiting.items() if rows[0][5] == PENDING)
        table = pending[0].rsplit("#", 1)[0]
        refresh_lists(conn, LakeStore(settings.lake), settings, [table], backlog=False)
        after = _lists(conn)
        assert all(after[c] == lists[c] for c in pending if c.startswith(f"{table}#"))
        assert all(after[c] == waiting[c] for c in pending if not c.startswith(f"{table}#"))
        assert any(not c.startswith(f"{table}#") for c in pending)
        # the backlog's publish after it (no table touched, its own bound) learns the waiting lists
        refresh_lists(conn, LakeStore(settings.lake), batches, ())
        assert _lists(conn) == lists
        transaction.rollback()


def test_each_program_is_what_autojoin_learns_online_for_the_pair(published: Published) -> None:
    settings, lists = published.settings, published.lists
    learned = 0
    for column_id, rows in lists.items():
        for _rank, candidate, _n, program, direction, coverage, _fuzzy in rows[1:]:
            assert (program, direction, coverage) == _online(settings, column_id, candidate)
            learned += program is not None
    assert learned >= 3
    # numeric-only columns have no list; the reordered names find the starwars names first
    assert f"{STARWARS}#height" not in lists and f"{STARWARS}#name" in lists
    with open_catalog(settings.catalog_url).connect() as conn:
        answers = transform_joinable(conn, f"{CHARACTERS}#character")
    assert (answers[0].column_id, answers[0].program, answers[0].direction) == (
        f"{STARWARS}#name",
        REORDER,
        TO_CANDIDATE,
    )
    # the same program and coverage as `autojoin` of the whole tables
    whole = autojoin(lake_table(CHARACTERS, settings), lake_table(STARWARS, settings), autojoin_settings(settings))
    assert (str(whole.program), whole.coverage) == (answers[0].program, answers[0].coverage)


def test_lookup_joinable_transform_by_cli_http_and_table_page(
    published: Published, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = published.settings
    cli_home(tmp_path, monkeypatch, settings.catalog_url, "")
    subject = f"{CHARACTERS}#character"
    with open_catalog(settings.catalog_url).connect() as conn:
        expected = [dataclasses.asdict(a) for a in transform_joinable(conn, subject)]
    assert main(["lookup", "joinable", subject, "--transform", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == expected
    assert main(["lookup", "joinable", subject, "--transform"]) == 0
    text = capsys.readouterr().out
    assert REORDER in text and f"{STARWARS}" in text and "to_candidate" in text
    # errors: one line, exit 2
    bad = [
        (["lookup", "joinable", f"{CHARACTERS}#nowhere", "--transform"], "unknown column_id"),
        (["lookup", "joinable", f"{file_table_id('economics.csv')}#pce", "--transform"], "only textual columns"),
        (["lookup", "joinable", subject, "--transform", "--semantic"], "--transform goes with"),
        (["lookup", "table", CHARACTERS, "--transform"], "--transform goes with"),
        (["lookup", "joinable", subject, "--transform", "--k", "0"], "--k must be"),
    ]
    for argv, message in bad:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, (argv, err)

    with TestClient(create_app(settings)) as client:
        answer = client.get(f"/v1/joinable/{subject.replace('#', '%23')}", params={"transform": "true"})
        assert answer.status_code == 200 and answer.json()["items"] == expected
        unknown = client.get(f"/v1/joinable/{CHARACTERS}%23nowhere", params={"transform": "true"})
        assert unknown.status_code == 404
        both = client.get(
            f"/v1/joinable/{subject.replace('#', '%23')}", params={"transform": "true", "semantic": "true"}
        )
        assert both.status_code == 422
        # a listed table shows its precomputed joins instead of the on-request button
        page = client.get("/table", params={"id": CHARACTERS}).text
        assert 'action="/table/transform"' not in page
        rows = re.findall(r'<tr data-column-id="([^"]*)"><td>character</td>', page)
        assert rows[0] == f"{STARWARS}#name" and str(escape(REORDER)) in page
        # a table with no list (numbers only) keeps the button
        assert 'action="/table/transform"' in client.get("/table", params={"id": file_table_id("economics.csv")}).text
