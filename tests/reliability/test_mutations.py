"""After any sequence of incremental updates the catalog answers exactly what the files say.

A folder lake is crawled and indexed with the `juncture` CLI; then, round after round, files are
deleted, truncated (to fewer rows, to a header, to zero bytes), appended to, copied, renamed and
re-encoded, and the folder is recrawled and indexed. After every round every lookup (tables,
columns, profiles, keys, joinable, unionable membership) and `search join` with every method equals
the brute-force oracle computed from the files, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.reliability import lake_files as lf
from tests.reliability.answers import assert_matches, catalog_answers, crawl_and_index, setup_env

# Four crawl+index rounds with Spark on a shared 2-core machine: the default timeout is too short.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

Round = Callable[[Path], None]


def round_1(root: Path) -> None:
    lf.delete(root, "misc/tiny.csv")
    lf.truncate(root, "people/visits.csv", 20)
    lf.append_rows(root, "orders/orders_eu.tsv", [["1090", "17", "open"], ["1092", "18.0", "Zürich"]])
    lf.copy(root, "geo/countries.tsv", "geo/countries_backup.tsv")
    lf.rename(root, "orders/skus.csv", "catalogue/skus.csv")
    lf.reencode(root, "misc/one_column.csv", "utf-16")


def round_2(root: Path) -> None:
    lf.truncate(root, "misc/numbers.csv", -1)  # zero bytes: a failed dataset keeps its last good version
    lf.append_rows(root, "geo/countries_backup.tsv", [["XX", "Country XX", "no"]])
    lf.reencode(root, "geo/cities_copy.csv", "utf-8-sig")
    lf.delete(root, "people/persons.csv")  # the big table
    lf.copy(root, "misc/ids_subset.csv", "people/persons_ids.csv")
    lf.truncate(root, "orders/items.csv", 0)  # header only
    lf.rename(root, "people/visits_2023.csv.gz", "archive/visits_2023.csv.gz")


def round_3(root: Path) -> None:
    lf.replace_table(root, "misc/numbers.csv", ["n", "n_float"], [[str(i), f"{i}.0"] for i in range(30, 70)])
    lf.rename(root, "catalogue/skus.csv", "orders/skus.csv")
    lf.append_rows(root, "misc/wide.csv", [[str(j % 10) for j in range(26)]])
    lf.reencode(root, "misc/latin.csv", "latin-1")  # last: no BOM, so the crawler must detect it


ROUNDS: list[Round] = [round_1, round_2, round_3]


def test_every_answer_equals_the_files_after_every_round(spark, tmp_path, monkeypatch, catalog_url):  # type: ignore[no-untyped-def]
    setup_env(monkeypatch, tmp_path / "home", catalog_url)
    root = tmp_path / "lake_src"
    lf.build_lake(root)
    oracle = lf.LakeOracle(root).observe()
    assert len(oracle.tables) >= 15
    crawl_and_index(root)
    assert_matches(catalog_answers(oracle, tmp_path), oracle, "after the first crawl")
    for n, mutate in enumerate(ROUNDS, start=1):
        mutate(root)
        oracle.observe()
        crawl_and_index(root)
        assert_matches(catalog_answers(oracle, tmp_path), oracle, f"after round {n}")
