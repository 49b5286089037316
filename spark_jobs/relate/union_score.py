"""Scoring a table against its union candidates: every column-pair signal over whole arrays at once,
then the one-to-one column alignment of each candidate.

Table union search (Nargesian, Zhu, Pu, Miller, "Table Union Search on Open Data", PVLDB 11(7),
2018): a table is unionable with mine when its columns can be put under mine one to one.

* **Column-pair score**: a weighted mean of the signals that apply to the pair (`SIGNALS`): value
  containment (the overlap from gold `joinable` over the smaller set), header similarity, type
  compatibility, and for two numeric columns the similarity of their distributions (Bhattacharyya
  coefficient of normals with the columns' means and standard deviations). A signal returns NaN
  where it has nothing to say, and drops out of that pair's mean; a further signal (embeddings) is
  one more `ColumnSignal`.
* **Table-pair score**: maximum-weight bipartite matching of the column-pair scores
  (`scipy.optimize.linear_sum_assignment`); pairs under `MIN_PAIR_SCORE` are left unaligned, and the
  sum of the aligned scores is divided by the wider table's column count.

Why arrays: a table is scored against all its candidates in one group, so every signal is one numpy
expression over an (own columns × candidate columns) matrix instead of a Python call per column
pair; only the matching itself runs per candidate. The matching runs on the matrix oriented with the
table whose id sorts first as rows, so both directions of a pair get mirror-image alignments.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse
from scipy.optimize import linear_sum_assignment

MIN_PAIR_SCORE = 0.3

_NUMERIC = {"integer", "decimal", "numeric"}
_TEMPORAL = {"date", "datetime"}
_TEXTUAL = {"identifier", "categorical", "text"}


@dataclass(frozen=True)
class Columns:
    """Features of some columns as parallel arrays, one entry per column (in table order)."""

    column_id: np.ndarray  # str
    header: np.ndarray  # str
    type: np.ndarray  # str or None
    size: np.ndarray  # float: distinct values
    numeric: np.ndarray  # bool
    mean: np.ndarray  # float, NaN when not numeric
    std: np.ndarray  # float, NaN when unknown

    def __len__(self) -> int:
        return len(self.column_id)

    @classmethod
    def from_records(cls, records: Sequence[Mapping[str, Any]]) -> Columns:
        def floats(key: str) -> np.ndarray:
            return np.array([np.nan if r.get(key) is None else float(r[key]) for r in records], dtype=float)

        return cls(
            column_id=np.array([r["column_id"] for r in records], dtype=object),
            header=np.array([r["header"] for r in records], dtype=object),
            type=np.array([r.get("type") for r in records], dtype=object),
            size=floats("size"),
            numeric=np.array([bool(r.get("numeric")) for r in records], dtype=bool),
            mean=floats("mean"),
            std=floats("std"),
        )


@dataclass(frozen=True)
class ColumnSignal:
    """One piece of evidence that two columns hold the same kind of values: for columns `a` and `b`
    and their value overlaps (len(a) × len(b)), a matrix of scores in [0, 1], NaN where it has
    nothing to say about a pair."""

    name: str
    weight: float
    score: Callable[[Columns, Columns, np.ndarray], np.ndarray]


# ---------------------------------------------------------------------- headers
@functools.lru_cache(maxsize=1 << 16)
def header_words(header: str) -> tuple[str, ...]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", header)
    return tuple(w for w in re.split(r"[^0-9a-z]+", spaced.casefold()) if w)


@functools.lru_cache(maxsize=1 << 16)
def _header_sets(header: str) -> tuple[frozenset[str], frozenset[str]]:
    """(distinct words, distinct character trigrams of the words joined by spaces)."""
    words = header_words(header)
    joined = " ".join(words)
    grams = frozenset(joined[i : i + 3] for i in range(max(1, len(joined) - 2))) if words else frozenset()
    return frozenset(words), grams


def _jaccard(left: list[frozenset[str]], right: list[frozenset[str]]) -> np.ndarray:
    """Jaccard of every left set with every right set, through sparse incidence matrices."""
    vocab: dict[str, int] = {}

    def incidence(sets: list[frozenset[str]]) -> sparse.csr_matrix:
        rows = [i for i, s in enumerate(sets) for _ in s]
        cols = [vocab.setdefault(x, len(vocab)) for s in sets for x in s]
        return sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(sets), len(vocab) or 1))

    a, b = incidence(left), incidence(right)
    a.resize((len(left), max(len(vocab), 1)))
    b.resize((len(right), max(len(vocab), 1)))
    inter = (a @ b.T).toarray()
    union = np.array([len(s) for s in left], dtype=float)[:, None] + np.array([len(s) for s in right])[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def header_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The larger of the word Jaccard and the character-trigram Jaccard of the normalized headers
    (0 when either header has no word)."""
    sa, sb = [_header_sets(h) for h in a], [_header_sets(h) for h in b]
    words = _jaccard([s[0] for s in sa], [s[0] for s in sb])
    grams = _jaccard([s[1] for s in sa], [s[1] for s in sb])
    return np.maximum(words, grams)


# ---------------------------------------------------------------------- types and distributions
def type_compatibility(a: str | None, b: str | None) -> float | None:
    if not a or not b or a == "empty" or b == "empty":
        return None
    if a == b:
        return 1.0
    for family in (_NUMERIC, _TEMPORAL, _TEXTUAL):
        if a in family and b in family:
            return 0.8
    if a in _TEXTUAL or b in _TEXTUAL:
        return 0.2  # text can hold anything, but it is weak evidence
    return 0.0


def type_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    kinds = sorted({*a, *b}, key=str)
    code = {k: i for i, k in enumerate(kinds)}
    table = np.array([[type_compatibility(x, y) for y in kinds] for x in kinds], dtype=float)
    return table[np.ix_([code[x] for x in a], [code[y] for y in b])]


def distribution_matrix(a: Columns, b: Columns) -> np.ndarray:
    """Bhattacharyya coefficient of N(mean, std) fitted to two numeric columns (NaN unless both are
    numeric with a mean)."""
    ma, mb = a.mean[:, None], b.mean[None, :]
    sa, sb = np.nan_to_num(a.std)[:, None], np.nan_to_num(b.std)[None, :]
    var = sa * sa + sb * sb
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.sqrt(2 * sa * sb / var) * np.exp(-((ma - mb) ** 2) / (4 * var))
    point = (ma == mb).astype(float)
    out = np.where(var == 0.0, point, spread)
    applies = a.numeric[:, None] & b.numeric[None, :] & ~np.isnan(ma) & ~np.isnan(mb)
    return np.where(applies, out, np.nan)


def _value_matrix(a: Columns, b: Columns, overlap: np.ndarray) -> np.ndarray:
    smaller = np.minimum(a.size[:, None], b.size[None, :])
    return np.divide(overlap, smaller, out=np.full(overlap.shape, np.nan), where=smaller > 0)


SIGNALS: list[ColumnSignal] = [
    ColumnSignal("value", 0.5, _value_matrix),
    ColumnSignal("header", 0.15, lambda a, b, _o: header_matrix(a.header, b.header)),
    ColumnSignal("type", 0.1, lambda a, b, _o: type_matrix(a.type, b.type)),
    ColumnSignal("distribution", 0.25, lambda a, b, _o: distribution_matrix(a, b)),
]


def pair_scores(
    a: Columns, b: Columns, overlap: np.ndarray, signals: Sequence[ColumnSignal] = SIGNALS
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(weighted mean of the signals that apply, per column pair; {signal: its matrix})."""
    total = np.zeros((len(a), len(b)))
    weight = np.zeros((len(a), len(b)))
    parts: dict[str, np.ndarray] = {}
    for s in signals:
        value = np.asarray(s.score(a, b, overlap), dtype=float)
        parts[s.name] = value
        applies = ~np.isnan(value)
        total += s.weight * np.where(applies, value, 0.0)
        weight += s.weight * applies
    return np.divide(total, weight, out=np.zeros_like(total), where=weight > 0), parts


def column_pair_score(
    a: Mapping[str, Any], b: Mapping[str, Any], overlap: float, signals: Sequence[ColumnSignal] = SIGNALS
) -> tuple[float, dict[str, float]]:
    """One column pair's (score, {signal: score}) — the signals that apply."""
    scores, parts = pair_scores(Columns.from_records([a]), Columns.from_records([b]), np.array([[overlap]]), signals)
    return float(scores[0, 0]), {k: round(float(v[0, 0]), 6) for k, v in parts.items() if not math.isnan(v[0, 0])}


# ---------------------------------------------------------------------- alignment
@dataclass(frozen=True)
class Alignment:
    """A table's best one-to-one alignment with one candidate: `pairs` are (own index, candidate
    index, rounded score) in the table's column order."""

    score: float
    pairs: list[tuple[int, int, float]]


def align(scores: np.ndarray, *, rows_first: bool) -> Alignment:
    """Maximum-weight matching of `scores` (own columns × candidate columns). `rows_first`: this
    table's id sorts before the candidate's; otherwise the matching runs on the transpose, so that
    the pair's two directions agree."""
    if scores.size == 0:
        return Alignment(0.0, [])
    oriented = scores if rows_first else scores.T
    rows, cols = linear_sum_assignment(oriented, maximize=True)
    matched = (
        zip(rows.tolist(), cols.tolist(), strict=True) if rows_first else zip(cols.tolist(), rows.tolist(), strict=True)
    )
    pairs = sorted((i, j, round(float(scores[i, j]), 6)) for i, j in matched if scores[i, j] >= MIN_PAIR_SCORE)
    return Alignment(sum(p[2] for p in pairs) / max(scores.shape), pairs)


def alignment_json(own: Columns, other: Columns, alignment: Alignment, parts: Mapping[str, np.ndarray]) -> str:
    """The published alignment: each aligned pair with its score and the signals that applied."""
    return json.dumps(
        [
            {
                "column_id": own.column_id[i],
                "column": own.header[i],
                "candidate_column_id": other.column_id[j],
                "candidate_column": other.header[j],
                "score": score,
                "signals": {k: round(float(v[i, j]), 6) for k, v in parts.items() if not math.isnan(v[i, j])},
            }
            for i, j, score in alignment.pairs
        ]
    )


@dataclass(frozen=True)
class Candidate:
    """One candidate table of a table being listed: its id, columns and the value overlaps of the
    table's columns (rows) with its columns."""

    table_id: str
    columns: Columns
    overlap: np.ndarray


def rank_candidates(table_id: str, own: Columns, candidates: Sequence[Candidate], k: int) -> list[dict[str, Any]]:
    """`table_id`'s top-k unionable tables among `candidates` (score desc, then id), with their
    alignments; candidates with no aligned column are left out."""
    if not candidates or not len(own):
        return []
    everyone = Columns(
        *(np.concatenate([getattr(c.columns, f) for c in candidates]) for f in Columns.__dataclass_fields__)
    )
    overlap = np.concatenate([c.overlap for c in candidates], axis=1)
    scores, parts = pair_scores(own, everyone, overlap)
    scored = []
    start = 0
    for c in candidates:
        stop = start + len(c.columns)
        alignment = align(scores[:, start:stop], rows_first=table_id < c.table_id)
        if alignment.pairs:
            scored.append((-alignment.score, c.table_id, start, stop, c, alignment))
        start = stop
    scored.sort(key=lambda s: (s[0], s[1]))
    return [
        {
            "table_id": table_id,
            "rank": rank,
            "candidate_table_id": c.table_id,
            "score": alignment.score,
            "n_aligned": len(alignment.pairs),
            "alignment": alignment_json(own, c.columns, alignment, {n: m[:, lo:hi] for n, m in parts.items()}),
        }
        for rank, (_, _, lo, hi, c, alignment) in enumerate(scored[:k], start=1)
    ]
