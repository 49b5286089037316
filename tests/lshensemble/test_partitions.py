"""Size partitions: the cost bound, the dynamic programme against exhaustive search, equi-depth, raising."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.search.lshensemble.partitions import (
    cost,
    equi_depth_uppers,
    histogram,
    optimal_uppers,
    partition_of,
    raised,
)

THESIS_SIZES = np.array([3, 3, 3, 3, 4, 4, 4, 4, 99, 99, 99, 100, 100, 100])  # thesis Example 2.4.1


def exhaustive_best_cost(sizes: np.ndarray, counts: np.ndarray, n_partitions: int) -> float:
    """The least cost over every choice of at most n bounds among the sizes (the last one is the max)."""
    inner = sizes[:-1]
    return min(
        cost(sizes, counts, np.append(np.array(chosen, dtype=np.int64), sizes[-1]))
        for k in range(min(n_partitions, len(sizes)))
        for chosen in itertools.combinations(inner, k)
    )


def assert_valid_cover(uppers: np.ndarray, sizes: np.ndarray, n_partitions: int) -> None:
    assert 1 <= len(uppers) <= n_partitions
    assert np.all(np.diff(uppers) > 0)
    assert uppers[-1] == sizes.max()
    assert np.isin(uppers, sizes).all()
    assert np.all(partition_of(sizes, uppers) < len(uppers))


HISTOGRAMS = st.lists(st.integers(1, 300), min_size=1, max_size=9, unique=True).flatmap(
    lambda sizes: st.tuples(
        st.just(np.array(sorted(sizes), dtype=np.int64)),
        st.lists(st.integers(1, 1000), min_size=len(sizes), max_size=len(sizes)).map(np.array),
    )
)


def test_histogram_counts_distinct_sizes_ascending() -> None:
    sizes, counts = histogram(np.array([5, 1, 5, 7, 1, 5]))
    assert sizes.tolist() == [1, 5, 7]
    assert counts.tolist() == [2, 3, 1]
    assert sizes.dtype == np.int64 and counts.dtype == np.int64
    empty_sizes, empty_counts = histogram(np.array([], dtype=np.int64))
    assert len(empty_sizes) == 0 and len(empty_counts) == 0


def test_histogram_rejects_sizes_below_one() -> None:
    with pytest.raises(ValueError, match="sizes must be >= 1"):
        histogram(np.array([3, 0]))


def test_partition_of_puts_a_size_equal_to_a_bound_in_that_partition() -> None:
    uppers = np.array([4, 10, 100])
    sizes = np.array([1, 4, 5, 10, 11, 100, 101])
    assert partition_of(sizes, uppers).tolist() == [0, 0, 1, 1, 2, 2, 3]


def test_cost_of_thesis_example_by_hand() -> None:
    sizes, counts = histogram(THESIS_SIZES)
    one = 4 * (1 - 3 / 100) + 4 * (1 - 4 / 100) + 3 * (1 - 99 / 100)  # 3.88 + 3.84 + 0.03
    two = 4 * (1 - 3 / 4) + 3 * (1 - 99 / 100)  # 1 + 0.03
    assert cost(sizes, counts, np.array([100])) == pytest.approx(one)
    assert cost(sizes, counts, np.array([4, 100])) == pytest.approx(two)
    assert two < one
    assert optimal_uppers(sizes, counts, 2).tolist() == [4, 100]


def test_cost_rejects_a_size_above_the_last_bound() -> None:
    with pytest.raises(ValueError, match="above the last partition bound"):
        cost(np.array([3, 101]), np.array([1, 1]), np.array([4, 100]))


@settings(max_examples=300, deadline=None)
@given(HISTOGRAMS, st.integers(1, 4))
def test_optimal_uppers_matches_exhaustive_search(histogram_: tuple[np.ndarray, np.ndarray], n: int) -> None:
    sizes, counts = histogram_
    uppers = optimal_uppers(sizes, counts, n)
    assert_valid_cover(uppers, sizes, n)
    assert len(uppers) == min(n, len(sizes))
    best = exhaustive_best_cost(sizes, counts, n)
    assert cost(sizes, counts, uppers) == pytest.approx(best, rel=1e-9, abs=1e-9)


def test_optimal_uppers_without_binning_is_exact_on_a_larger_histogram() -> None:
    rng = np.random.default_rng(3)
    sizes = np.unique(rng.integers(1, 10**6, 600))
    counts = rng.integers(1, 100, len(sizes))
    exact = optimal_uppers(sizes, counts, 8, max_sizes=len(sizes))
    coarse = optimal_uppers(sizes, counts, 8, max_sizes=64)  # bounds restricted to 64 group ends
    assert_valid_cover(exact, sizes, 8)
    assert_valid_cover(coarse, sizes, 8)
    assert cost(sizes, counts, exact) <= cost(sizes, counts, coarse) + 1e-9


def test_optimal_uppers_bins_many_distinct_sizes_and_beats_equi_depth() -> None:
    rng = np.random.default_rng(7)
    sizes = np.unique(np.round(np.exp(rng.uniform(0, np.log(2e7), 200_000))).astype(np.int64))
    sizes = np.sort(rng.choice(sizes, 20_000, replace=False))
    counts = np.maximum(1, (1e6 / sizes * rng.uniform(0.5, 1.5, len(sizes)))).astype(np.int64)  # power law
    for n in (8, 32):
        uppers = optimal_uppers(sizes, counts, n)
        assert_valid_cover(uppers, sizes, n)
        assert len(uppers) == n
        assert cost(sizes, counts, uppers) <= cost(sizes, counts, equi_depth_uppers(sizes, counts, n))


def test_optimal_uppers_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="n_partitions"):
        optimal_uppers(np.array([1, 2]), np.array([1, 1]), 0)
    with pytest.raises(ValueError, match="ascending"):
        optimal_uppers(np.array([2, 1]), np.array([1, 1]), 2)
    with pytest.raises(ValueError, match="counts must match"):
        optimal_uppers(np.array([1, 2]), np.array([1]), 2)
    assert len(optimal_uppers(np.array([], dtype=np.int64), np.array([], dtype=np.int64), 4)) == 0


def test_equi_depth_is_roughly_balanced_on_a_zipf_sample() -> None:
    rng = np.random.default_rng(11)
    sizes, counts = histogram(rng.zipf(1.3, 100_000) % 10**7 + 1)
    uppers = equi_depth_uppers(sizes, counts, 8)
    assert_valid_cover(uppers, sizes, 8)
    per_partition = np.bincount(partition_of(sizes, uppers), weights=counts, minlength=len(uppers))
    # A single size can hold more than 1/8 of the sets (size 1 does here); the rest share evenly.
    assert per_partition.sum() == counts.sum()
    target = counts.sum() / 8
    heavy = counts.max()
    assert per_partition.max() <= max(heavy, target) + target
    assert (per_partition[1:] >= target / 4).all()


@given(HISTOGRAMS, st.integers(1, 6))
def test_equi_depth_bounds_are_valid(histogram_: tuple[np.ndarray, np.ndarray], n: int) -> None:
    sizes, counts = histogram_
    assert_valid_cover(equi_depth_uppers(sizes, counts, n), sizes, n)


def test_raised_lifts_only_the_last_bound_and_copies() -> None:
    uppers = np.array([4, 100])
    assert raised(uppers, np.array([3, 50])).tolist() == [4, 100]
    lifted = raised(uppers, np.array([3, 250]))
    assert lifted.tolist() == [4, 250]
    assert uppers.tolist() == [4, 100]
    assert raised(np.array([], dtype=np.int64), np.array([7, 3])).tolist() == [7]
    assert raised(uppers, np.array([], dtype=np.int64)).tolist() == [4, 100]
    assert np.all(partition_of(np.array([250]), lifted) < len(lifted))
