"""The semantic lists' range join (`range_join`) against its oracle, `close_pairs` (brute force: every
distance): the same pairs on the embedder's real vectors of values with typos and format variants,
on sparse vectors placed exactly at the radius, on vectors too small to key (one-character values,
the zero vector), on duplicates, and on dense vectors where the keys cannot filter; and the keys
filter out nearly every pair on real values (the reason for the join)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.search.pexeso.index import PEXESO_EMBEDDER
from catalog.search.pexeso.range_join import PrefixKeys, RangeJoin
from catalog.search.pexeso.search import close_pairs

RADIUS = 0.12  # the lists' 2τ


def _pairs_of(join: RangeJoin, a: np.ndarray, x: np.ndarray) -> list[tuple[int, int]]:
    found = [
        (int(i), int(j)) for ia, ix in join.pairs(a, join.keys(a), x, join.keys(x)) for i, j in zip(ia, ix, strict=True)
    ]
    assert len(found) == len(set(found)), "a pair was given twice"
    return sorted(found)


def _oracle(a: np.ndarray, x: np.ndarray, radius: float) -> list[tuple[int, int]]:
    return sorted((int(i), int(j)) for ia, ix in close_pairs(a, x, radius) for i, j in zip(ia, ix, strict=True))


def _real_values(rng: np.random.Generator, n: int) -> list[str]:
    """Words, codes, names and dates, with typo, case and format variants of some of them."""
    words = ["springfield", "shelbyville", "ogdenville", "north haverbrook", "capital city", "brockway"]
    out = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            out.append(f"{words[rng.integers(len(words))]} {rng.integers(1000)}")
        elif kind == 1:
            out.append(f"2021-{rng.integers(1, 13):02d}-{rng.integers(1, 29):02d}")
        elif kind == 2:
            out.append("".join(chr(c) for c in rng.integers(97, 123, size=int(rng.integers(1, 30)))))
        else:
            base = out[int(rng.integers(len(out)))] or "x"
            at = int(rng.integers(len(base)))
            out.append(base[:at] + base[at + 1 :] if rng.random() < 0.5 else base.upper())
    return out


def test_real_vectors_give_brute_forces_pairs_and_the_keys_filter_nearly_every_pair() -> None:
    rng = np.random.default_rng(3)
    a = PEXESO_EMBEDDER.embed(_real_values(rng, 1_500))
    x = PEXESO_EMBEDDER.embed([*_real_values(rng, 2_500), "", "a", "ab"])  # unkeyed: zero and tiny values
    x = np.concatenate([x, a[:50]])  # duplicates across the two sides
    join = RangeJoin.fit(x, RADIUS)
    expected = _oracle(a, x, RADIUS)
    assert len(expected) > len(a) * 0.05  # the variants and duplicates match something
    assert _pairs_of(join, a, x) == expected
    assert join.cost(join.keys(a), join.keys(x)) < len(a) * len(x) / 10
    # the keys of some of the vectors, cut from the keys of all of them, are theirs
    rows = np.flatnonzero(np.random.default_rng(4).random(len(x)) < 0.3)
    whole, part = join.keys(x).subset(rows), join.keys(x[rows])

    def entries(k: PrefixKeys) -> list[tuple[int, int]]:
        return sorted(zip(k.keys.tolist(), k.rows.tolist(), strict=True))

    assert entries(whole) == entries(part)
    assert whole.unkeyed.tolist() == part.unkeyed.tolist() and whole.n == part.n


def _on_sphere_at(a: np.ndarray, free: int, distance: float) -> np.ndarray:
    """A unit vector exactly `distance` from unit `a`, turned towards dimension `free` (zero in a)."""
    theta = 2.0 * np.arcsin(distance / 2.0)
    e = np.zeros_like(a, dtype=np.float64)
    e[free] = 1.0
    return (np.cos(theta) * a.astype(np.float64) + np.sin(theta) * e).astype(np.float32)


@pytest.mark.parametrize("dimension", [16, 64])  # 16: the projection keeps every difference whole
def test_sparse_vectors_at_and_around_the_radius(dimension: int) -> None:
    rng = np.random.default_rng(5)
    base = []
    for _ in range(200):
        v = np.zeros(dimension)
        support = rng.choice(dimension - 8, size=int(rng.integers(1, dimension - 8)), replace=False)
        v[support] = rng.choice([-1.0, 1.0], size=len(support)) * rng.integers(1, 3, size=len(support))
        base.append(v / np.linalg.norm(v))
    a = np.array(base, np.float32)
    near = [_on_sphere_at(v, dimension - 1 - (i % 8), d) for i, v in enumerate(a) for d in (RADIUS, RADIUS * 0.999)]
    x = np.concatenate([np.array(near), a, np.zeros((2, dimension), np.float32)])
    join = RangeJoin.fit(x, RADIUS)
    expected = _oracle(a, x, RADIUS)
    assert len(expected) > 2 * len(a)  # every vector, its copy and the pairs just inside
    assert _pairs_of(join, a, x) == expected


def test_dense_vectors_fall_back_to_brute_force() -> None:
    rng = np.random.default_rng(9)
    centres = rng.standard_normal((5, 32))
    m = centres[rng.integers(5, size=400)] + rng.standard_normal((400, 32)) * 0.01
    v = (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)
    join = RangeJoin.fit(v, RADIUS)
    keys = join.keys(v)
    assert join.cost(keys, keys) == len(v) * len(v)  # every prefix alike: no filter
    assert _pairs_of(join, v[:150], v) == _oracle(v[:150], v, RADIUS)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    radius=st.floats(0.0, 0.6),
    n_a=st.integers(0, 60),
    n_x=st.integers(0, 80),
    support=st.integers(1, 24),
    spread=st.sampled_from([0.0, 0.01, 0.05, 0.2]),
)
def test_no_pair_within_the_radius_is_ever_dropped(
    seed: int, radius: float, n_a: int, n_x: int, support: int, spread: float
) -> None:
    """Sparse vectors scattered around a few shared centres, at random radii: the filters never drop
    a pair brute force keeps, and never keep one it drops."""
    rng = np.random.default_rng(seed)
    dimension = 48
    centres = np.zeros((4, dimension))
    for c in centres:
        c[rng.choice(dimension, size=support, replace=False)] = rng.standard_normal(support)

    def draw(n: int) -> np.ndarray:
        m = centres[rng.integers(4, size=n)]
        m = m + (m != 0) * rng.standard_normal(m.shape) * spread
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        return np.divide(m, norms, out=np.zeros_like(m), where=norms > 0).astype(np.float32)

    a, x = draw(n_a), draw(n_x)
    join = RangeJoin.fit(np.concatenate([a, x]) if n_a + n_x else np.zeros((0, dimension), np.float32), radius)
    assert _pairs_of(join, a, x) == _oracle(a, x, radius)


def test_a_negative_radius_is_refused() -> None:
    with pytest.raises(ValueError, match="radius"):
        RangeJoin.fit(np.zeros((1, 8), np.float32), -0.1)
