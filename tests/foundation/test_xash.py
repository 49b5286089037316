"""XASH: the digest's test vectors (research/mate.md §2.6), the vectorised hash equals the plain-Python
reference for any text and any Arrow layout, super keys never lose a row that holds the query values
(§2.7), and specs refuse to mix."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import catalog.core.xash as xash_module
from catalog.core.errors import UserError, XashMismatchError
from catalog.core.xash import XashSpec, from_bytes, may_contain, super_keys, to_bytes, xash, xash_one

SPECS = [XashSpec(bits=128), XashSpec(bits=256), XashSpec(bits=512)]
# Mostly characters a value repeats, so counts and ties matter; also upper case, punctuation,
# DEL, multi-byte characters (2, 3 and 4 UTF-8 bytes), and any text at all.
TEXT = st.text(st.sampled_from(" 0123456789aelnrsxyz.,-_'AL\x7fé東😀"), max_size=60) | st.text(max_size=40)
EDGE = ["", "a", " ", "7", "ab", "aaaa", "2024-01-01", "3.14", "a,b;c!", "é", "東京", "😀😀a", "aé東😀x", "x" * 300]
EDGE += ["abcdefghijklmnopq" * 5, "".join(random.Random(3).choices("ab c1é東😀A!", k=500))]


def as_int(words: np.ndarray) -> int:
    return sum(int(w) << (64 * i) for i, w in enumerate(words.tolist()))


def set_bits(h: int) -> list[int]:
    return [i for i in range(h.bit_length()) if h >> i & 1]


def assert_equals_reference(got: np.ndarray, values: list[str], spec: XashSpec) -> None:
    assert got.dtype == np.uint64 and got.shape == (len(values), spec.words)
    assert [as_int(row) for row in got] == [xash_one(v, spec) for v in values]


@pytest.mark.parametrize(
    ("value", "hex_128", "bits"),
    [
        ("muhammad", "00800401004000000000000400000800", [11, 34, 86, 96, 106, 119]),
        ("lee", "00040000002000020000000000000000", [65, 85, 114]),
        ("us", "00020420000000000000000000000000", [101, 106, 113]),
        ("germany", "00400001040080000000000000000110", [4, 8, 79, 90, 96, 118]),
        ("aaaa", "00080000000000001000000000000000", [60, 115]),
        ("3 14", "00080000000000000000084204000000", [26, 33, 38, 43, 115]),
        ("new york", "00800002000000000020000000022040", [6, 13, 17, 53, 97, 119]),
        ("", "00008000000000000000000000000000", [111]),
        ("abcdefghijklmnopq", "00008000000000000000249200000000", [33, 36, 39, 42, 45, 111]),
        ("Lee", "00040000000000020000000000000000", [65, 114]),  # 'L' uses a slot, sets nothing
    ],
)
def test_digest_test_vectors_at_128_bits(value: str, hex_128: str, bits: list[int]) -> None:
    expected = int(hex_128, 16)
    assert set_bits(expected) == bits
    assert xash_one(value) == expected
    assert as_int(xash([value])[0]) == expected
    assert to_bytes(xash([value]))[0] == expected.to_bytes(16, "little")


def test_digest_test_vectors_at_256_and_512_bits() -> None:
    assert set_bits(xash_one("muhammad", XashSpec(bits=256))) == [16, 121, 141, 161, 192, 230]
    assert set_bits(xash_one("muhammad", XashSpec(bits=512))) == [47, 274, 317, 361, 427, 489]
    for spec in SPECS[1:]:
        assert as_int(xash(["muhammad"], spec)[0]) == xash_one("muhammad", spec)


def test_digest_running_example_filter() -> None:
    """T1 row 2 holds the query key (muhammad, lee, us) and passes; rows 5 and 6 fail (paper Example 3)."""
    q = xash(["muhammad", "lee", "us"])
    assert as_int(np.bitwise_or.reduce(q, axis=0)) == 0x00860421006000020000000400000800
    rows = [
        ["muhammad", "lee", "us", "dancer"],
        ["muhammad", "ali", "us", "boxer"],
        ["muhammad", "lee", "germany", "birder"],
    ]
    cells = [v for row in rows for v in row]
    owners = np.repeat(np.arange(len(rows)), [len(r) for r in rows])
    sk = super_keys(xash(cells), owners, len(rows))
    assert as_int(sk[0]) == 0x00A60421006281020000000400000801
    assert may_contain(sk, q).tolist() == [True, False, False]
    assert may_contain(sk, np.bitwise_or.reduce(q, axis=0)).tolist() == [True, False, False]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: str(s.bits))
@settings(max_examples=150, deadline=None)
@given(values=st.lists(TEXT, max_size=40), data=st.data())
def test_xash_equals_reference_for_strings_large_strings_lists_and_slices(
    spec: XashSpec, values: list[str], data: st.DataObject
) -> None:
    for given_values in (pa.array(values, pa.string()), pa.array(values, pa.large_string()), values):
        assert_equals_reference(xash(given_values, spec), values, spec)
    start = data.draw(st.integers(0, len(values)))
    stop = data.draw(st.integers(start, len(values)))
    for arrow_type in (pa.string(), pa.large_string()):
        sliced = pa.array(values, arrow_type).slice(start, stop - start)
        assert_equals_reference(xash(sliced, spec), values[start:stop], spec)


@pytest.mark.parametrize("spec", [*SPECS, XashSpec(n_chars=1), XashSpec(bits=512, n_chars=37)], ids=str)
def test_xash_equals_reference_on_edge_values_chunked_views_and_tiny_blocks(
    spec: XashSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = EDGE + [v.upper() for v in EDGE]
    assert_equals_reference(xash(values, spec), values, spec)
    assert_equals_reference(xash(pa.chunked_array([values[:5], [], values[5:]]), spec), values, spec)
    assert_equals_reference(xash(pa.array(values, pa.string_view()), spec), values, spec)
    monkeypatch.setattr(xash_module, "_BLOCK_BYTES", 16)  # many blocks, and values longer than one
    assert_equals_reference(xash(values, spec), values, spec)


def test_xash_of_nothing_and_of_empty_strings() -> None:
    empties: list[pa.Array | pa.ChunkedArray | list[str]] = [
        [],
        pa.array([], pa.string()),
        pa.chunked_array([], pa.large_string()),
        pa.array([]),
    ]
    for empty in empties:
        assert xash(empty).shape == (0, 2)
    assert xash([""] * 3, XashSpec(bits=512)).shape == (3, 8)
    assert [set_bits(as_int(row)) for row in xash(["", ""])] == [[111], [111]]  # the length bit alone


def test_xash_refuses_nulls_bytes_and_a_bare_string() -> None:
    with pytest.raises(ValueError, match="null"):
        xash(pa.array(["a", None, "b"]))
    with pytest.raises(ValueError, match="null"):
        xash(["a", None])
    with pytest.raises(TypeError, match="string"):
        xash(pa.array([b"ab"], pa.binary()))
    with pytest.raises(TypeError, match="xash_one"):
        xash("muhammad")
    with pytest.raises(TypeError):
        xash_one(b"ab")  # type: ignore[arg-type]


ROWS = st.lists(st.lists(TEXT, max_size=8), min_size=1, max_size=8)


@settings(max_examples=100, deadline=None)
@given(rows=ROWS, spec=st.sampled_from(SPECS), data=st.data(), shuffle=st.randoms(use_true_random=False))
def test_super_key_passes_every_subset_of_its_rows_values(
    rows: list[list[str]], spec: XashSpec, data: st.DataObject, shuffle: random.Random
) -> None:
    """No false negatives (digest §2.7): a row's super key contains the OR of any of its values."""
    cells = [(v, r) for r, row in enumerate(rows) for v in row]
    shuffle.shuffle(cells)
    hashes = xash([v for v, _ in cells], spec)
    owners = np.array([r for _, r in cells], dtype=np.int64)
    sk = super_keys(hashes, owners, len(rows) + 1)  # the last row owns nothing
    assert sk.shape == (len(rows) + 1, spec.words) and sk.dtype == np.uint64
    for r, row in enumerate([*rows, []]):
        expected = 0
        for v in row:
            expected |= xash_one(v, spec)
        assert as_int(sk[r]) == expected
    for r, row in enumerate(rows):
        subset = data.draw(st.lists(st.sampled_from(row), max_size=4)) if row else []
        q = xash(subset, spec).reshape(-1, spec.words)
        assert may_contain(sk, q)[r]
        assert may_contain(sk[r], q).tolist() == [True]


def test_may_contain_checks_every_word() -> None:
    sk = np.array([[0b1011, 1 << 63], [0b1011, 0], [0b0011, 1 << 63]], np.uint64)
    assert may_contain(sk, np.array([0b1001, 1 << 63], np.uint64)).tolist() == [True, False, False]
    assert may_contain(sk, np.zeros(2, np.uint64)).tolist() == [True, True, True]  # nothing asked
    assert may_contain(sk, np.zeros((0, 2), np.uint64)).tolist() == [True, True, True]
    with pytest.raises(ValueError, match="width"):
        may_contain(sk, np.zeros(4, np.uint64))
    with pytest.raises(ValueError, match="uint64"):
        may_contain(sk.astype(np.int64), np.zeros(2, np.uint64))


def test_super_keys_refuse_bad_owners_and_hashes() -> None:
    hashes = xash(["a", "b"])
    with pytest.raises(ValueError, match="owners"):
        super_keys(hashes, np.array([0, 2]), 2)
    with pytest.raises(ValueError, match="owners"):
        super_keys(hashes, np.array([0]), 2)
    with pytest.raises(ValueError, match="uint64"):
        super_keys(hashes.astype(np.int64), np.array([0, 1]), 2)
    assert np.array_equal(super_keys(np.zeros((0, 2), np.uint64), np.zeros(0, np.int64), 3), np.zeros((3, 2)))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: str(s.bits))
def test_bytes_round_trip_little_endian(spec: XashSpec) -> None:
    hashes = xash(EDGE, spec)
    blobs = to_bytes(hashes)
    assert [len(b) for b in blobs] == [8 * spec.words] * len(EDGE)
    assert [int.from_bytes(b, "little") for b in blobs] == [xash_one(v, spec) for v in EDGE]
    assert np.array_equal(from_bytes(blobs, spec.words), hashes)
    assert np.array_equal(from_bytes(blobs[0], spec.words), hashes[0])
    assert to_bytes(hashes[0]) == blobs[:1]
    with pytest.raises(ValueError, match="bytes"):
        from_bytes([blobs[0][:-1]], spec.words)
    with pytest.raises(ValueError, match="uint64"):
        to_bytes(hashes.astype(np.int64))


def test_spec_check_refuses_a_different_spec_and_names_both() -> None:
    index = XashSpec()
    index.check(XashSpec(bits=128, n_chars=5, name="xash-v1"))
    for other in (XashSpec(bits=256), XashSpec(n_chars=6)):
        with pytest.raises(XashMismatchError) as caught:
            index.check(other, what="query table")
        assert isinstance(caught.value, UserError)
        assert str(index) in str(caught.value) and str(other) in str(caught.value)
        assert "query table" in str(caught.value)


def test_spec_round_trips_through_as_dict_and_refuses_partial_dicts() -> None:
    for spec in [*SPECS, XashSpec(bits=512, n_chars=3)]:
        assert XashSpec.from_dict(spec.as_dict()) == spec
    assert XashSpec().as_dict() == {"bits": 128, "n_chars": 5, "name": "xash-v1"}
    with pytest.raises(ValueError, match="keys"):
        XashSpec.from_dict({"bits": 128, "n_chars": 5})
    with pytest.raises(ValueError, match="keys"):
        XashSpec.from_dict({"bits": 128, "n_chars": 5, "name": "xash-v1", "seed": 1})


def test_spec_sizes_follow_the_paper() -> None:
    assert [(s.words, s.beta, s.char_bits, s.length_bits) for s in SPECS] == [
        (2, 3, 111, 17),
        (4, 6, 222, 34),
        (8, 13, 481, 31),
    ]


@pytest.mark.parametrize("bits", [64, 0, 100, 1024, True, "128", 128.0])
def test_spec_refuses_bad_bits(bits: object) -> None:
    with pytest.raises(ValueError, match="bits"):
        XashSpec(bits=bits)  # type: ignore[arg-type]


@pytest.mark.parametrize(("field", "value"), [("n_chars", 0), ("n_chars", 38), ("n_chars", True), ("name", "xash-v2")])
def test_spec_refuses_bad_n_chars_and_unknown_rules(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        XashSpec(**{field: value})  # type: ignore[arg-type]
