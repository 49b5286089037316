"""The table score weighs each aligned column by how rarely it finds a match among the table's
candidates, and numeric columns carry distribution keys for candidate generation: the arithmetic
of both, and the ranking the weights are for (a partner sharing a rare column above tables sharing
only the columns every table has)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from spark_jobs.relate import union_score
from spark_jobs.relate.union_features import DISTRIBUTION_STEP, distribution_keys
from tests.relations.test_unionable import _random_columns


def test_a_column_matching_in_every_candidate_weighs_least() -> None:
    weights = union_score.column_weights(np.array([0.0, 5.0, 10.0]), 10)
    prior = union_score.WEIGHT_PRIOR
    assert weights.tolist() == pytest.approx([1.0, 1 - 5 / (10 + prior), 1 - 10 / (10 + prior)])
    assert weights[0] > weights[1] > weights[2] > 0.0  # the prior keeps every column some weight


def test_the_table_score_is_the_aligned_share_of_the_weight_times_the_width_ratio() -> None:
    scores = np.array([[0.9, 0.0, 0.1], [0.0, 0.8, 0.0]])
    plain = union_score.align(scores, rows_first=True)
    weighted = union_score.align(scores, rows_first=True, weights=np.array([0.5, 1.0]))
    assert [(i, j) for i, j, _ in plain.pairs] == [(0, 0), (1, 1)]  # the matching ignores the weights
    assert weighted.pairs == plain.pairs
    assert plain.score == pytest.approx((0.9 + 0.8) / 3)  # unweighted: the sum over the wider width
    assert weighted.score == pytest.approx((0.5 * 0.9 + 1.0 * 0.8) / 1.5 * 2 / 3)
    narrow = union_score.align(scores[:, :1], rows_first=True, weights=np.array([1.0, 1.0]))
    assert narrow.score == pytest.approx(0.9 / 2)


def test_an_exact_copy_scores_one_and_a_narrower_table_on_the_heavy_columns_less() -> None:
    weights = np.array([0.1, 0.95, 0.9, 0.95])
    copy = union_score.align(np.eye(4), rows_first=True, weights=weights)
    assert copy.score == pytest.approx(1.0)
    narrower = union_score.align(np.eye(4)[:, 1:], rows_first=True, weights=weights)  # the heavy three
    assert narrower.score < copy.score


def _fixed(matches: Mapping[tuple[str, str], float]) -> union_score.ColumnSignal:
    """One signal returning the given pair scores (0 elsewhere)."""

    def score(a: union_score.Columns, b: union_score.Columns, _overlap: np.ndarray) -> np.ndarray:
        return np.array([[matches.get((x, y), 0.0) for y in b.column_id] for x in a.column_id]).reshape(len(a), len(b))

    return union_score.ColumnSignal("fixed", 1.0, score)


def test_a_partner_sharing_a_rare_column_outranks_tables_sharing_only_common_ones() -> None:
    rng = np.random.default_rng(7)
    own = _random_columns(rng, "q", 3)  # q#0 "rownames", q#1 "year": every table has them; q#2 rare
    names = [f"d{i}" for i in range(8)] + ["p"]
    everyone = union_score.Columns.concat([_random_columns(rng, n, 3) for n in names])
    spans = [(n, 3 * i, 3 * i + 3) for i, n in enumerate(names)]
    matches = {("q#0", f"{n}#0"): 1.0 for n in names}
    matches |= {("q#1", f"d{i}#1"): 1.0 for i in range(8)}
    matches[("q#2", "p#2")] = 0.95
    overlap = np.zeros((3, len(everyone)))
    ranked = union_score.rank_spans("q", own, everyone, spans, overlap, 3, [_fixed(matches)])
    assert ranked[0]["candidate_table_id"] == "p"
    # with every column counting alike the common columns would win: 2/3 against 1.95/3
    scores = _fixed(matches).score(own, everyone, overlap)
    plain = {n: union_score.align(scores[:, lo:hi], rows_first=True).score for n, lo, hi in spans}
    assert plain["d0"] > plain["p"]


def test_near_distributions_share_a_distribution_key_and_far_ones_none() -> None:
    rng = np.random.default_rng(11)
    scaled = rng.uniform(-40, 40, size=500)  # sign * log2(1 + |mean|) / step
    mean = np.sign(scaled) * (2.0 ** (np.abs(scaled) * DISTRIBUTION_STEP) - 1.0)
    near = np.sign(scaled + 0.4) * (2.0 ** (np.abs(scaled + 0.4) * DISTRIBUTION_STEP) - 1.0)
    std = np.full(len(mean), 3.0)
    a, b = distribution_keys(mean, std).to_pylist(), distribution_keys(near, std).to_pylist()
    assert all(len(k) == 2 and k[0].startswith("#") for k in a)
    assert all(set(x) & set(y) for x, y in zip(a, b, strict=True))  # within half a bin: one grid holds both
    far = distribution_keys(mean * 8.0 + np.sign(mean) * 7.0, std).to_pylist()  # 3 in log2, 6 bins away
    assert not any(set(x) & set(y) for x, y in zip(a, far, strict=True))


def test_a_missing_mean_has_no_distribution_key_and_zero_has_one_sign() -> None:
    keys = distribution_keys(np.array([np.nan, 0.0, -0.0]), np.array([1.0, np.nan, 0.0])).to_pylist()
    assert keys[0] == []
    assert keys[1] == keys[2] and all("-" not in k for k in keys[1])


def test_taking_columns_keeps_every_field_of_the_rows_taken() -> None:
    rng = np.random.default_rng(8)
    columns = _random_columns(rng, "t", 30)
    rows = rng.integers(0, 30, size=50)  # repeats and any order
    taken = columns.take(rows)
    for name in union_score.Columns.__dataclass_fields__:
        got, full = getattr(taken, name), getattr(columns, name)
        if name in ("words", "grams", "shapes"):
            np.testing.assert_array_equal(got.toarray(), full.toarray()[rows])
        else:
            np.testing.assert_array_equal(got, full[rows])
    assert len(columns.take(np.zeros(0, np.int64))) == 0
