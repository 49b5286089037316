"""Unionable answers on a crafted lake: the true partners (same rows split, columns renamed or
reordered) rank first, above a decoy with the same headers but different values."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from spark_jobs.lake.store import LakeStore
from spark_jobs.relate import union_score
from spark_jobs.relate import unionable as relate_unionable
from tests.relations.lakes import crafted_lake, index_batch


def _gold(settings) -> dict[str, list[dict]]:  # type: ignore[no-untyped-def]
    rows = LakeStore(settings.lake).read_arrow(relate_unionable.UNIONABLE).to_pylist()
    out: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (r["table_id"], r["rank"])):
        out.setdefault(r["table_id"], []).append(r)
    return out


def test_true_partners_rank_first_with_the_right_alignment(spark, settings):
    tables, expected = crafted_lake()
    first, second, decoy = (t.table_id for t in tables[:3])
    index_batch(spark, settings, tables, unionable=True)
    gold = _gold(settings)
    assert gold[first][0]["candidate_table_id"] == second
    assert gold[second][0]["candidate_table_id"] == first
    ranked = [r["candidate_table_id"] for r in gold[first]]
    if decoy in ranked:
        score = {r["candidate_table_id"]: r["score"] for r in gold[first]}
        assert score[second] > score[decoy]
    alignment = json.loads(gold[first][0]["alignment"])
    pairs = {p["column"]: p["candidate_column"] for p in alignment}
    assert {h: pairs.get(h) for h in ("city", "kind")} == {"city": "town", "kind": "category"}
    for h, other in pairs.items():
        assert expected[h] == other
    back = {p["column"]: p["candidate_column"] for p in json.loads(gold[second][0]["alignment"])}
    assert back == {v: k for k, v in pairs.items()}


def test_deleting_a_partner_removes_it_from_every_list(spark, settings):
    tables, _ = crafted_lake()
    index_batch(spark, settings, tables, unionable=True)
    index_batch(spark, settings, [], [tables[1].table_id], unionable=True)
    gold = _gold(settings)
    assert tables[1].table_id not in gold
    assert all(r["candidate_table_id"] != tables[1].table_id for rows in gold.values() for r in rows)
    full = LakeStore(settings.lake)
    assert full.exists(relate_unionable.UNIONABLE)


def test_column_pair_signals_are_bounded_and_open_to_new_signals():
    a = {
        "column_id": "t#a",
        "header": "Total Amount",
        "type": "decimal",
        "size": 10,
        "numeric": True,
        "mean": 100.0,
        "std": 10.0,
    }
    b = {
        "column_id": "u#b",
        "header": "amount",
        "type": "integer",
        "size": 5,
        "numeric": True,
        "mean": 100.0,
        "std": 10.0,
    }
    score, parts = union_score.column_pair_score(a, b, 5.0)
    assert parts["value"] == 1.0 and parts["distribution"] == 1.0 and parts["type"] == 0.8
    assert 0.0 <= score <= 1.0
    zero = union_score.ColumnSignal("always_zero", 10.0, lambda a, b, _o: np.zeros((len(a), len(b))))
    lower, parts2 = union_score.column_pair_score(a, b, 5.0, [*union_score.SIGNALS, zero])
    assert parts2["always_zero"] == 0.0 and lower < score


def _random_columns(rng: np.random.Generator, table: str, n: int) -> union_score.Columns:
    headers = ["city", "town", "amount", "total amount", "year", "kind", "category", "id"]
    records = []
    for i in range(n):
        numeric = bool(rng.random() < 0.5)
        vector = rng.normal(size=union_score.DIMENSION)
        records.append(
            {
                "column_id": f"{table}#{i}",
                "header": f"{headers[int(rng.integers(len(headers)))]} {i % 3}",
                "type": "decimal" if numeric else "text",
                "size": int(rng.integers(1, 50)),
                "numeric": numeric,
                "mean": float(rng.normal(100, 20)) if numeric else None,
                "std": float(rng.uniform(1, 20)) if numeric else None,
                "shapes": [{"shape": "9.9" if numeric else "a", "share": float(rng.uniform(0.3, 1))}],
                "embedding": (vector / np.linalg.norm(vector)).tolist(),
                "quantiles": np.sort(rng.normal(100, 20, union_score.QUANTILES)).tolist() if numeric else None,
            }
        )
    return union_score.Columns.from_records(records)


def test_wide_tables_rank_alike_when_scored_in_small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    own = _random_columns(rng, "t", 9)
    widths = [int(w) for w in rng.integers(1, 8, size=12)]
    everyone = union_score.Columns.concat([_random_columns(rng, f"c{i:02d}", w) for i, w in enumerate(widths)])
    bounds = np.r_[0, np.cumsum(widths)]
    spans = [(f"c{i:02d}", int(lo), int(hi)) for i, (lo, hi) in enumerate(itertools.pairwise(bounds))]
    overlap = rng.integers(0, 5, size=(len(own), len(everyone))).astype(float)
    whole = union_score.rank_spans("t", own, everyone, spans, overlap, 5)
    monkeypatch.setattr(union_score, "MAX_CELLS", 10)  # one candidate per run, one own column per block
    blocks = union_score.rank_spans("t", own, everyone, spans, overlap, 5)
    assert len(whole) == 5
    assert blocks == whole


@pytest.mark.parametrize("max_cells", [1 << 22, 10, 60])
def test_a_short_list_is_the_head_of_the_whole_ranking(monkeypatch: pytest.MonkeyPatch, max_cells: int) -> None:
    """Candidates whose score bound is under the k-th best are never matched (and a run of them is
    not scored again): the top k must still be exactly the head of every candidate ranked."""
    monkeypatch.setattr(union_score, "MAX_CELLS", max_cells)
    for seed in range(6):
        rng = np.random.default_rng(seed)
        own = _random_columns(rng, "t", int(rng.integers(1, 9)))
        widths = [int(w) for w in rng.integers(1, 8, size=int(rng.integers(3, 20)))]
        everyone = union_score.Columns.concat([_random_columns(rng, f"c{i:02d}", w) for i, w in enumerate(widths)])
        bounds = np.r_[0, np.cumsum(widths)]
        spans = [(f"c{i:02d}", int(lo), int(hi)) for i, (lo, hi) in enumerate(itertools.pairwise(bounds))]
        overlap = rng.integers(0, 5, size=(len(own), len(everyone))).astype(float)
        whole = union_score.rank_spans("t", own, everyone, spans, overlap, len(spans))
        for k in (1, 3, 5):
            short = union_score.rank_spans("t", own, everyone, spans, overlap, k)
            assert short == whole[:k]
