"""Column pairs worth an Auto-Join: little exact overlap, many rare q-grams in common.

The precomputed transformation lists (`lists.py`) cannot learn a program for every pair of a lake's
columns, so each textual column keeps its best `list_candidates` partners, found the way `search
transform` finds candidate tables (`transform.py`), column against column:

* each column's sample is its first `list_tokens` distinct tokens in sort order (silver
  `column_tokens`: bounded and deterministic, so a batch and a full build see the same samples);
* a column whose sampled tokens are all numbers is left out on both sides: numbers share q-grams
  with row numbers and codes by chance, and `search transform` found only such coincidences on
  numeric tables (docs/algorithms/autojoin.md);
* the samples are cut into q-grams (q = 4..6, and each value's token set, `qgrams.column_grams`);
  a q-gram held by 2 to `list_max_df` columns is *rare* and counts once for each pair of them;
* a pair sharing at least `list_min_shared` rare q-grams is a candidate, unless its samples share
  `list_max_exact` or more of the smaller one exactly: an equi-join (the exact joinable lists)
  already finds it. A column's candidates are ranked by q-grams shared, then table and column id.

The pairs come from the rare q-grams' column lists (at most `list_max_df` columns each, so at most
`list_max_df`² / 2 pairs a q-gram), never from all pairs of columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from catalog.core.hashing import splitmix64
from catalog.search.autojoin.qgrams import column_grams, equal_runs
from catalog.search.autojoin.settings import AutojoinSettings

NUMBER = r"^[-+]?[0-9]+([.,][0-9]+)*([eE][-+]?[0-9]+)?%?$"  # a token that is a number as written
_GRAM_CHUNK = 20_000  # tokens cut into q-grams at once (column_grams holds a row per token)
_COLUMN_BITS = 24  # a column's number in a q-gram's code (16.7 M columns)


@dataclass(frozen=True)
class Candidate:
    """A column worth learning a program with, and the rare q-grams it shares with the subject."""

    column_id: str
    table_id: str
    n_shared: int


@dataclass(frozen=True)
class Listed:
    """A textual column of the lake (its table) and its candidates, best first."""

    table_id: str
    candidates: tuple[Candidate, ...]


def first_tokens(tokens: pa.Table, per_column: int) -> pa.Table:
    """The first `per_column` tokens of each column in sort order (a bounded, deterministic sample)
    of a (column_id, token, …) table; null tokens dropped."""
    tokens = tokens.filter(pc.is_valid(tokens["token"]))
    if tokens.num_rows == 0:
        return tokens
    tokens = tokens.take(pc.sort_indices(tokens, [("column_id", "ascending"), ("token", "ascending")]))
    ids = tokens["column_id"].to_numpy(zero_copy_only=False)
    new = np.concatenate(([True], ids[1:] != ids[:-1]))
    group_start = np.maximum.accumulate(np.where(new, np.arange(len(ids)), 0))
    keep = (np.arange(len(ids)) - group_start) < per_column
    return tokens.filter(pa.array(keep))


def textual_columns(sample: pa.Table) -> pa.Table:
    """`sample` without the columns whose every sampled token is a number."""
    if sample.num_rows == 0:
        return sample
    number = pc.match_substring_regex(sample["token"], NUMBER)
    ids = sample["column_id"]
    textual_ids = pc.unique(ids.filter(pc.invert(number)))
    return sample.filter(pc.is_in(ids, value_set=textual_ids))


def transform_candidates(sample: pa.Table, cfg: AutojoinSettings) -> dict[str, Listed]:
    """Every textual column of `sample` (column_id, table_id, token: each column's first
    `list_tokens` tokens, as `transform.sampled_tokens` reads them) with its candidates, best first
    (an empty list when none qualifies)."""
    sample = textual_columns(sample)
    if sample.num_rows == 0:
        return {}
    column_ids, column_of = np.unique(sample["column_id"].to_numpy(zero_copy_only=False), return_inverse=True)
    table_ids = np.empty(len(column_ids), object)
    table_ids[column_of] = sample["table_id"].to_numpy(zero_copy_only=False)
    values = sample["token"].to_pylist()
    token_sets: list[set[str]] = [set() for _ in column_ids]
    for c, v in zip(column_of.tolist(), values, strict=True):
        token_sets[c].add(v)
    shared = _shared_rare_grams(values, column_of, len(column_ids), cfg.list_max_df)
    found: dict[int, list[tuple[int, int]]] = {}
    for a, b, n in shared.tolist():
        if n >= cfg.list_min_shared and table_ids[a] != table_ids[b]:
            found.setdefault(a, []).append((b, n))
            found.setdefault(b, []).append((a, n))
    out: dict[str, Listed] = {}
    for c, column_id in enumerate(column_ids.tolist()):
        ranked = sorted(found.get(c, []), key=lambda p: (-p[1], table_ids[p[0]], column_ids[p[0]]))
        picked: list[Candidate] = []
        for other, n in ranked:
            if len(picked) >= cfg.list_candidates:
                break
            if _exact_share(token_sets[c], token_sets[other]) < cfg.list_max_exact:
                picked.append(Candidate(str(column_ids[other]), str(table_ids[other]), int(n)))
        out[column_id] = Listed(str(table_ids[c]), tuple(picked))
    return out


def _exact_share(a: set[str], b: set[str]) -> float:
    """Tokens two samples share, as a share of the smaller sample."""
    return len(a & b) / max(1, min(len(a), len(b)))


def _shared_rare_grams(values: list[str], column_of: np.ndarray, n_columns: int, max_df: int) -> np.ndarray:
    """(a, b, q-grams shared) rows, a < b, over the q-grams held by 2..`max_df` columns."""
    gram, column = gram_columns(values, column_of, n_columns)
    if not len(gram):
        return np.zeros((0, 3), np.int64)
    starts, runs = equal_runs(gram)
    codes = [np.zeros(0, np.int64)]
    for d in range(2, max_df + 1):
        at = starts[runs == d]
        if not len(at):
            continue
        members = column[at[:, None] + np.arange(d)]  # ascending within a q-gram (the unique sort)
        upper = np.triu_indices(d, 1)
        codes.append((members[:, upper[0]] * n_columns + members[:, upper[1]]).ravel())
    pairs = np.sort(np.concatenate(codes))
    new = np.concatenate(([True], pairs[1:] != pairs[:-1])) if len(pairs) else np.zeros(0, bool)
    first = np.flatnonzero(new)
    count = np.diff(np.append(first, len(pairs)))
    pairs = pairs[first]
    return np.stack([pairs // n_columns, pairs % n_columns, count], axis=1)


def gram_columns(values: list[str], column_of: np.ndarray, n_columns: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (q-gram, column) pairs of the tokens `values` (token i of column
    `column_of[i]`), q = 4..6 and token sets, sorted by q-gram then column; a q-gram is named by
    `gram_key` of its hash. Cut `_GRAM_CHUNK` tokens at a time: `column_grams` holds a row of the
    longest token's width per token."""
    if n_columns >= 1 << _COLUMN_BITS:
        raise ValueError(f"at most {(1 << _COLUMN_BITS) - 1} columns, got {n_columns}")
    # one uint64 per (q-gram, column): the q-gram's 40-bit key in the high bits, the column in the
    # low ones (a collision of two keys only adds a shared q-gram to a candidate's score)
    parts = []
    for start in range(0, len(values), _GRAM_CHUNK):
        grams = column_grams(values[start : start + _GRAM_CHUNK], q_min=4, q_max=6)
        key = gram_key(grams.hashes) << np.uint64(_COLUMN_BITS)
        parts.append(_sorted_unique(key | column_of[start + grams.value].astype(np.uint64)))
    code = _sorted_unique(np.concatenate(parts)) if parts else np.zeros(0, np.uint64)
    return code >> np.uint64(_COLUMN_BITS), (code & np.uint64((1 << _COLUMN_BITS) - 1)).astype(np.int64)


def gram_key(hashes: np.ndarray) -> np.ndarray:
    """A q-gram's hash as `gram_columns` names it: 40 bits of its mix. Not the hash's own high bits:
    `column_grams`' polynomial hash puts a q-gram's first character in its low bits only, so those
    would merge every q-gram differing in its first character (`r1007` and `q0007`'s `1007` and
    `0007`: `search transform` then offered codes for references)."""
    return splitmix64(hashes) >> np.uint64(_COLUMN_BITS)


def _sorted_unique(codes: np.ndarray) -> np.ndarray:
    """The distinct codes, sorted (np.unique hashes integers by their low bits, which hold a few
    column numbers here: a sort is many times faster)."""
    codes = np.sort(codes)
    return codes[np.concatenate(([True], codes[1:] != codes[:-1]))] if len(codes) else codes


def pair_key(a: str, b: str) -> tuple[str, str]:
    """A pair of column ids in one order: the pair is learned once for both lists."""
    return (a, b) if a < b else (b, a)


def eligible(tokens: pa.Table, n_rows: Mapping[str, int], max_rows: int) -> pa.Table:
    """`tokens` of the tables of at most `max_rows` rows (`n_rows` by table_id)."""
    keep = [t for t, n in n_rows.items() if n <= max_rows]
    return tokens.filter(pc.is_in(tokens["table_id"], value_set=pa.array(keep, pa.string())))
