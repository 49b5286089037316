"""Union candidates bounded per table: with a tight bound and rare-header weights that every batch
shifts, the incremental lists equal a full recompute after each batch; with a bound above the lake's
size, every list equals plain-Python scoring of the table against every table it shares a header,
an embedding band or a value with."""

from __future__ import annotations

import dataclasses
import random
import shutil
from collections import Counter
from pathlib import Path

import pytest

from catalog.core.settings import IndexSettings, Settings
from spark_jobs.crawl.land import ParsedTable
from spark_jobs.lake.store import LakeStore
from spark_jobs.relate.stage import relate_all
from spark_jobs.relate.union_features import UNIONABLE_FEATURES
from spark_jobs.relate.unionable import UNIONABLE, UNIONABLE_CANDIDATES, within_pair_budget
from tests.relations.lakes import index_batch
from tests.relations.union_oracle import oracle_lists

HEADERS = ["id", "name", "city", "amount", "year", "kind", "0", "1", "2", "Total Amount", "town"]


def skewed_table(rng: random.Random, name: str) -> ParsedTable:
    """A table whose headers come from a small skewed pool (so some are shared by most tables) and
    whose values overlap with others' (so the joinable evidence varies)."""
    n_cols = rng.choice([1, 2, 2, 3, 3, 4, 6])
    headers = rng.sample(HEADERS[: rng.choice([4, 7, len(HEADERS)])], min(n_cols, 4))
    n_rows = rng.choice([0, 3, 8, 20])
    columns = []
    for h in headers:
        if h in ("amount", "Total Amount", "year", "0"):
            columns.append([f"{rng.gauss(100, 15):.0f}" for _ in range(n_rows)])
        else:
            columns.append([f"{h[:2]}{rng.randint(0, 25)}" for _ in range(n_rows)])
    return ParsedTable(table_id=f"file:skew/{name}.csv", headers=headers, columns=columns)


def gold(settings: Settings, name: str = UNIONABLE) -> list[tuple]:
    rows = LakeStore(settings.lake).read_arrow(name).to_pylist()
    return sorted(
        tuple(sorted((k, round(v, 9) if isinstance(v, float) else v) for k, v in r.items() if k != "index_version"))
        for r in rows
    )


def tight(settings: Settings) -> Settings:
    index = dataclasses.replace(
        settings.index, unionable_candidates=3, unionable_header_max_tables=6, joinable_k=5, unionable_max_pairs=12
    )
    return dataclasses.replace(settings, index=index)


@pytest.mark.slow
def test_incremental_lists_equal_a_full_recompute_under_a_tight_bound(spark, settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    settings = tight(settings)
    rng = random.Random(7)
    tables = {t.table_id: t for t in (skewed_table(rng, f"t{i:02d}") for i in range(24))}
    batches: list[tuple[list[ParsedTable], list[str]]] = [(list(tables.values()), [])]
    for step in range(2):
        ids = sorted(tables)
        changed = [dataclasses.replace(skewed_table(rng, "x"), table_id=t) for t in rng.sample(ids, 2)]
        added = [skewed_table(rng, f"n{step}{i}") for i in range(2)]
        deleted = rng.sample([t for t in ids if t not in {c.table_id for c in changed}], 2)
        batches.append(([*changed, *added], deleted))
        for t in [*changed, *added]:
            tables[t.table_id] = t
        for t in deleted:
            tables.pop(t)
    for number, (added, deleted) in enumerate(batches):
        index_batch(spark, settings, added, deleted, unionable=True)
        full = dataclasses.replace(settings, lake=str(tmp_path / f"full{number}"))
        shutil.copytree(settings.lake, full.lake)
        relate_all(spark, full)
        assert gold(settings) == gold(full), f"batch {number + 1}"
        assert gold(settings, UNIONABLE_CANDIDATES) == gold(full, UNIONABLE_CANDIDATES), f"batch {number + 1}"
        store = LakeStore(settings.lake)
        per_table: dict[str, list[str]] = {}
        for r in store.read_arrow(UNIONABLE_CANDIDATES).to_pylist():
            per_table.setdefault(r["table_id"], []).append(r["candidate_table_id"])
        assert max(len(c) for c in per_table.values()) <= 3
        widths = Counter(store.read_arrow(UNIONABLE_FEATURES, columns=["table_id"]).column("table_id").to_pylist())
        over = [t for t, c in per_table.items() if len(c) > 1 and widths[t] * sum(widths[o] for o in c) > 12]
        assert not over, f"batch {number + 1}: candidates beyond the pair budget"
    assert gold(settings), "the lake has unionable tables"


def test_with_room_for_every_candidate_lists_equal_plain_python_scoring(spark, settings) -> None:  # type: ignore[no-untyped-def]
    index = IndexSettings(cells_buckets=4, joinable_k=1000, unionable_candidates=1000, unionable_header_max_tables=1000)
    settings = dataclasses.replace(settings, index=index)
    rng = random.Random(11)
    tables = [skewed_table(rng, f"t{i:02d}") for i in range(14)]
    index_batch(spark, settings, tables, unionable=True)
    expected = [
        tuple(
            sorted(
                (k, round(v, 9) if isinstance(v, float) else v)
                for k, v in {**row, "exact": False, "method": "tus-bipartite"}.items()
            )
        )
        for row in oracle_lists(tables, settings.index.unionable_k, evidence_only=True)
    ]
    got = gold(settings)
    missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
    brief = [
        [(dict(r)["table_id"], dict(r)["rank"], dict(r)["candidate_table_id"], dict(r)["score"]) for r in rows]
        for rows in (missing, extra)
    ]
    assert not missing and not extra, brief
    assert len(expected) > 10


def test_a_wide_table_keeps_its_best_candidates_within_the_pair_budget(spark) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(5)
    widths = {f"t{i:02d}": rng.choice([1, 2, 3, 40, 500]) for i in range(30)}
    ranked = []
    for table in widths:
        others = rng.sample(sorted(set(widths) - {table}), rng.randint(1, 12))
        ranked += [(table, other, float(len(others) - r), r) for r, other in enumerate(others, start=1)]
    budget = 2_000
    expected = set()
    for table in widths:
        mine = sorted((r for r in ranked if r[0] == table), key=lambda r: r[3])
        summed = 0
        for _, other, evidence, r in mine:
            summed += widths[other]
            if r > 1 and widths[table] * summed > budget:
                break
            expected.add((table, other, evidence))
    frame = spark.createDataFrame(ranked, "table_id string, candidate_table_id string, evidence double, r int")
    sizes = spark.createDataFrame(sorted(widths.items()), "table_id string, width long")
    got = {tuple(r) for r in within_pair_budget(frame, sizes, budget).collect()}
    assert got == expected
    assert len(got) < len(ranked), "the budget cut some lists"
    assert {r[0] for r in got} == set(widths), "every table keeps its best candidate"
