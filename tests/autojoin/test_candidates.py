"""The rare q-grams both candidate searches rank by (`search transform`'s tables, the precomputed
lists' column pairs) against an oracle that cuts each token alone and counts in Python sets."""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.search.autojoin import candidates
from catalog.search.autojoin.candidates import _shared_rare_grams, gram_columns, gram_key
from catalog.search.autojoin.qgrams import column_grams

# tokens sharing pieces ("smith", "2021") across columns, with short and repeated ones
PIECES = ["smith", "jones", "2021", "ab", "new york", "é", "x", "-", "o'neil"]
TOKENS = st.lists(
    st.tuples(st.integers(0, 5), st.lists(st.sampled_from(PIECES), min_size=1, max_size=4).map("".join)),
    min_size=0,
    max_size=60,
)


def oracle_grams(values: list[str], column_of: np.ndarray) -> set[tuple[int, int]]:
    """Each token cut alone: the (q-gram, column) pairs."""
    out: set[tuple[int, int]] = set()
    for value, column in zip(values, column_of.tolist(), strict=True):
        hashes = gram_key(column_grams([value], q_min=4, q_max=6).hashes)
        out.update((int(h), column) for h in hashes)
    return out


def split(tokens: list[tuple[int, str]]) -> tuple[list[str], np.ndarray]:
    return [t for _, t in tokens], np.asarray([c for c, _ in tokens], np.int64)


@settings(max_examples=60, deadline=None)
@given(tokens=TOKENS, chunk=st.integers(1, 8))
def test_gram_columns_are_the_distinct_pairs_in_order(tokens: list[tuple[int, str]], chunk: int) -> None:
    values, column_of = split(tokens)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(candidates, "_GRAM_CHUNK", chunk)  # chunk edges fall inside a column's tokens
        gram, column = gram_columns(values, column_of, 6)
    got = list(zip(gram.tolist(), column.tolist(), strict=True))
    assert got == sorted(oracle_grams(values, column_of))


@settings(max_examples=60, deadline=None)
@given(tokens=TOKENS, max_df=st.integers(2, 4))
def test_shared_rare_grams_count_each_pair_over_the_rare_grams(tokens: list[tuple[int, str]], max_df: int) -> None:
    values, column_of = split(tokens)
    holders: dict[int, set[int]] = defaultdict(set)
    for gram, column in oracle_grams(values, column_of):
        holders[gram].add(column)
    want: dict[tuple[int, int], int] = defaultdict(int)
    for columns in holders.values():
        if 2 <= len(columns) <= max_df:
            for pair in combinations(sorted(columns), 2):
                want[pair] += 1
    got = {(a, b): n for a, b, n in _shared_rare_grams(values, column_of, 6, max_df).tolist()}
    assert got == dict(want)


def test_too_many_columns_for_a_code_are_refused() -> None:
    with pytest.raises(ValueError, match="at most"):
        gram_columns(["abcd"], np.zeros(1, np.int64), 1 << 24)


def test_gram_keys_keep_apart_q_grams_differing_in_one_character() -> None:
    """The polynomial hash holds a q-gram's first character in its low bits only: keys cut from
    the hash's high bits merged `1007` with `0007` (and `search transform` offered codes for
    references). Every one-character variant of a few q-grams keeps its own key."""
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    grams = sorted(
        {base[:i] + c + base[i + 1 :] for base in ("1007", "q0007x", "smith") for i in range(4) for c in alphabet}
    )
    hashes = np.unique(column_grams(grams, q_min=4, q_max=6).hashes)
    assert len(np.unique(gram_key(hashes))) == len(hashes) > 3 * 4 * 35
