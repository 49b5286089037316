"""Driving Juncture the way a user does (the `juncture` CLI in-process, the HTTP API) and comparing
every answer it gives with the oracle of `lake_files`.

`Answers` is everything the catalog says about a lake: tables, columns, profiles, keys, joinable
and unionable lists, and `search join` with every method. Ids of versions and batches and publish
times are left out, so that two catalogs built by different histories of the same files can be
compared with `==`.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi.testclient import TestClient

from catalog.api.app import create_app
from catalog.cli.main import build_parser, main
from catalog.core.identity import normalize_token
from catalog.core.settings import load_settings
from catalog.search.family import join_methods
from tests.mate import lake as nary_oracle
from tests.profile import oracle as profile_oracle
from tests.reliability import lake_files as lf
from tests.reliability.lake_files import JOINABLE_K, LakeOracle

VOLATILE = frozenset({"batch_id", "index_version", "published_at", "source_updated_at"})
PROFILE_FIELDS = (
    "row_count",
    "null_count",
    "empty_count",
    "distinct_count",
    "uniqueness",
    "token_count",
    "length_min",
    "length_max",
    "length_mean",
    "inferred_type",
    "type_share",
    "min_value",
    "max_value",
)
UNIONABLE_K = 10
SEARCH_K = (3, 10)


@dataclass(frozen=True)
class Run:
    """One `juncture` command run in-process: exit status and what it printed."""

    rc: int
    out: str
    err: str


def juncture(*argv: str) -> Run:
    """Run `juncture ARGV` in this process (settings from the environment and cwd, as a user's shell)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return Run(rc, out.getvalue(), err.getvalue())


def ok(*argv: str) -> Run:
    run = juncture(*argv)
    assert run.rc == 0, (argv, run.rc, run.err[-2000:])
    return run


def search_methods() -> list[str]:
    """Every `--method` the CLI offers for `search join` (a new method is compared automatically)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["search"]
    join = next(a for a in sub._actions if a.dest == "search_command").choices["join"]
    return list(next(a for a in join._actions if a.dest == "method").choices)


def _strip(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    if isinstance(obj, float):
        return round(obj, 9)
    return obj


def _all_pages(client: TestClient, path: str, **params: Any) -> list[Any]:
    items: list[Any] = []
    offset: int | None = 0
    while offset is not None:
        response = client.get(path, params={**params, "offset": offset})
        assert response.status_code == 200, (path, response.status_code, response.text[:500])
        page = response.json()
        items.extend(page["items"])
        offset = page["next_offset"]
    return items


def queries(oracle: LakeOracle) -> dict[str, tuple[list[str], str | None]]:
    """Search queries: a few lake columns (excluding themselves) and two value lists from outside the
    lake, in raw spellings the normalization must fold."""
    values = oracle.column_values()
    picked = [c for c in sorted(values) if c.rsplit("#", 1)[1] in ("city", "person_id", "order_id", "sku", "ville")]
    out: dict[str, tuple[list[str], str | None]] = {
        f"column {c}": ([v for v in values[c] if v is not None], c) for c in picked[:6]
    }
    out["mixed spellings"] = ([" ZÜRICH ", "oslo", "SKU-007", "1010.0", "NA", "", "Cork", "P0001", "ch", "de"], None)
    out["nothing shared"] = (["no such value", "zzz"], None)
    return out


def search_answers(oracle: LakeOracle, workdir: Path) -> dict[str, Any]:
    """`juncture search join --json` for every query, k and method: {(query, k, method): [(column_id, overlap)]}."""
    out: dict[str, Any] = {}
    for name, (values, exclude) in queries(oracle).items():
        path = workdir / "query.txt"
        path.write_text("\n".join(values) + "\n", encoding="utf-8")
        for k in SEARCH_K:
            for method in search_methods():
                argv = ["search", "join", "--values", str(path), "--k", str(k), "--method", method, "--json"]
                if exclude:
                    argv += ["--exclude", exclude]
                run = juncture(*argv)
                if run.rc == 2 and "not available" in run.err:  # a method announced but not built yet
                    out[f"{name} k={k} {method}"] = "not available"
                    continue
                assert run.rc == 0, (argv, run.err)
                out[f"{name} k={k} {method}"] = [(r["column_id"], r["overlap"]) for r in json.loads(run.out)]
    return out


def catalog_tables() -> dict[str, Any]:
    """table_id -> the catalog's record of it (`GET /v1/tables`, every page)."""
    with TestClient(create_app(load_settings())) as client:
        return {t["table_id"]: _strip(t) for t in _all_pages(client, "/v1/tables", limit=1000)}


def catalog_answers(oracle: LakeOracle, workdir: Path) -> dict[str, Any]:
    """Everything the catalog answers about the tables and columns the oracle knows, plus those it
    lists itself (a table the catalog holds but the files do not is caught by the listing)."""
    settings = load_settings()
    answers: dict[str, Any] = {}
    with TestClient(create_app(settings)) as client:
        tables = _all_pages(client, "/v1/tables", limit=1000)
        answers["tables"] = {t["table_id"]: _strip(t) for t in tables}
        table_ids = sorted(set(answers["tables"]) | set(oracle.tables))
        for tid in table_ids:
            path = quote(tid, safe="")
            response = client.get(f"/v1/columns/{path}", params={"limit": 1000})
            answers[f"columns {tid}"] = (
                response.status_code
                if response.status_code != 200
                else [(c["column_id"], c["column"], c["position"]) for c in response.json()["items"]]
            )
            response = client.get(f"/v1/keys/{path}")
            answers[f"keys {tid}"] = (
                response.status_code
                if response.status_code != 200
                else sorted((tuple(k["columns"]), k["exact"]) for k in response.json())
            )
            answers[f"unionable {tid}"] = (
                _strip(_all_pages(client, f"/v1/unionable/{path}", k=UNIONABLE_K)) if tid in answers["tables"] else None
            )
        column_ids = sorted(
            set(oracle.column_values())
            | {
                c[0]
                for key, cols in answers.items()
                if key.startswith("columns ") and isinstance(cols, list)
                for c in cols
            }
        )
        for cid in column_ids:
            path = quote(cid, safe="")
            response = client.get(f"/v1/profile/{path}")
            answers[f"profile {cid}"] = response.status_code if response.status_code != 200 else _strip(response.json())
            response = client.get(f"/v1/joinable/{path}", params={"k": JOINABLE_K})
            answers[f"joinable {cid}"] = (
                response.status_code
                if response.status_code != 200
                else _strip(_all_pages(client, f"/v1/joinable/{path}", k=JOINABLE_K))
            )
    answers["search"] = search_answers(oracle, workdir)
    answers["nary"] = nary_answers(workdir)
    return answers


NARY_HEADERS = ["city", "country"]
NARY_KEY = ["city", "country"]
NARY_ROWS: list[list[str | None]] = [[c, lf.COUNTRIES[i]] for i, c in enumerate(lf.CITIES)] + [
    [c, lf.COUNTRIES[(i + 1) % len(lf.COUNTRIES)]] for i, c in enumerate(lf.CITIES[:5])
]


def nary_answers(workdir: Path) -> list[Any]:
    """`juncture search nary --json` for (city, country) pairs: [(table_id, joinability, mapping)]."""
    path = workdir / "nary.csv"
    path.write_text(
        "\n".join(",".join(f'"{v}"' for v in r) for r in [NARY_HEADERS, *NARY_ROWS]) + "\n", encoding="utf-8"
    )
    run = juncture("search", "nary", "--csv", str(path), "--key", ",".join(NARY_KEY), "--k", "5", "--json")
    assert run.rc == 0, run.err
    return [(r["table_id"], r["joinability"], r["mapping"]) for r in json.loads(run.out)]


def nary_oracle_answers(oracle: LakeOracle) -> list[Any]:
    tables = [
        (tid, oracle.headers(tid), [list(r) for r in zip(*t.columns, strict=True)])
        for tid, t in sorted(oracle.tables.items())
    ]
    return nary_oracle.oracle(tables, NARY_HEADERS, NARY_ROWS, NARY_KEY, 5)


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    return bool(a == b)


def mismatches(answers: dict[str, Any], oracle: LakeOracle) -> list[str]:
    """Every way the catalog's answers differ from the oracle's (empty: they agree)."""
    bad: list[str] = []

    def expect(what: str, got: Any, want: Any) -> None:
        same = got == want if isinstance(want, (list, dict, tuple)) else _close(got, want)
        if not same:
            bad.append(f"{what}: catalog {got!r} != files {want!r}")

    expect("table ids", sorted(answers["tables"]), sorted(oracle.tables))
    for tid, t in oracle.tables.items():
        info = answers["tables"].get(tid)
        if info is None:
            continue
        expect(f"{tid} n_rows", info["n_rows"], t.n_rows)
        expect(f"{tid} n_columns", info["n_columns"], len(t.headers))
        expect(
            f"{tid} columns",
            answers[f"columns {tid}"],
            [(f"{tid}#{h}", h, pos) for pos, h in enumerate(oracle.headers(tid), start=1)],
        )
        expect(f"{tid} keys", answers[f"keys {tid}"], sorted(_oracle_keys(oracle, tid)))
        _check_unionable(answers, oracle, tid, bad)
    profiles = oracle.profiles()
    for cid, want in profiles.items():
        got = answers.get(f"profile {cid}")
        if not isinstance(got, dict):
            bad.append(f"profile {cid}: catalog answered {got!r}")
            continue
        for name in PROFILE_FIELDS:
            expect(f"profile {cid} {name}", got[name], want[name])
    for cid, want_list in oracle.joinable().items():
        got_list = answers.get(f"joinable {cid}")
        if not isinstance(got_list, list):
            bad.append(f"joinable {cid}: catalog answered {got_list!r}")
            continue
        got_pairs = [(a["column_id"], a["overlap"]) for a in got_list]
        want_pairs = [(a["column_id"], a["overlap"]) for a in want_list]
        if got_pairs != want_pairs:  # the measures of misaligned lists would only repeat this
            expect(f"joinable {cid} candidates", got_pairs, want_pairs)
            continue
        for got, want in zip(got_list, want_list, strict=True):
            for name, value in want.items():
                expect(f"joinable {cid} -> {want['column_id']} {name}", got[name], value)
    for name, (values, exclude) in queries(oracle).items():
        for k in SEARCH_K:
            want = oracle.top_k(values, k, exclude=exclude)
            for key, got in answers["search"].items():
                method = key.rpartition(" ")[2]
                exact = join_methods()[method].exact  # an approximate method is only compared across runs
                if key.startswith(f"{name} k={k} ") and got != "not available" and exact:
                    expect(f"search {key}", got, want)
    expect("search nary", answers["nary"], nary_oracle_answers(oracle))
    return bad


def _oracle_keys(oracle: LakeOracle, tid: str) -> list[tuple[tuple[str, ...], bool]]:
    return list(profile_oracle.keys(oracle.tables[tid]))


def _check_unionable(answers: dict[str, Any], oracle: LakeOracle, tid: str, bad: list[str]) -> None:
    """Unionable scores have no plain-Python oracle here; what the files do decide: every answer is
    a live table other than the query, its alignment pairs a column of each side, and a table's
    exact twins (same headers and rows) are all among its answers, each aligning every column."""
    got = answers.get(f"unionable {tid}") or []
    mine = {f"{tid}#{h}" for h in oracle.headers(tid)}
    for a in got:
        other = a["table_id"]
        if other == tid or other not in oracle.tables:
            bad.append(f"unionable {tid}: answer {other} is not another live table")
            continue
        theirs = {f"{other}#{h}" for h in oracle.headers(other)}
        for pair in a["alignment"]:
            if pair["column_id"] not in mine or pair["candidate_column_id"] not in theirs:
                bad.append(
                    f"unionable {tid} -> {other}: alignment {pair['column_id']} = "
                    f"{pair['candidate_column_id']} names a column that does not exist"
                )
    if oracle.tables[tid].n_rows == 0 or not any(normalize_token(v) for col in oracle.tables[tid].columns for v in col):
        return
    listed = {a["table_id"]: a for a in got}
    for twin in sorted(oracle.twins().get(tid, ())):
        if twin not in listed:
            bad.append(f"unionable {tid}: its exact twin {twin} is missing")


def assert_matches(answers: dict[str, Any], oracle: LakeOracle, when: str) -> None:
    bad = mismatches(answers, oracle)
    assert not bad, f"{when}: {len(bad)} answers differ from the files, e.g.\n" + "\n".join(bad[:40])


def setup_env(monkeypatch: Any, home: Path, catalog_url: str, extra: dict[str, str] | None = None) -> None:
    """The environment of a user's shell: settings from JUNCTURE_* variables only, cwd = `home`."""
    for var in [v for v in os.environ if v.startswith("JUNCTURE_")]:
        monkeypatch.delenv(var)
    home.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(home)
    monkeypatch.setenv("JUNCTURE_HOME", str(home))
    monkeypatch.setenv("JUNCTURE_CATALOG_URL", catalog_url)
    for k, v in (extra or {}).items():
        monkeypatch.setenv(k, v)


def crawl_and_index(root: Path) -> Sequence[Run]:
    return [ok("crawl", "--dir", str(root), "--no-progress"), ok("index")]
