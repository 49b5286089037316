"""The in-memory LSH Ensemble against brute-force containment, before and after random ADD/DELETE
sequences, on a skewed lake with duplicates, subsets and huge columns."""

from __future__ import annotations

import math

import numpy as np
import pytest

from catalog.core.minhash import MinHashSpec
from catalog.search.lshensemble import index as index_module
from catalog.search.lshensemble import partitions
from catalog.search.lshensemble.index import EnsembleIndex, band_keys, rarest
from tests.lshensemble.lake import Postings, brute_force, queries, sign_all, skewed_lake

SPEC = MinHashSpec(num_perm=128, seed=3)


def _built(signatures: np.ndarray, sizes: np.ndarray, n_partitions: int = 8) -> EnsembleIndex:
    hist = partitions.histogram(sizes)
    return EnsembleIndex(SPEC, partitions.optimal_uppers(*hist, n_partitions), signatures, sizes)


def _verified(index: EnsembleIndex, rows_of: list[int], columns: list[set[str]], query: set[str], t: float) -> set[int]:
    """Verified answers, the skewed partitions answered from an inverted index over the index's rows."""
    sig, _ = sign_all(SPEC, [query])
    postings = Postings([columns[c] if index.alive[row] else set() for row, c in enumerate(rows_of)])
    found = index.candidates(sig[0], len(query), t, exact=postings.exact(query, t))
    need = t * len(query) - 1e-9
    return {rows_of[r] for r in found.tolist() if len(columns[rows_of[r]] & query) >= need}


def test_band_keys_equal_exactly_when_bands_are_equal() -> None:
    rng = np.random.default_rng(0)
    sigs = rng.integers(0, 2**31, size=(50, 16), dtype=np.uint32)
    sigs[1, :4] = sigs[0, :4]  # band 0 of length 4 shared, band 1 not
    keys = band_keys(sigs, 4, 4)
    assert keys[0, 0] == keys[1, 0] and keys[0, 1] != keys[1, 1]
    assert len(np.unique(keys)) == keys.size - 1  # no other collision, also across bands


def test_single_value_bands_never_collide() -> None:
    """At r = 1 a key is value x odd multiplier + seed mod 2^64: a bijection per band."""
    sigs = np.arange(0, 2**31, 2**31 // 5000, dtype=np.uint32)[:, None] * np.ones((1, 8), np.uint32)
    keys = band_keys(sigs, 1, 8)
    assert len(np.unique(keys)) == keys.size


def test_candidates_equal_sorted_or_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Candidates are made distinct by sorting when few and by a mask over the rows when many:
    both give the same rows, with dead rows dropped."""
    columns = skewed_lake(seed=9, n_columns=300)
    sigs, sizes = sign_all(SPEC, columns)
    index = _built(sigs, sizes)
    index.remove(np.arange(0, 300, 7))
    asked = [
        (sig, len(q), t) for q in queries(columns, seed=10, n=15) for t in (0.3, 0.8) for sig in sign_all(SPEC, [q])[0]
    ]
    found = {}
    for ratio in (0, 10**9):  # always sort, always mask
        monkeypatch.setattr(index_module, "_MASK_RATIO", ratio)
        found[ratio] = [index.candidates(sig, size, t) for sig, size, t in asked]
    for sorted_rows, masked_rows in zip(found[0], found[10**9], strict=True):
        assert np.array_equal(sorted_rows, masked_rows)
        assert index.alive[masked_rows].all()
    for (_sig, size, t), rows in zip(asked, found[0], strict=True):
        assert (index.sizes[rows] >= math.ceil(t * size - 1e-9)).all()  # a smaller column cannot hold t of the query


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.9])
def test_verified_answers_equal_brute_force(threshold: float) -> None:
    columns = skewed_lake(seed=1)
    sigs, sizes = sign_all(SPEC, columns)
    index = _built(sigs, sizes)
    rows = list(range(len(columns)))
    missed = found = 0
    for query in queries(columns, seed=2):
        truth = brute_force(columns, query, threshold)
        answer = _verified(index, rows, columns, query, threshold)
        assert answer <= truth  # verified: never a false positive
        missed += len(truth - answer)
        found += len(truth)
    assert found > 40
    assert missed == 0, f"recall {1 - missed / found:.3f}"


@pytest.mark.parametrize("threshold", [0.5, 0.9])
def test_the_exact_path_answers_every_partition_when_it_runs(threshold: float) -> None:
    """A query some partition of which needs the exact path takes every partition from it: its
    candidates are exactly the columns on its prefix lists holding at least t·|Q| tokens (no
    band's candidate), so its verified answers are brute force's."""
    columns = skewed_lake(seed=12, n_columns=300)
    sigs, sizes = sign_all(SPEC, columns)
    index = _built(sigs, sizes)
    postings = Postings(columns)
    checked = 0
    for query in queries(columns, seed=13, n=60):
        if not index.plan(len(query), threshold).exact.any():
            continue
        need = math.ceil(threshold * len(query) - 1e-9)
        on_lists = postings.exact(query, threshold)(np.arange(len(index.uppers)))
        found = index.candidates(
            sign_all(SPEC, [query])[0][0], len(query), threshold, exact=postings.exact(query, threshold)
        )
        assert set(found.tolist()) == {r for r in on_lists.tolist() if len(columns[r]) >= need}
        assert {r for r in found.tolist() if len(columns[r] & query) >= need} == brute_force(columns, query, threshold)
        checked += 1
    assert checked >= 5


def test_every_column_finds_itself_even_above_every_bound() -> None:
    """A column added larger than every partition must raise the last bound before it is
    searchable: otherwise a query equal to it skips its partition (bound < t·|Q|)."""
    columns = skewed_lake(seed=4, n_columns=120)
    small = [c for c in columns if len(c) < 200]
    big = [c for c in columns if len(c) >= 200]
    sigs, sizes = sign_all(SPEC, small)
    index = _built(sigs, sizes, n_partitions=4)
    bound = int(index.uppers[-1])
    big_sigs, big_sizes = sign_all(SPEC, big)
    rows = index.add(big_sigs, big_sizes)
    assert index.uppers[-1] >= big_sizes.max() > bound
    for row, sig, size in zip(rows.tolist(), big_sigs, big_sizes.tolist(), strict=True):
        assert row in index.candidates(sig, size, 1.0)


def test_after_random_adds_and_deletes_candidates_match_a_fresh_build() -> None:
    """Incremental ADD/DELETE (bounds only raised) answers exactly as an index built fresh on the
    live columns with the same bounds, and its verified answers equal brute force."""
    rng = np.random.default_rng(5)
    lake = skewed_lake(seed=6, n_columns=500)
    first = list(range(200))
    sigs, sizes = sign_all(SPEC, [lake[i] for i in first])
    index = _built(sigs, sizes, n_partitions=6)
    rows_of = list(first)  # index row -> lake column
    live = dict(zip(first, range(len(first)), strict=True))  # lake column -> index row
    pending = list(range(200, 500))
    rng.shuffle(pending)
    while pending:
        add = [pending.pop() for _ in range(min(len(pending), int(rng.integers(5, 40))))]
        new_sigs, new_sizes = sign_all(SPEC, [lake[i] for i in add])
        for col, row in zip(add, index.add(new_sigs, new_sizes).tolist(), strict=True):
            rows_of.append(col)
            live[col] = row
        gone = rng.choice(sorted(live), size=int(rng.integers(0, 15)), replace=False).tolist()
        index.remove(np.array([live.pop(c) for c in gone], dtype=np.int64))
        # a changed column: a delete plus an insert of its new values
        changed = int(rng.choice(sorted(live)))
        lake[changed] = lake[changed] | {f"x{changed}_{j}" for j in range(int(rng.integers(1, 3000)))}
        index.remove(np.array([live.pop(changed)]))
        s, z = sign_all(SPEC, [lake[changed]])
        live[changed] = int(index.add(s, z)[0])
        rows_of.append(changed)

    assert (index.sizes[index.alive] <= index.uppers[index.parts[index.alive]]).all()
    order = sorted(live)
    fresh_sigs, fresh_sizes = sign_all(SPEC, [lake[c] for c in order])
    fresh = EnsembleIndex(SPEC, index.uppers, fresh_sigs, fresh_sizes)
    current = [lake[c] if c in live else set() for c in range(len(lake))]
    for t in (0.5, 0.8):
        for query in queries([lake[c] for c in order], seed=7, n=25):
            sig, _ = sign_all(SPEC, [query])
            incremental = {rows_of[r] for r in index.candidates(sig[0], len(query), t).tolist()}
            rebuilt = {order[r] for r in fresh.candidates(sig[0], len(query), t).tolist()}
            assert incremental == rebuilt
            assert _verified(index, rows_of, current, query, t) == brute_force(current, query, t)


def test_repartition_rebuckets_the_same_signatures() -> None:
    columns = skewed_lake(seed=8, n_columns=200)
    sigs, sizes = sign_all(SPEC, columns)
    index = _built(sigs, sizes, n_partitions=2)
    index.remove(np.arange(0, 200, 3))
    fresh = index.with_uppers(partitions.optimal_uppers(*partitions.histogram(index.sizes[index.alive]), 8))
    assert len(fresh) == len(index) and len(fresh.uppers) == 8
    assert np.array_equal(fresh.signatures, index.signatures[index.alive])


def test_bad_input_is_refused() -> None:
    sigs, sizes = sign_all(SPEC, [{"a"}, {"b", "c"}])
    with pytest.raises(ValueError, match="distinct token"):
        EnsembleIndex(SPEC, np.array([2]), sigs, np.array([0, 2]))
    index = EnsembleIndex(SPEC, np.array([2]), sigs, sizes)
    with pytest.raises(ValueError):
        index.candidates(sigs[0], 1, 1.5)


def test_rarest_is_the_stable_sorts_prefix() -> None:
    """The exact path's rarest tokens in linear time: the same set as a stable sort's first n."""
    rng = np.random.default_rng(11)
    for _ in range(500):
        high = int(rng.choice([2, 8, 10**6]))  # few distinct values (counted) or sparse ones (sorted)
        frequency = rng.integers(0, high, int(rng.integers(0, 60)))
        n = int(rng.integers(-1, len(frequency) + 3))
        expected = np.sort(np.argsort(frequency, kind="stable")[: max(n, 0)])
        assert np.array_equal(rarest(frequency, n), expected)


def test_a_level_finds_exactly_the_rows_holding_a_key_before_and_after_a_merge() -> None:
    """Keys are grouped by run, not sorted: a lookup must still find every row holding a key
    (repeats included) and nothing else, and an insert into the runs must equal a fresh build."""
    rng = np.random.default_rng(7)
    sigs = rng.integers(0, 50, size=(400, 8), dtype=np.uint32)  # few values: many equal bands
    parts = rng.integers(0, 3, size=400)
    rows = np.arange(400, dtype=np.int64)
    build = index_module._Level.of
    fresh = build(sigs, rows, parts, 2, 4)
    merged = build(sigs[:250], rows[:250], parts[:250], 2, 4, fresh.shift).merged(
        build(sigs[250:], rows[250:], parts[250:], 2, 4, fresh.shift)
    )
    keys = index_module.partition_keys(band_keys(sigs, 2, 4), parts[:, None])
    probe = np.concatenate([keys[rng.integers(0, 400, size=30), 1], rng.integers(0, 2**63, size=5, dtype=np.uint64)])
    for level in (fresh, merged):
        assert np.all(np.diff(level.keys >> level.shift) >= 0)
        for key in probe.tolist():
            expected = sorted(np.repeat(rows, 4)[keys.ravel() == np.uint64(key)].tolist())
            assert sorted(level.find(np.array([key], np.uint64)).tolist()) == expected
