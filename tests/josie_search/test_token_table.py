"""The token table answers exactly as a dict would, whatever the hashes do."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest

from catalog.search.josie.token_table import TokenTable


def _crc_high(s: str) -> int:
    """Distinct-ish hashes whose low bits are all zero: every token aims at slot 0 (long probe runs)."""
    return (zlib.crc32(s.encode("utf-8", "surrogatepass")) & 0x7FFF_FFFF) << 32


HASHES = {
    "python": hash,
    "one slot, long probe runs": _crc_high,
    "length only (most tokens share a hash)": len,
}


def _tokens(rng: random.Random, n: int) -> list[str]:
    alphabet = "ab1-é中😀\x00"
    made = {"", "\ud800", "x" * 3000, "a", "á", "a\u0301"}  # empty, lone surrogate, long, two spellings of á
    while len(made) < n:
        made.add("".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 9))))
    return sorted(made)


@pytest.mark.parametrize("hash_name", HASHES)
def test_lookup_equals_a_dict(hash_name: str) -> None:
    rng = random.Random(7)
    tokens = _tokens(rng, 3000)
    rng.shuffle(tokens)
    stored, absent = tokens[:2000], tokens[2000:]
    ids = rng.sample(range(10_000_000), len(stored))
    oracle = dict(zip(stored, ids, strict=True))
    table = TokenTable(stored, ids, hash_of=HASHES[hash_name])
    assert len(table) == len(stored)
    for size in (0, 1, 50, 2500):
        query = rng.sample(tokens, size)
        got = table.lookup(query)
        assert got.tolist() == [oracle.get(t, -1) for t in query]
    assert table.lookup(set(stored)).tolist() == [oracle[t] for t in set(stored)]  # every query token present
    assert (table.lookup(absent) == -1).all()


def test_an_absent_token_sharing_a_present_tokens_hash_is_not_found() -> None:
    table = TokenTable(["abc", "xyz", "é"], [4, 5, 6], hash_of=lambda s: 1 if s != "é" else 2)
    # "abd" hashes like "abc" and "xyz" and has their length; "ê" hashes like "é" and has its UTF-8 length
    assert table.lookup(["abd", "abc", "ê", "é", "xyz"]).tolist() == [-1, 4, -1, 6, 5]
    table = TokenTable(["abc", "é"], [4, 6], hash_of=lambda s: 1 if s != "é" else 2)  # no shared hash
    assert table.lookup(["abd", "abc", "ê", "é"]).tolist() == [-1, 4, -1, 6]


def test_an_empty_table_finds_nothing() -> None:
    table = TokenTable([], np.empty(0, dtype=np.int64))
    assert table.lookup(["a", ""]).tolist() == [-1, -1]
    assert table.lookup([]).tolist() == []
