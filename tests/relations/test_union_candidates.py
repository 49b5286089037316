"""Union candidates bounded per table: with a tight bound and rare-header weights that every batch
shifts, the incremental lists equal a full recompute after each batch; with a bound above the lake's
size, every list equals plain-Python scoring of the table against every table it shares a header or
a value with."""

from __future__ import annotations

import dataclasses
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from catalog.core.identity import column_headers, normalize_token
from catalog.core.settings import IndexSettings, Settings
from spark_jobs.crawl.land import ParsedTable
from spark_jobs.lake.store import LakeStore
from spark_jobs.relate import union_score
from spark_jobs.relate.stage import relate_all
from spark_jobs.relate.unionable import UNIONABLE, UNIONABLE_CANDIDATES
from tests.relations.lakes import column_sets, index_batch

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
    index = dataclasses.replace(settings.index, unionable_candidates=3, unionable_header_max_tables=6, joinable_k=5)
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
        listed = LakeStore(settings.lake).read_arrow(UNIONABLE_CANDIDATES).to_pylist()
        per_table: dict[str, int] = {}
        for r in listed:
            per_table[r["table_id"]] = per_table.get(r["table_id"], 0) + 1
        assert max(per_table.values()) <= 3
    assert gold(settings), "the lake has unionable tables"


def _features(table: ParsedTable) -> list[dict[str, Any]]:
    """The columns' union features computed from the raw values (the oracle's own arithmetic)."""
    out = []
    for position, (header, values) in enumerate(zip(column_headers(list(table.headers)), table.columns, strict=True)):
        counts: dict[str, int] = {}
        for v in values:
            token = normalize_token(v)
            if token is not None:
                counts[token] = counts.get(token, 0) + 1
        if not counts:
            continue
        numbers = {t: float(t) for t in counts if _is_number(t)}
        n_all = sum(counts.values())
        n_num = sum(counts[t] for t in numbers)
        mean = sum(x * counts[t] for t, x in numbers.items()) / n_num if n_num else None
        var = (
            max(sum(x * x * counts[t] for t, x in numbers.items()) / n_num - mean * mean, 0.0)
            if n_num and mean is not None
            else None
        )
        numeric = n_num / n_all >= 0.9
        out.append(
            {
                "column_id": f"{table.table_id}#{header}",
                "header": header,
                "position": position + 1,
                "size": len(counts),
                "numeric": numeric,
                "mean": mean,
                "std": None if var is None else var**0.5,
                "type": "numeric" if numeric else "text",
            }
        )
    return out


def _is_number(token: str) -> bool:
    try:
        x = float(token)
    except ValueError:
        return False
    return x == x and abs(x) < 1e300


def _norm(header: str) -> str:
    return "".join(c for c in header if c.isascii() and c.isalnum()).lower()


def test_with_room_for_every_candidate_lists_equal_plain_python_scoring(spark, settings) -> None:  # type: ignore[no-untyped-def]
    index = IndexSettings(cells_buckets=4, joinable_k=1000, unionable_candidates=1000, unionable_header_max_tables=1000)
    settings = dataclasses.replace(settings, index=index)
    rng = random.Random(11)
    tables = [skewed_table(rng, f"t{i:02d}") for i in range(14)]
    index_batch(spark, settings, tables, unionable=True)
    sets = column_sets(tables)
    features = {t.table_id: _features(t) for t in tables}
    headers = {t.table_id: {_norm(h) for h in t.headers} - {""} for t in tables}
    expected = []
    for t in tables:
        own = union_score.Columns.from_records(features[t.table_id])
        candidates = []
        for other in tables:
            if other.table_id == t.table_id or not features[other.table_id]:
                continue
            overlap = np.array(
                [
                    [len(sets[a["column_id"]] & sets[b["column_id"]]) for b in features[other.table_id]]
                    for a in features[t.table_id]
                ],
                dtype=float,
            ).reshape(len(features[t.table_id]), len(features[other.table_id]))
            if not (headers[t.table_id] & headers[other.table_id]) and not overlap.any():
                continue  # no evidence: not a candidate
            candidates.append(
                union_score.Candidate(
                    other.table_id, union_score.Columns.from_records(features[other.table_id]), overlap
                )
            )
        for row in union_score.rank_candidates(t.table_id, own, candidates, settings.index.unionable_k):
            expected.append(
                tuple(
                    sorted(
                        (k, round(v, 9) if isinstance(v, float) else v)
                        for k, v in {**row, "exact": False, "method": "tus-bipartite"}.items()
                    )
                )
            )
    got = gold(settings)
    missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
    brief = [
        [(dict(r)["table_id"], dict(r)["rank"], dict(r)["candidate_table_id"], dict(r)["score"]) for r in rows]
        for rows in (missing, extra)
    ]
    assert not missing and not extra, brief
    assert len(expected) > 10
