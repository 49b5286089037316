"""MATE through the real pipeline, on both catalog databases: a folder lake built to fool a
single-column index is crawled, indexed (super keys and posting lists in Spark), published and
searched with `juncture search nary`; then tables are deleted, changed and added, and the XASH spec
is changed; every method's answers equal brute force after each step, and over HTTP."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Collection, Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from markupsafe import escape
from sqlalchemy import select

from catalog.api.app import create_app
from catalog.cli.main import main
from catalog.core.errors import XashMismatchError
from catalog.core.identity import column_headers, file_table_id
from catalog.core.settings import load_settings
from catalog.core.xash import XashSpec
from catalog.db.engine import open_catalog
from catalog.search.mate import METHODS
from catalog.search.mate import search as mate_search
from catalog.search.mate.lists import LIST_K, listed_keys, nary_joinable, nary_lists
from catalog.search.mate.models import MateList, MateTable
from catalog.search.mate.search import NaryRequest, search_nary
from catalog.search.mate.source import CatalogSource
from spark_jobs.lake import faults
from spark_jobs.lake.store import LakeStore
from spark_jobs.mate import lists as lake_lists
from tests.conftest import cli_home
from tests.mate.lake import Table, match_count, oracle, pair_bound, position_pairs, random_lake

pytestmark = pytest.mark.slow
BUDGETS = (982, 3_000, 1)  # pairs per list, per run, per backlog run (the cheapest list always goes)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalog_url: str, spark) -> Iterator[Path]:  # type: ignore[no-untyped-def]
    yield cli_home(tmp_path, monkeypatch, catalog_url, "[index]\ncells_buckets = 4\n")


def _write(path: Path, headers: list[str], rows: list[list[str | None]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(headers)
        w.writerows([["" if v is None else v for v in r] for r in rows])


def _lake_tables(folder: Path) -> list[Table]:
    """The folder's tables as the lake sees them: ids, contract headers, raw cells."""
    out: list[Table] = []
    for path in sorted(folder.glob("*.csv")):
        with path.open(newline="", encoding="utf-8") as f:
            header, *rows = list(csv.reader(f))
        out.append((file_table_id(path.name), column_headers(header), [[v or None for v in r] for r in rows]))
    return out


def _nary(home: Path, query: Table, key: list[str], method: str, capsys: pytest.CaptureFixture[str]) -> list:
    _write(home / "q.csv", query[1], query[2])
    capsys.readouterr()
    args = ["search", "nary", "--csv", str(home / "q.csv"), "--key", ",".join(key), "--method", method, "--k", "5"]
    assert main([*args, "--json"]) == 0
    return [(r["table_id"], r["joinability"], r["mapping"]) for r in json.loads(capsys.readouterr().out)]


def _check(home: Path, query: Table, key: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    expected = oracle(_lake_tables(home / "files"), query[1], query[2], key, 5)
    assert expected
    for method in METHODS:
        assert _nary(home, query, key, method, capsys) == expected, method


def _check_lists(
    home: Path,
    catalog_url: str,
    capsys: pytest.CaptureFixture[str],
    *,
    budgets: tuple[int, int, int] | None = None,
    kept_over: Collection[tuple[str, tuple[str, ...]]] = (),
) -> set[tuple[str, tuple[str, ...]]]:
    """Every precomputed n-ary list equals the oracle's search of its table's own rows on its key,
    the table itself left out; every listed key has its list and no other list is kept.

    With `budgets` (per list, per run, per backlog run): a list is not computed exactly when its
    work bound exceeds the first, and of the others the cheapest (by bound, then table and key) are
    computed until their bounds add up past the second; of those left, the backlog run after it
    computes the cheapest the same way within the third; the rest wait. Without: no list waits,
    and the lists not computed are `kept_over` (lists a batch did not compute again). Returns those
    not computed."""
    lake = _lake_tables(home / "files")
    with open_catalog(catalog_url).connect() as conn:
        wanted = {(t, k) for t, keys in listed_keys(conn).items() for k in keys}
        stored = {
            (t, tuple(json.loads(k)))
            for t, k in conn.execute(select(MateList.table_id, MateList.key).where(MateList.rank == 0))
        }
        assert stored == wanted and wanted
        lists = {(t, tuple(n.key)): n for t in {t for t, _ in wanted} for n in nary_lists(conn, t)}
    tables = {t[0]: t for t in lake}
    bound = {(t, k): pair_bound(lake, tables[t][1], tables[t][2], list(k)) for t, k in wanted}
    expect_over, expect_waiting = set(kept_over), set()
    if budgets is not None:
        expect_over = {listed for listed, b in bound.items() if b > budgets[0]}
        cheapest = sorted((b, t, json.dumps(list(k))) for (t, k), b in bound.items() if 0 < b <= budgets[0])
        left = _left_by_budget(_left_by_budget(cheapest, budgets[1]), budgets[2])
        expect_waiting = {(t, tuple(json.loads(k))) for _, t, k in left}
    assert {listed for listed, n in lists.items() if n.over_budget} == expect_over
    assert {listed for listed, n in lists.items() if n.pending} == expect_waiting
    with open_catalog(catalog_url).connect() as conn:
        answers = 0
        for table_id, key in sorted(wanted - expect_over - expect_waiting):
            _, headers, rows = tables[table_id]
            others = [t for t in lake if t[0] != table_id]
            expected = oracle(others, headers, rows, list(key), LIST_K)
            got = [(a.table_id, a.joinability, a.mapping) for a in nary_joinable(conn, table_id, list(reversed(key)))]
            assert got == expected, (table_id, key)
            answers += len(got)
        assert answers
    table_id, key = min(wanted - expect_over - expect_waiting)
    capsys.readouterr()
    assert main(["lookup", "joinable", table_id, "--key", ",".join(key), "--k", "2", "--offset", "1", "--json"]) == 0
    paged = [(a["table_id"], a["rank"]) for a in json.loads(capsys.readouterr().out)]
    with open_catalog(catalog_url).connect() as conn:
        assert paged == [(a.table_id, a.rank) for a in nary_joinable(conn, table_id, list(key))][1:3]
    assert main(["lookup", "joinable", table_id, "--key", "nope,c0"]) == 2
    assert "no precomputed n-ary list" in capsys.readouterr().err
    assert main(["lookup", "keys", table_id, "--key", "c0,c1"]) == 2
    if expect_waiting:
        waiting, key = min(expect_waiting)
        assert main(["lookup", "joinable", waiting, "--key", ",".join(key)]) == 2
        assert "not computed yet" in capsys.readouterr().err
    return expect_over | expect_waiting


def _left_by_budget(cheapest: list[tuple[int, str, str]], budget: int) -> list[tuple[int, str, str]]:
    """Of lists in cost order, those a run with `budget` leaves: after the cheapest whose bounds add
    up to at most `budget` (the first always computed)."""
    spent, left = 0, []
    for i, item in enumerate(cheapest):
        spent += item[0]
        if i > 0 and spent > budget:
            left.append(item)
    return left


def test_nary_search_through_the_pipeline_equals_brute_force(
    home: Path, catalog_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = home / "files"
    tables, query = random_lake(11, n_tables=24, key_size=3)
    for table_id, headers, rows in tables:
        _write(folder / f"{table_id}.csv", headers, rows)
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    # work bounds some lists exceed (on this lake their bounds run from 138 to 2,052), and a run's
    # budget that leaves some lists for the next run
    with monkeypatch.context() as patch:
        patch.setattr(lake_lists, "MAX_LIST_PAIRS", BUDGETS[0])
        patch.setattr(lake_lists, "MAX_RUN_PAIRS", BUDGETS[1])
        patch.setattr(lake_lists, "MAX_BATCH_PAIRS", BUDGETS[2])
        assert main(["index"]) == 0
    _check(home, query, ["k0", "k1"], capsys)
    _check(home, query, ["k0", "k1", "k2"], capsys)
    with open_catalog(catalog_url).connect() as conn:
        before = {(t, tuple(n.key)): n for t in listed_keys(conn) for n in nary_lists(conn, t)}
    not_computed = _check_lists(home, catalog_url, capsys, budgets=BUDGETS)
    over = {listed for listed in not_computed if before[listed].over_budget}
    assert over and not_computed - over

    # a batch: two tables deleted, two changed, two added
    rng = np.random.default_rng(3)
    (folder / "t001.csv").unlink()
    (folder / "t007.csv").unlink()
    for name in ("t005", "t010"):
        _, headers, rows = tables[int(name[1:])]
        _write(folder / f"{name}.csv", headers, [rows[i] for i in rng.permutation(len(rows))[: len(rows) // 2]])
    more, _ = random_lake(12, n_tables=10, key_size=3)
    for table_id, headers, rows in more[:2]:
        _write(folder / f"new_{table_id}.csv", headers, rows)
    # half of a keyed table's rows, columns reversed: enters that table's list (and maybe others')
    touched = {file_table_id(f"t{n}.csv") for n in ("001", "007", "005", "010")}
    with open_catalog(catalog_url).connect() as conn:
        keyed = sorted(t for t in listed_keys(conn) if t not in touched | {t for t, _ in not_computed})
    _, headers, rows = next(t for t in _lake_tables(folder) if t[0] == keyed[0])
    _write(folder / "new_copy.csv", headers[::-1], [r[::-1] for r in rows[: len(rows) // 2]])
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["index"]) == 0
    # the batch computed the lists its changes call for; the backlog after it, those left waiting
    waiting = {listed for listed in not_computed - over if listed[0] not in touched}
    out = capsys.readouterr().out
    assert waiting and f"backlog: {len(waiting)} n-ary lists computed (0 still pending)" in out
    assert re.search(
        r"relate: joinable [\d.]+s, unionable [\d.]+s; "
        r"mate: index [\d.]+s, list tuples [\d.]+s, fresh lists [\d.]+s, merged lists [\d.]+s;",
        out,
    )
    state = LakeStore(load_settings().lake).read_arrow("mate_state").to_pylist()[0]
    assert not state["full"]
    with open_catalog(catalog_url).connect() as conn:
        published = set(conn.execute(select(MateTable.table_id)).scalars())
    assert published == {t for t, _, _ in _lake_tables(folder)}
    _check(home, query, ["k0", "k1"], capsys)
    _check(home, query, ["k1", "k2", "k0"], capsys)
    _check_lists(home, catalog_url, capsys, kept_over={(t, k) for t, k in over if t not in touched})

    # over HTTP, the key named or detected
    client = TestClient(create_app(load_settings()))
    body = (home / "q.csv").read_bytes()
    answer = client.post("/v1/search/nary?key=k0,k1&k=5", content=body, headers={"content-type": "text/csv"})
    assert answer.status_code == 200
    got = [(r["table_id"], r["joinability"], r["mapping"]) for r in answer.json()["results"]]
    assert got == oracle(_lake_tables(folder), query[1], query[2], ["k0", "k1"], 5)
    again = client.post("/v1/search/nary?key=k0,k1&k=5", content=body, headers={"content-type": "text/csv"})
    assert again.json()["results"] == answer.json()["results"]  # the row keys held by the first search
    assert client.post("/v1/search/nary?key=k0,nope", content=body).status_code == 400
    assert client.post("/v1/search/nary?key=k0,k1", content=b"\xff\xfe").status_code == 400
    assert client.post("/v1/search/nary?method=fast", content=body).status_code == 422
    assert client.post("/v1/search/nary?key=a,b", content=b'a,b\n"x,1\n').status_code == 400  # malformed
    assert client.post("/v1/search/nary?key=a,b", content=b"a,b\n" + b"x,y\n" * 1_100_000).status_code == 413

    # the precomputed lists over HTTP, and their bad input
    with open_catalog(catalog_url).connect() as conn:
        table_id, key = min((t, k) for t, keys in listed_keys(conn).items() for k in keys)
        expected = [a.table_id for a in nary_joinable(conn, table_id, list(key))]
    page = client.get(f"/v1/joinable/{table_id}", params={"key": ",".join(key), "k": LIST_K}).json()
    assert [a["table_id"] for a in page["items"]] == expected and all(a["mapping"] for a in page["items"])
    assert client.get(f"/v1/joinable/{table_id}", params={"key": "nope,c0"}).status_code == 400
    assert client.get("/v1/joinable/file:nowhere.csv", params={"key": "a,b"}).status_code == 404
    assert client.get("/v1/joinable/not-an-id", params={"key": "a,b"}).status_code == 422
    assert client.get(f"/v1/joinable/{table_id}").status_code == 422  # a table_id is no column_id


def _pending(catalog_url: str) -> list[str]:
    with open_catalog(catalog_url).connect() as conn:
        return sorted(t for t in listed_keys(conn) for n in nary_lists(conn, t) if n.pending)


def test_detected_key_and_a_spec_change(
    home: Path, catalog_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = home / "files"
    _write(
        folder / "visits.csv",
        ["city", "day", "n"],
        [["berlin", "mon", "1"], ["paris", "mon", "2"], ["berlin", "tue", "3"]],
    )
    _write(folder / "other.csv", ["when", "where"], [["mon", "berlin"], ["tue", "paris"], ["mon", "paris"]])
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    with monkeypatch.context() as patch:  # a run computes one list; the backlog after it, the other
        patch.setattr(lake_lists, "MAX_RUN_PAIRS", 1)
        patch.setattr(lake_lists, "MAX_BATCH_PAIRS", 1)
        with faults.injected("publish:backlog"):  # fails between the backlog's commit and its publish
            assert main(["index"]) == 1
        assert len(_pending(catalog_url)) == 1
        capsys.readouterr()
        assert main(["index"]) == 0  # publishes that run's lists, computes none
    assert "backlog: published in" in capsys.readouterr().out
    assert _pending(catalog_url) == []
    assert main(["rebuild"]) == 0
    with open_catalog(catalog_url).connect() as conn:
        listed = {t: nary_joinable(conn, t, list(keys[0])) for t, keys in listed_keys(conn).items()}
    assert {t: [a.table_id for a in answers] for t, answers in listed.items()} == {
        file_table_id("visits.csv"): [file_table_id("other.csv")],
        file_table_id("other.csv"): [file_table_id("visits.csv")],
    }
    # a batch spends its own, smaller budget: of the two lists it changes, the cheaper is computed
    _write(
        folder / "visits.csv",
        ["city", "day", "n"],
        [["berlin", "mon", "1"], ["paris", "mon", "2"], ["berlin", "tue", "3"], ["rome", "wed", "4"]],
    )
    _write(
        folder / "other.csv",
        ["when", "where"],
        [["mon", "berlin"], ["tue", "paris"], ["mon", "paris"], ["wed", "oslo"]],
    )
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    capsys.readouterr()
    with monkeypatch.context() as patch:  # the backlog after the batch computes the other
        patch.setattr(lake_lists, "MAX_BATCH_PAIRS", 1)
        assert main(["index"]) == 0
    assert "backlog: 1 n-ary lists computed (0 still pending)" in capsys.readouterr().out
    assert _pending(catalog_url) == []
    _write(
        home / "q.csv",
        ["town", "weekday", "note"],
        [["Berlin", "Mon", "x"], ["Paris", "Mon", "x"], ["Paris", "Tue", "y"]],
    )
    capsys.readouterr()
    assert main(["search", "nary", "--csv", str(home / "q.csv"), "--json"]) == 0
    out = capsys.readouterr()
    assert "key: town,weekday (detected" in out.err
    got = [(r["table_id"], r["joinability"], r["mapping"]) for r in json.loads(out.out)]
    assert got == [
        (file_table_id("other.csv"), 3, {"town": "where", "weekday": "when"}),
        (file_table_id("visits.csv"), 2, {"town": "city", "weekday": "day"}),
    ]
    with open_catalog(catalog_url).connect() as conn:
        request = NaryRequest(["a", "b"], [["berlin", "mon"]], ["a", "b"], spec=XashSpec(bits=256))
        with pytest.raises(XashMismatchError):
            search_nary(CatalogSource(conn), request)

    # the settings change: the next batch re-hashes every table at 256 bits
    (home / "juncture.toml").write_text("[index]\ncells_buckets = 4\n\n[index.mate]\nbits = 256\n")
    _write(folder / "more.csv", ["d", "c"], [["tue", "paris"]])
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    assert main(["index"]) == 0
    state = LakeStore(load_settings().lake).read_arrow("mate_state").to_pylist()[0]
    assert state["full"] and json.loads(state["spec"])["bits"] == 256
    with open_catalog(catalog_url).connect() as conn:
        assert CatalogSource(conn).spec == XashSpec(bits=256)
    assert _pending(catalog_url) == []
    capsys.readouterr()
    assert main(["search", "nary", "--csv", str(home / "q.csv"), "--key", "town,weekday", "--json"]) == 0
    got = [(r["table_id"], r["joinability"]) for r in json.loads(capsys.readouterr().out)]
    assert got == [(file_table_id("other.csv"), 3), (file_table_id("visits.csv"), 2), (file_table_id("more.csv"), 1)]
    assert main(["search", "nary", "--csv", str(home / "q.csv"), "--key", "town"]) == 2

    # a table with more column choices than one table may have is left out of the ranking and named,
    # by the command (on stderr, the answers on stdout) and over HTTP
    query = ("q", ["town", "weekday", "note"], [["Berlin", "Mon", "x"], ["Paris", "Mon", "x"], ["Paris", "Tue", "y"]])
    counts = {t[0]: match_count([t], query[1], query[2], ["town", "weekday"]) for t in _lake_tables(folder)}
    other = file_table_id("other.csv")
    monkeypatch.setattr(mate_search, "MAX_TABLE_MATCHES", counts[other] - 1)
    assert max(n for t, n in counts.items() if t != other) < counts[other]
    capsys.readouterr()
    assert main(["search", "nary", "--csv", str(home / "q.csv"), "--key", "town,weekday", "--json"]) == 0
    out = capsys.readouterr()
    got = [(r["table_id"], r["joinability"]) for r in json.loads(out.out)]
    assert got == [(file_table_id("visits.csv"), 2), (file_table_id("more.csv"), 1)]
    assert f"skipped table {other!r}" in out.err and f"({counts[other]} column choices" in out.err
    client = TestClient(create_app(load_settings()))
    answer = client.post("/v1/search/nary?key=town,weekday", content=(home / "q.csv").read_bytes()).json()
    assert [(r["table_id"], r["joinability"]) for r in answer["results"]] == got
    assert answer["skipped"] == [{"table_id": other, "column_choices": counts[other]}]
    page = client.post(
        "/search", files={"file": ("q.csv", (home / "q.csv").read_bytes())}, data={"key": "town,weekday"}
    )
    section = page.text.split('id="nary-results"', 1)[1].split("</section>", 1)[0]
    assert f"Skipped table {escape(repr(other))}" in section and file_table_id("visits.csv") in section
    assert main(["search", "nary", "--csv", str(home / "missing.csv"), "--key", "a,b"]) == 2


def test_added_tables_take_a_list_over_its_bound(
    home: Path, catalog_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-list bound is on the whole lake's pairs, however a list got there: after a batch that
    only adds tables, the lists over it are exactly those the oracle's pair count puts over it,
    including lists computed before that the batch would merge into, and the others (some of them
    merged with an added table) equal the oracle's search."""
    folder = home / "files"
    tables, _ = random_lake(21, n_tables=12, key_size=2)
    for table_id, headers, rows in tables:
        _write(folder / f"{table_id}.csv", headers, rows)
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    assert main(["index"]) == 0  # every list computed: the default bound is far above this lake's
    with open_catalog(catalog_url).connect() as conn:
        listed = sorted((t, tuple(k)) for t, keys in listed_keys(conn).items() for k in keys)
    old_lake = _lake_tables(folder)
    more, _ = random_lake(22, n_tables=6, key_size=2)
    for table_id, headers, rows in more:
        _write(folder / f"new_{table_id}.csv", headers, rows)
    own = {t[0]: t for t in old_lake}

    def bounds(lake: list[Table]) -> dict[tuple[str, tuple[str, ...]], int]:
        return {(t, k): pair_bound(lake, own[t][1], own[t][2], list(k)) for t, k in listed}

    before, after = bounds(old_lake), bounds(_lake_tables(folder))
    grown = [x for x in listed if after[x] > before[x]]
    # a bound one grown list crosses in the batch while another grown list stays under it
    limit = next(
        (
            b
            for b in sorted(set(before.values()))
            if any(before[x] <= b < after[x] for x in grown) and any(after[x] <= b for x in grown)
        ),
        None,
    )
    assert limit is not None, (before, after)
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    with monkeypatch.context() as patch:
        patch.setattr(lake_lists, "MAX_LIST_PAIRS", limit)
        assert main(["index"]) == 0
    _check_lists(home, catalog_url, capsys, budgets=(limit, 10**12, 10**12))


def test_a_list_whose_bound_was_kept_high_by_deleted_tables_is_counted_again(
    home: Path, catalog_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch merges added tables into a kept list without scanning the lake: its marker's pairs
    plus the added tables' bound the lake's. That bound still counts the cells of tables deleted
    since, so a list it puts past the per-list bound is counted again over the lake: after a batch
    that deletes a table and adds others, the lists over the bound are exactly the oracle's."""
    folder = home / "files"
    tables, _ = random_lake(21, n_tables=12, key_size=2)
    for table_id, headers, rows in tables:
        _write(folder / f"{table_id}.csv", headers, rows)
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    assert main(["index"]) == 0  # every list computed, its pairs per key position kept
    old_lake = _lake_tables(folder)
    own = {t[0]: t for t in old_lake}
    with open_catalog(catalog_url).connect() as conn:
        listed = sorted((t, tuple(k)) for t, keys in listed_keys(conn).items() for k in keys)
        named = {x: {a.table_id for a in nary_joinable(conn, x[0], list(x[1]))} for x in listed}

    def pairs(lake: list[Table], x: tuple[str, tuple[str, ...]]) -> list[int]:
        return position_pairs(lake, own[x[0]][1], own[x[0]][2], list(x[1]))

    # delete the table whose cells weigh most in the lists that do not name it: those lists stay and
    # are merged with the added tables (the deleted table's own lists go with it)
    def kept(t: str) -> list[tuple[str, tuple[str, ...]]]:
        return [x for x in listed if t != x[0] and t not in named[x]]

    def fall(t: str) -> int:
        rest = [u for u in old_lake if u[0] != t]
        return sum(min(pairs(old_lake, x)) - min(pairs(rest, x)) for x in kept(t))

    gone = max(sorted(own), key=fall)
    assert fall(gone) > 0
    more, _ = random_lake(22, n_tables=6, key_size=2)
    added = [(file_table_id(f"new_{t}.csv"), h, r) for t, h, r in more]
    merged = kept(gone)
    upper = {x: min(a + b for a, b in zip(pairs(old_lake, x), pairs(added, x), strict=True)) for x in merged}
    (folder / f"{gone.removeprefix('file:')}").unlink()
    for table_id, headers, rows in more:
        _write(folder / f"new_{table_id}.csv", headers, rows)
    new_lake = _lake_tables(folder)
    exact = {x: pair_bound(new_lake, own[x[0]][1], own[x[0]][2], list(x[1])) for x in merged}
    fooled = [x for x in merged if exact[x] < upper[x]]  # the deleted table's cells still in the bound
    limit = next(
        (exact[x] for x in sorted(fooled, key=lambda x: -exact[x]) if any(exact[y] > exact[x] for y in merged)), None
    )
    assert limit is not None, (exact, upper)
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    with monkeypatch.context() as patch:
        patch.setattr(lake_lists, "MAX_LIST_PAIRS", limit)
        assert main(["index"]) == 0
    not_computed = _check_lists(home, catalog_url, capsys, budgets=(limit, 10**12, 10**12))
    assert any(upper[x] > limit >= exact[x] for x in merged) and not_computed


def test_lists_of_too_many_matches_are_not_computed(
    home: Path, catalog_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row holding a key value in several columns matches every choice of them: the lists whose
    verification would enumerate more matches than the bound are over budget, when first computed
    and after a batch that adds tables (the matches of the tables there before counted too), and
    every other list equals the oracle's search."""
    limit = 20  # this lake's lists enumerate 1 to 56 matches
    folder = home / "files"
    tables, _ = random_lake(21, n_tables=12, key_size=2)
    for table_id, headers, rows in tables:
        _write(folder / f"{table_id}.csv", headers, rows)
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    monkeypatch.setattr(lake_lists, "MAX_LIST_MATCHES", limit)
    assert main(["index"]) == 0
    with open_catalog(catalog_url).connect() as conn:
        listed = sorted((t, tuple(k)) for t, keys in listed_keys(conn).items() for k in keys)
    before_lake = _lake_tables(folder)
    own = {t[0]: t for t in before_lake}

    def matches(lake: list[Table]) -> dict[tuple[str, tuple[str, ...]], int]:
        return {(t, k): match_count([x for x in lake if x[0] != t], own[t][1], own[t][2], list(k)) for t, k in listed}

    before = matches(before_lake)
    assert any(n > limit for n in before.values()) and any(0 < n <= limit for n in before.values()), before
    _check_lists(home, catalog_url, capsys, kept_over={x for x in listed if before[x] > limit})

    # an added table repeating the first key column of a list's rows: each row matches its tuple
    # twice, taking the list just past the bound with fewer matches than the bound
    grown = max((x for x in listed if len(x[1]) == 2 and 2 <= before[x] <= limit), key=lambda x: before[x])
    _, headers, rows = own[grown[0]]
    at = [headers.index(name) for name in grown[1]]
    complete = [r for r in rows if r[at[0]] and r[at[1]]]
    n = (limit - before[grown]) // 2 + 1
    repeated = [[r[at[0]], r[at[0]], r[at[1]]] for r in (complete * n)[:n]]
    _write(folder / "repeated.csv", ["a", "a2", "b"], repeated)
    after = matches(_lake_tables(folder))
    assert after[grown] > limit >= after[grown] - before[grown], (before[grown], after[grown])
    assert main(["crawl", "--dir", str(folder), "--no-progress"]) == 0
    assert main(["index"]) == 0
    _check_lists(home, catalog_url, capsys, kept_over={x for x in listed if after[x] > limit})
