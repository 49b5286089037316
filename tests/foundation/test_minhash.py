"""MinHash: the vectorised hash equals mmh3, signatures equal a plain-Python MinHash whatever the
owner order and chunking, the estimates follow their formulas, and specs refuse to mix."""

from __future__ import annotations

import random

import mmh3
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.core.errors import SignatureMismatchError, UserError
from catalog.core.minhash import (
    EMPTY,
    HASH_NAME,
    HASH_SEED,
    PRIME,
    MinHashSpec,
    containment_estimate,
    from_bytes,
    jaccard_estimate,
    murmur3_32,
    signature,
    signatures,
    to_bytes,
)

TOKENS = st.lists(st.text(max_size=200), max_size=40)
EDGE_TOKENS = ["", "a", "ab", "abc", "abcd", "abcde", "é", "東京", "😀", "aé東😀", "x" * 200, "new york"]


def mmh3_reference(tokens: list[str], seed: int = HASH_SEED) -> np.ndarray:
    return np.array([mmh3.hash(t.encode("utf-8"), seed, signed=False) for t in tokens], dtype=np.uint32)


def python_minhash(spec: MinHashSpec, tokens: list[str]) -> list[int]:
    """MinHash in plain Python ints, one token and one permutation at a time."""
    a, b = (v.tolist() for v in spec.permutations())
    hashes = [mmh3.hash(t.encode("utf-8"), HASH_SEED, signed=False) for t in tokens]
    return [min(((ai * h + bi) % PRIME for h in hashes), default=int(EMPTY)) for ai, bi in zip(a, b, strict=True)]


def splitmix64(seed: int, k: int) -> int:
    mask = (1 << 64) - 1
    z = (seed + (k + 1) * 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


@settings(max_examples=200, deadline=None)
@given(tokens=TOKENS, seed=st.sampled_from([HASH_SEED, 1, 0x4A05, 0xFFFFFFFF]))
def test_murmur3_equals_mmh3_for_strings_large_strings_and_lists(tokens: list[str], seed: int) -> None:
    expected = mmh3_reference(tokens, seed)
    for given_tokens in (pa.array(tokens, pa.string()), pa.array(tokens, pa.large_string()), tokens):
        got = murmur3_32(given_tokens, seed)
        assert got.dtype == np.uint32
        assert np.array_equal(got, expected)


@settings(max_examples=100, deadline=None)
@given(tokens=TOKENS, data=st.data())
def test_murmur3_of_a_sliced_array_hashes_only_the_slice(tokens: list[str], data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(tokens)))
    stop = data.draw(st.integers(start, len(tokens)))
    expected = mmh3_reference(tokens[start:stop])
    for arrow_type in (pa.string(), pa.large_string()):
        assert np.array_equal(murmur3_32(pa.array(tokens, arrow_type).slice(start, stop - start)), expected)


def test_murmur3_covers_every_tail_length_multibyte_chunked_and_view_arrays() -> None:
    tokens = EDGE_TOKENS + ["".join(random.Random(i).choices("aé東😀", k=i)) for i in range(64)]
    expected = mmh3_reference(tokens)
    assert {len(t.encode()) % 4 for t in tokens} == {0, 1, 2, 3}
    assert np.array_equal(murmur3_32(tokens), expected)
    assert np.array_equal(murmur3_32(pa.chunked_array([tokens[:5], [], tokens[5:]])), expected)
    assert np.array_equal(murmur3_32(pa.array(tokens, pa.string_view())), expected)
    assert murmur3_32([]).shape == (0,) and murmur3_32(pa.chunked_array([], pa.string())).shape == (0,)


def test_murmur3_refuses_nulls_and_non_string_arrays() -> None:
    with pytest.raises(ValueError, match="null"):
        murmur3_32(pa.array(["a", None, "b"]))
    with pytest.raises(TypeError, match="string"):
        murmur3_32(pa.array([1, 2]))


@settings(max_examples=60, deadline=None)
@given(
    sets=st.lists(st.lists(st.text(max_size=12), max_size=30), min_size=1, max_size=8),
    chunk=st.integers(1, 10),
    seed=st.integers(0, 1 << 40),
    shuffle=st.randoms(use_true_random=False),
)
def test_signatures_equal_python_minhash_for_unsorted_owners_and_small_chunks(
    sets: list[list[str]], chunk: int, seed: int, shuffle: random.Random
) -> None:
    spec = MinHashSpec(num_perm=16, seed=seed)
    pairs = [(token, owner) for owner, tokens in enumerate(sets) for token in tokens]
    shuffle.shuffle(pairs)
    hashes = murmur3_32([t for t, _ in pairs])
    owners = np.array([o for _, o in pairs], dtype=np.int64)
    got = signatures(spec, hashes, owners, len(sets) + 1, chunk=chunk)  # the last set owns nothing
    assert got.shape == (len(sets) + 1, 16) and got.dtype == np.uint32
    for i, tokens in enumerate([*sets, []]):
        assert got[i].tolist() == python_minhash(spec, tokens)


def test_signatures_at_256_permutations_with_chunks_spanning_sets() -> None:
    rng = random.Random(7)
    sets = [[f"v{rng.randrange(500)}" for _ in range(rng.randrange(0, 40))] for _ in range(12)]
    sets[3] = []
    spec = MinHashSpec()
    owners = np.array([i for i, s in enumerate(sets) for _ in s])
    order = np.array(rng.sample(range(len(owners)), len(owners)))
    hashes = murmur3_32([t for s in sets for t in s])
    got = signatures(spec, hashes[order], owners[order], len(sets), chunk=7)
    assert np.array_equal(got, [python_minhash(spec, s) for s in sets])
    assert (got[3] == EMPTY).all()
    assert np.array_equal(signatures(spec, hashes, owners, len(sets)), got)  # default chunk, sorted owners


def test_signatures_refuse_owners_out_of_range_and_non_32_bit_hashes() -> None:
    spec = MinHashSpec(num_perm=4)
    with pytest.raises(ValueError, match="owners"):
        signatures(spec, np.array([1, 2], np.uint32), np.array([0, 2]), 2)
    with pytest.raises(ValueError, match="32-bit"):
        signatures(spec, np.array([-1, 2]), np.array([0, 1]), 2)
    with pytest.raises(ValueError, match="one length"):
        signatures(spec, np.array([1, 2], np.uint32), np.array([0]), 2)
    assert np.array_equal(signatures(spec, np.array([], np.uint32), np.array([], np.int64), 2), np.full((2, 4), EMPTY))


@given(tokens=st.lists(st.text(max_size=20), max_size=30), shuffle=st.randoms(use_true_random=False))
def test_signature_is_the_signatures_row_whatever_the_order_and_duplicates(
    tokens: list[str], shuffle: random.Random
) -> None:
    spec = MinHashSpec(num_perm=32)
    row = signatures(spec, murmur3_32(tokens), np.zeros(len(tokens), np.int64), 1)[0]
    shuffled = tokens + tokens[: len(tokens) // 2]
    shuffle.shuffle(shuffled)
    assert np.array_equal(signature(spec, tokens), row)
    assert np.array_equal(signature(spec, shuffled), row)
    assert np.array_equal(signature(spec, set(tokens)), row)
    assert np.array_equal(signature(spec, pa.array(tokens)), row)


def test_signature_of_no_tokens_is_empty_everywhere() -> None:
    assert np.array_equal(signature(MinHashSpec(num_perm=8), []), np.full(8, EMPTY, np.uint32))


def test_permutations_are_splitmix64_of_the_seed_and_shared_as_a_prefix() -> None:
    a, b = MinHashSpec(num_perm=64, seed=3).permutations()
    assert a.dtype == b.dtype == np.uint64
    assert a.tolist() == [splitmix64(3, 2 * i) % (PRIME - 1) + 1 for i in range(64)]
    assert b.tolist() == [splitmix64(3, 2 * i + 1) % PRIME for i in range(64)]
    a16, b16 = MinHashSpec(num_perm=16, seed=3).permutations()
    assert np.array_equal(a16, a[:16]) and np.array_equal(b16, b[:16])
    assert not np.array_equal(MinHashSpec(num_perm=16, seed=4).permutations()[0], a16)
    with pytest.raises(ValueError):
        a[0] = 1  # the cached arrays are shared: read-only


def test_signature_values_are_pinned() -> None:
    """Indexes on disk hold these numbers: any change to the hash or the permutations must fail here."""
    assert signature(MinHashSpec(), ["new york", "boston", "東京"])[:4].tolist() == [
        392064165,
        92233195,
        670478954,
        996145581,
    ]


def test_jaccard_estimate_of_half_overlapping_sets_is_near_one_half() -> None:
    spec = MinHashSpec(num_perm=256)
    x = signature(spec, [f"t{i}" for i in range(300)])
    y = signature(spec, [f"t{i}" for i in range(100, 400)])  # |x ∩ y| = 200, |x ∪ y| = 400
    assert abs(jaccard_estimate(x, y) - 0.5) < 0.1
    assert jaccard_estimate(x, x) == 1.0
    both = jaccard_estimate(np.stack([x, y, signature(spec, [])]), y)
    assert isinstance(both, np.ndarray) and both.shape == (3,)
    assert both[1] == 1.0 and both[2] == 0.0 and both[0] == jaccard_estimate(x, y)
    with pytest.raises(ValueError, match="permutations"):
        jaccard_estimate(x, y[:128])


def test_containment_estimate_follows_from_jaccard_and_sizes() -> None:
    # |Q| = 100, |X| = 300, |Q ∩ X| = 80: J = 80 / 320 = 0.25, containment 0.8
    assert containment_estimate(0.25, 300, 100) == pytest.approx(0.8)
    got = containment_estimate(np.array([0.25, 1.0, 0.5, 0.0]), np.array([300, 50, 10, 7]), np.array([100, 100, 0, 5]))
    assert isinstance(got, np.ndarray)
    assert got == pytest.approx([0.8, 0.75, 0.0, 0.0])
    assert containment_estimate(0.9, 1000, 10) == 1.0  # clipped: a noisy J can overshoot


def test_spec_check_refuses_a_different_spec_and_names_both() -> None:
    index = MinHashSpec(num_perm=256, seed=1)
    index.check(MinHashSpec(num_perm=256, seed=1))
    for other in (MinHashSpec(num_perm=128, seed=1), MinHashSpec(num_perm=256, seed=2)):
        with pytest.raises(SignatureMismatchError) as e:
            index.check(other)
        assert isinstance(e.value, UserError)
        assert e.value.expected == index and e.value.got == other
        assert str(other) in str(e.value) and str(index) in str(e.value) and "re-sign the query" in str(e.value)
    with pytest.raises(SignatureMismatchError, match=r"^partition signed with"):
        index.check(MinHashSpec(seed=9), what="partition")


def test_spec_round_trips_through_a_dict_and_refuses_incomplete_ones() -> None:
    spec = MinHashSpec(num_perm=64, seed=12345)
    assert spec.as_dict() == {"num_perm": 64, "seed": 12345, "hash": HASH_NAME}
    assert MinHashSpec.from_dict(spec.as_dict()) == spec
    with pytest.raises(ValueError, match="keys"):
        MinHashSpec.from_dict({"num_perm": 64, "seed": 1})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"num_perm": 0}, "num_perm"),
        ({"num_perm": 4097}, "num_perm"),
        ({"num_perm": 128.0}, "num_perm"),
        ({"num_perm": True}, "num_perm"),
        ({"seed": -1}, "seed"),
        ({"seed": 1 << 64}, "seed"),
        ({"hash": "sha1_32"}, "hash"),
    ],
)
def test_spec_refuses_bad_fields(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MinHashSpec(**fields)  # type: ignore[arg-type]


def test_signatures_round_trip_through_little_endian_bytes() -> None:
    spec = MinHashSpec(num_perm=8)
    sigs = signatures(spec, murmur3_32(["a", "b", "c"]), np.array([0, 0, 2]), 3)
    blobs = to_bytes(sigs)
    assert len(blobs) == 3 and all(len(blob) == 32 for blob in blobs)
    assert blobs[1] == b"\xff" * 32  # the empty set
    assert np.array_equal(from_bytes(blobs, 8), sigs)
    assert np.array_equal(from_bytes(blobs[0], 8), sigs[0])
    assert to_bytes(np.array([1, 256], np.uint32)) == [b"\x01\x00\x00\x00\x00\x01\x00\x00"]
    assert from_bytes([], 8).shape == (0, 8)
    with pytest.raises(ValueError, match="32 bytes"):
        from_bytes([blobs[0], blobs[1][:28]], 8)
    with pytest.raises(ValueError, match="uint32"):
        to_bytes(sigs.astype(np.int64))
