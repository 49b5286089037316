"""(b, r) tuning: the precomputed table against brute force with adaptive quadrature, and its shape."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import quad

from catalog.search.lshensemble.tuning import band_table

QUERY_SIZE = 10**6  # large, so integer upper bounds hit a grid ratio to within rounding


def candidate_probability(t: float, ratio: float, b: int, r: int) -> float:
    s = t / (ratio + 1.0 - t)
    return 1.0 - (1.0 - s**r) ** b


def objective(ratio: float, threshold: float, b: int, r: int, fp_weight: float = 0.5, fn_weight: float = 0.5) -> float:
    """fp_weight·FP + fn_weight·FN of thesis §2.4.7, by scipy's adaptive quadrature."""
    fp = quad(candidate_probability, 0.0, min(threshold, ratio), args=(ratio, b, r), limit=200)[0]
    fn = 0.0
    if ratio >= threshold:
        fn = quad(lambda t: 1.0 - candidate_probability(t, ratio, b, r), threshold, min(1.0, ratio), limit=200)[0]
    return fp_weight * fp + fn_weight * fn


@pytest.mark.parametrize(
    ("num_perm", "ratio_index", "threshold", "fp_weight", "fn_weight"),
    [
        (64, 20, 0.5, 0.5, 0.5),  # x/q ~ 1e-3: no set can reach t*
        (64, 76, 0.3, 0.5, 0.5),  # x/q just below 1
        (64, 77, 0.5, 0.5, 0.5),  # x/q just above 1
        (64, 77, 0.9, 0.5, 0.5),
        (64, 90, 0.8, 0.5, 0.5),  # x/q ~ 5
        (64, 110, 0.5, 0.5, 0.5),  # x/q ~ 60
        (64, 130, 0.3, 0.5, 0.5),  # x/q ~ 900
        (64, 100, 0.6, 0.2, 0.8),  # a heavier false-negative weight
        (256, 70, 0.4, 0.5, 0.5),  # the default budget, x/q ~ 0.5
        (256, 95, 0.7, 0.5, 0.5),  # x/q ~ 9
    ],
)
def test_choice_matches_brute_force_quadrature(
    num_perm: int, ratio_index: int, threshold: float, fp_weight: float, fn_weight: float
) -> None:
    max_r = 4
    table = band_table(num_perm, max_r, fp_weight, fn_weight)
    ratio = math.exp(table.log_ratios[ratio_index])
    upper = round(ratio * QUERY_SIZE)
    b, r = table.choose(np.array([upper]), QUERY_SIZE, threshold)
    values = {
        (bands, rows): objective(ratio, threshold, bands, rows, fp_weight, fn_weight)
        for rows in range(1, max_r + 1)
        for bands in range(1, num_perm // rows + 1)
    }
    best = min(values.values())
    assert values[(int(b[0]), int(r[0]))] <= best * (1 + 1e-3) + 1e-12


def test_choice_respects_the_budget() -> None:
    table = band_table(256, 4)
    assert table.b.dtype == np.int32 and table.r.dtype == np.int32
    assert table.b.shape == table.r.shape == (len(table.log_ratios), len(table.thresholds))
    assert ((table.r >= 1) & (table.r <= 4)).all()
    assert (table.b >= 1).all()
    assert (table.b * table.r <= 256).all()
    uppers = np.array([1, 10, 1_000, 10**5, 10**7, 10**10])
    for threshold in (0.01, 0.33, 0.5, 0.9, 1.0):
        b, r = table.choose(uppers, 100, threshold)
        assert b.shape == r.shape == uppers.shape
        assert ((r >= 1) & (r <= 4) & (b >= 1) & (b * r <= 256)).all()


def test_larger_partitions_never_get_a_higher_effective_jaccard_threshold() -> None:
    table = band_table(256, 4)
    effective = (1.0 / table.b) ** (1.0 / table.r)  # where P = 1 - (1 - s^r)^b is steepest, roughly
    moderate = table.thresholds <= 0.75  # above, FP dominates and the optimum jumps to one band
    assert (np.diff(effective[:, moderate], axis=0) <= 1e-12).all()
    # Far above the query the translated threshold is ~0: the most permissive parameters win.
    b, r = table.choose(np.array([10**9]), 100, 0.5)
    assert (int(b[0]), int(r[0])) == (256, 1)


def test_choose_snaps_ratios_and_clamps_them_to_the_grid_ends() -> None:
    table = band_table(256, 4)
    j = 49  # t* = 0.5
    assert table.thresholds[j] == pytest.approx(0.5)
    b, r = table.choose(np.array([1, 10**12]), 10**6, 0.5)  # ratios 1e-6 and 1e6
    assert (b[0], r[0]) == (table.b[0, j], table.r[0, j])
    assert (b[1], r[1]) == (table.b[-1, j], table.r[-1, j])
    i = 120
    upper = round(math.exp(table.log_ratios[i]) * 1.03 * QUERY_SIZE)  # 3% off a grid point
    b, r = table.choose(np.array([upper]), QUERY_SIZE, 0.504)  # snaps to t* = 0.50
    assert (b[0], r[0]) == (table.b[i, j], table.r[i, j])
    b, r = table.choose(np.array([], dtype=np.int64), QUERY_SIZE, 0.5)
    assert len(b) == len(r) == 0


@pytest.mark.parametrize("threshold", [0.0, -0.1, 1.01, float("nan")])
def test_thresholds_out_of_range_raise(threshold: float) -> None:
    with pytest.raises(ValueError, match="threshold"):
        band_table().choose(np.array([10]), 5, threshold)


def test_bad_query_size_and_parameters_raise() -> None:
    with pytest.raises(ValueError, match="query_size"):
        band_table().choose(np.array([10]), 0, 0.5)
    with pytest.raises(ValueError, match="max_r"):
        band_table(16, 32)
    with pytest.raises(ValueError, match="both be 0"):
        band_table(256, 4, 0.0, 0.0)


def test_table_is_cached_and_read_only() -> None:
    table = band_table(256, 4)
    assert band_table(256, 4) is table
    with pytest.raises(ValueError):
        table.b[0, 0] = 7
