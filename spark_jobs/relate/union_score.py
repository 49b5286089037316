"""Scoring a table against its union candidates: every column-pair signal over whole arrays at once,
then the one-to-one column alignment of each candidate.

Table union search (Nargesian, Zhu, Pu, Miller, "Table Union Search on Open Data", PVLDB 11(7),
2018): a table is unionable with mine when its columns can be put under mine one to one.

* **Column-pair score**: a weighted mean of the signals that apply to the pair (`SIGNALS`): value
  containment (the overlap from gold `joinable` over the smaller set), header similarity, type
  compatibility, for two numeric columns the similarity of their distributions (Bhattacharyya
  coefficient of normals with the columns' means and standard deviations, times the closeness of
  their quantiles), the overlap of their
  value formats (`value_shape`: `2013-01-05` -> `9-9-9`), and for columns not both numeric the
  cosine of their value embeddings (`catalog.core.embedding`). A signal returns NaN where it has
  nothing to say, and drops out of that pair's mean; a further signal is one more `ColumnSignal`.
* **Table-pair score**: maximum-weight bipartite matching of the column-pair scores
  (`scipy.optimize.linear_sum_assignment`); pairs under `MIN_PAIR_SCORE` are left unaligned. Each
  aligned pair counts with the *weight* of the table's own column: how rarely that column finds a
  match among the table's candidates (`column_weights`: a `rownames` or `year` column that matches
  in nearly every candidate says little about which of them is a partner, a column that matches in
  a few says much). The score is the aligned share of the table's total column weight, times its
  column count over the wider table's (a wider candidate is penalised for what it adds): an exact
  copy scores 1 and nothing scores more. Without weights this is the aligned scores' sum over the
  wider table's column count, as before the weights.

Why arrays: a table is scored against all its candidates in one group, so every signal is one numpy
expression over an (own columns × candidate columns) matrix instead of a Python call per column
pair; only the matching itself runs per candidate. The matching runs on the matrix oriented with the
table whose id sorts first as rows, so both directions of a pair get mirror-image alignments (their
scores differ: each direction weighs its own table's columns).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import sparse
from scipy.optimize import linear_sum_assignment
from scipy.spatial import distance

from catalog.core.embedding import DEFAULT_EMBEDDER

MIN_PAIR_SCORE = 0.3
MATCH_SCORE = 0.5  # a column "finds a match" in a candidate when its best pair there scores this much
WEIGHT_PRIOR = 10  # candidates added to the count a column's weight divides by: a table with few
# candidates, all of them matching everywhere, keeps most of its columns' weight
MAX_CELLS = 1 << 22  # column pairs scored at once per table: bounds a scoring group's matrices
BOUND_SLACK = 1e-6  # a table score sums pair scores rounded to 6 places: a bound this close may tie
DIMENSION = DEFAULT_EMBEDDER.dimension
QUANTILE_POINTS = np.linspace(0.05, 0.95, 10)  # the quantiles of its sampled values a numeric column keeps
QUANTILES = len(QUANTILE_POINTS)
QUANTILE_SCALE = 0.1  # the quantiles' normalised distance at which their closeness falls to 1/e
SHAPE_DIGITS = "[0-9]+"
SHAPE_WORDS = "[^0-9 !-/:-@\\[-`{-~]+"  # the same class in Python's re and in RE2
SHAPE_LENGTH = 24

_NUMERIC = {"integer", "decimal", "numeric"}
_TEMPORAL = {"date", "datetime"}
_TEXTUAL = {"identifier", "categorical", "text"}


@dataclass(frozen=True)
class Columns:
    """Features of some columns as parallel arrays, one entry per column (in table order). Header
    words, header trigrams and value shapes are sparse incidence rows over one vocabulary per
    process (`_VOCAB`), so the header and format signals of a whole scoring group are sparse
    products rather than Python loops over column pairs."""

    column_id: np.ndarray  # str
    header: np.ndarray  # str
    type: np.ndarray  # str or None
    size: np.ndarray  # float: distinct values
    numeric: np.ndarray  # bool
    mean: np.ndarray  # float, NaN when not numeric
    std: np.ndarray  # float, NaN when unknown
    embedding: np.ndarray  # (columns, dimension) float32: unit vector of the column's values, or zeros
    quantiles: np.ndarray  # (columns, QUANTILES) float: a numeric column's sampled quantiles, or NaN
    words: sparse.csr_matrix  # (columns, vocabulary): 1 for each distinct word of the header
    grams: sparse.csr_matrix  # (columns, vocabulary): 1 for each distinct character trigram of the header
    shapes: sparse.csr_matrix  # (columns, vocabulary): the share of the column's values with each shape

    def __len__(self) -> int:
        return len(self.column_id)

    @classmethod
    def build(
        cls,
        *,
        column_id: Sequence[str],
        header: Sequence[str],
        type: Sequence[str | None],
        size: np.ndarray,
        numeric: np.ndarray,
        mean: np.ndarray,
        std: np.ndarray,
        embedding: np.ndarray,
        shapes: Sequence[Sequence[tuple[str, float]]],
        quantiles: np.ndarray | None = None,
    ) -> Columns:
        ids = [_header_ids(h) for h in header]
        return cls(
            column_id=np.asarray(column_id, dtype=object),
            header=np.asarray(header, dtype=object),
            type=np.asarray(type, dtype=object),
            size=size,
            numeric=numeric,
            mean=mean,
            std=std,
            embedding=embedding,
            quantiles=np.full((len(column_id), QUANTILES), np.nan) if quantiles is None else quantiles,
            words=_incidence("word", [w for w, _ in ids]),
            grams=_incidence("gram", [g for _, g in ids]),
            shapes=_incidence(
                "shape",
                [_vocab_ids("shape", [shape for shape, _ in sorted(row)]) for row in shapes],
                [np.array([share for _, share in sorted(row)], dtype=float) for row in shapes],
            ),
        )

    @classmethod
    def from_records(cls, records: Sequence[Mapping[str, Any]]) -> Columns:
        """From feature records as the unionable stage builds them (`shapes`: a list of
        {shape, share}; `embedding` and `quantiles`: lists of floats or None)."""

        def floats(key: str) -> np.ndarray:
            return np.array([np.nan if r.get(key) is None else float(r[key]) for r in records], dtype=float)

        embedding = np.zeros((len(records), DIMENSION), np.float32)
        quantiles = np.full((len(records), QUANTILES), np.nan)
        for i, r in enumerate(records):
            if r.get("embedding"):
                embedding[i] = r["embedding"]
            if r.get("quantiles"):
                quantiles[i] = r["quantiles"]
        return cls.build(
            column_id=[r["column_id"] for r in records],
            header=[r["header"] for r in records],
            type=[r.get("type") for r in records],
            size=floats("size"),
            numeric=np.array([bool(r.get("numeric")) for r in records], dtype=bool),
            mean=floats("mean"),
            std=floats("std"),
            embedding=embedding,
            shapes=[[(x["shape"], float(x["share"])) for x in r.get("shapes") or ()] for r in records],
            quantiles=quantiles,
        )

    @classmethod
    def from_arrow(cls, table: pa.Table) -> Columns:
        """From `unionable_features` rows, without a Python object per embedding value: what
        `from_records` builds from the same rows."""

        def floats(name: str) -> np.ndarray:
            return np.asarray(table.column(name).cast(pa.float64()).fill_null(np.nan).to_numpy(), dtype=float)

        return cls.build(
            column_id=table.column("column_id").to_pylist(),
            header=table.column("header").to_pylist(),
            type=table.column("type").to_pylist(),
            size=floats("size"),
            numeric=table.column("numeric").fill_null(False).to_numpy(zero_copy_only=False).astype(bool),
            mean=floats("mean"),
            std=floats("std"),
            embedding=_fixed_rows(table.column("embedding"), DIMENSION, np.float32),
            shapes=[[(x["shape"], x["share"]) for x in row or ()] for row in table.column("shapes").to_pylist()],
            quantiles=(
                _fixed_rows(table.column("quantiles"), QUANTILES, np.float64, empty=np.nan)
                if "quantiles" in table.column_names  # features written before the quantiles: none
                else None
            ),
        )

    def take(self, rows: np.ndarray) -> Columns:
        """The columns at `rows`, in that order."""
        values = (getattr(self, f) for f in Columns.__dataclass_fields__)
        return Columns(*(_take_rows(v, rows) if sparse.issparse(v) else v[rows] for v in values))

    @classmethod
    def concat(cls, parts: Sequence[Columns]) -> Columns:
        """The columns of `parts`, one after the other."""
        fields = {}
        for f in Columns.__dataclass_fields__:
            values = [getattr(c, f) for c in parts]
            if sparse.issparse(values[0]):
                width = max(v.shape[1] for v in values)
                fields[f] = sparse.vstack([_widened(v, width) for v in values], format="csr")
            else:
                fields[f] = np.concatenate(values)
        return cls(**fields)


def _fixed_rows(lists: pa.ChunkedArray, width: int, dtype: type, empty: float = 0.0) -> np.ndarray:
    """A list column whose lists hold `width` numbers or none as a (rows, width) array, `empty` in the
    rows of missing lists, without a Python object per number."""
    rows = lists.combine_chunks()
    lengths = pc.list_value_length(rows).fill_null(0).to_numpy()
    out: np.ndarray = np.full((len(rows), width), empty, dtype)
    out[lengths > 0] = rows.flatten().to_numpy(zero_copy_only=False).reshape(-1, width)
    return out


# one vocabulary per kind per process: ids only ever get added, so rows built earlier stay valid
_VOCAB: dict[str, dict[str, int]] = {"word": {}, "gram": {}, "shape": {}}


def _vocab_ids(kind: str, items: Iterable[str]) -> np.ndarray:
    vocab = _VOCAB[kind]
    return np.array([vocab.setdefault(x, len(vocab)) for x in items], dtype=np.int64)


def _incidence(kind: str, ids: Sequence[np.ndarray], values: Sequence[np.ndarray] | None = None) -> sparse.csr_matrix:
    """Rows of a sparse matrix over vocabulary `kind`: row i holds `values[i]` (ones when None) at
    `ids[i]`, in the order given."""
    indptr = np.r_[0, np.cumsum([len(x) for x in ids])].astype(np.int64)
    indices = np.concatenate(ids) if len(ids) else np.zeros(0, np.int64)
    data = np.concatenate(values) if values is not None and len(values) else np.ones(len(indices))
    return sparse.csr_matrix((data, indices, indptr), shape=(len(ids), max(len(_VOCAB[kind]), 1)))


def _take_rows(m: sparse.csr_matrix, rows: np.ndarray) -> sparse.csr_matrix:
    """The rows `rows` of `m`, in that order: a gather on its arrays (scipy's fancy row indexing
    validates and converts on every call, and a scoring group takes rows twice per table)."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = m.indptr[rows].astype(np.int64)
    lengths = m.indptr[rows + 1] - starts
    indptr = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    at = np.repeat(starts - indptr[:-1], lengths) + np.arange(indptr[-1])
    return sparse.csr_matrix((m.data[at], m.indices[at], indptr), shape=(len(rows), m.shape[1]))


def _widened(m: sparse.csr_matrix, width: int) -> sparse.csr_matrix:
    """`m` over a vocabulary that has grown to `width` since it was built."""
    if m.shape[1] == width:
        return m
    return sparse.csr_matrix((m.data, m.indices, m.indptr), shape=(m.shape[0], width))


def _aligned(a: sparse.csr_matrix, b: sparse.csr_matrix) -> tuple[sparse.csr_matrix, sparse.csr_matrix]:
    width = max(a.shape[1], b.shape[1])
    return _widened(a, width), _widened(b, width)


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


@functools.lru_cache(maxsize=1 << 18)
def _header_ids(header: str) -> tuple[np.ndarray, np.ndarray]:
    """The vocabulary ids of a header's distinct words and trigrams."""
    words, grams = _header_sets(header)
    return _vocab_ids("word", sorted(words)), _vocab_ids("gram", sorted(grams))


def _jaccard(a: sparse.csr_matrix, b: sparse.csr_matrix) -> np.ndarray:
    """Jaccard of every row set of `a` with every row set of `b` (0/1 incidence rows)."""
    a, b = _aligned(a, b)
    inter = (a @ b.T).toarray()
    union = np.diff(a.indptr).astype(float)[:, None] + np.diff(b.indptr)[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def header_matrix(a: Columns, b: Columns) -> np.ndarray:
    """The larger of the word Jaccard and the character-trigram Jaccard of the normalized headers
    (0 when either header has no word)."""
    return np.maximum(_jaccard(a.words, b.words), _jaccard(a.grams, b.grams))


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
    """Bhattacharyya coefficient of N(mean, std) fitted to two numeric columns, times the closeness of
    their quantiles where both have them (`quantile_closeness`; NaN unless both are numeric with a
    mean). Computed on the block of numeric columns only: pairs not both numeric cost nothing."""
    rows = np.flatnonzero(a.numeric & ~np.isnan(a.mean))
    cols = np.flatnonzero(b.numeric & ~np.isnan(b.mean))
    ma, mb = a.mean[rows, None], b.mean[None, cols]
    sa, sb = np.nan_to_num(a.std[rows])[:, None], np.nan_to_num(b.std[cols])[None, :]
    var = sa * sa + sb * sb
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.sqrt(2 * sa * sb / var) * np.exp(-((ma - mb) ** 2) / (4 * var))
    block = np.where(var == 0.0, (ma == mb).astype(float), spread)
    closeness = _closeness(a.quantiles[rows], b.quantiles[cols])
    block = np.where(np.isnan(closeness), block, block * closeness)
    return _placed((len(a), len(b)), rows, cols, block)


def _placed(shape: tuple[int, int], rows: np.ndarray, cols: np.ndarray, block: np.ndarray) -> np.ndarray:
    """A `shape` matrix holding `block` at `rows` × `cols` and NaN elsewhere (the block itself when it
    covers the matrix: no copy through fancy indexing, which costs more than the arithmetic for a
    wide group)."""
    if block.shape == shape:
        return block
    out = np.full(shape, np.nan)
    out[np.ix_(rows, cols)] = block
    return out


def quantile_closeness(a: Columns, b: Columns) -> np.ndarray:
    """exp(−d / QUANTILE_SCALE) for two columns' quantiles, d the mean absolute difference of their
    quantiles over the wider of their spans (q95 − q05): 1 for the same distribution, whatever its
    scale, near 1 for random rows of one column (NaN where either has no quantiles).

    Why, besides the normal fit: columns whose means and deviations agree often differ in shape (a
    count beside a measure, a skewed column beside a symmetric one), and a normal fit cannot tell
    them apart. D3L compares numeric columns by their distributions for the same reason. On the
    union benchmark over the whole seed this raised MAP@10 from 0.934 to 0.952."""
    return _closeness(a.quantiles, b.quantiles)


def _closeness(qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
    """`quantile_closeness` of quantile rows `qa` × `qb`, computed where both rows are known."""
    shape = (len(qa), len(qb))
    rows, cols = np.flatnonzero(~np.isnan(qa[:, 0])), np.flatnonzero(~np.isnan(qb[:, 0]))
    qa, qb = qa[rows], qb[cols]
    gap = distance.cdist(qa, qb, "cityblock")  # Σ_j |qa_j − qb_j|, with no (a × b × points) array
    span = np.maximum((qa[:, -1] - qa[:, 0])[:, None], (qb[:, -1] - qb[:, 0])[None, :])
    with np.errstate(divide="ignore", invalid="ignore"):
        apart = np.where(gap == 0.0, 0.0, gap / QUANTILES / span)
    return _placed(shape, rows, cols, np.exp(-apart / QUANTILE_SCALE))


# ---------------------------------------------------------------------- formats and embeddings
def value_shape(token: str) -> str:
    """A value's format: runs of digits become `9`, runs of anything but digits, spaces and ASCII
    punctuation become `a`, the rest stays, cut to `SHAPE_LENGTH` (`2013-01-05` -> `9-9-9`,
    `$1,200.50` -> `$9,9.9`, `new york` -> `a a`). `union_features.shape_shares` computes the same
    with pyarrow's RE2 (`SHAPE_DIGITS`, `SHAPE_WORDS`)."""
    return re.sub(SHAPE_WORDS, "a", re.sub(SHAPE_DIGITS, "9", token))[:SHAPE_LENGTH]


def format_matrix(a: Columns, b: Columns) -> np.ndarray:
    """Histogram intersection of the columns' value shapes: the share of values both columns format
    alike (NaN when either has no values). For each shape of each of `a`'s columns, the columns of
    `b` that have it: one sparse column slice each, a few per column."""
    left, right = _aligned(a.shapes, b.shapes)
    by_shape = right.tocsc()
    out = np.zeros((len(a), len(b)))
    for i in range(len(a)):
        for at in range(left.indptr[i], left.indptr[i + 1]):
            shape, share = left.indices[at], left.data[at]
            lo, hi = by_shape.indptr[shape], by_shape.indptr[shape + 1]
            out[i, by_shape.indices[lo:hi]] += np.minimum(share, by_shape.data[lo:hi])
    has = (np.diff(left.indptr) > 0)[:, None] & (np.diff(right.indptr) > 0)[None, :]
    return np.where(has, out, np.nan)


def embedding_matrix(a: Columns, b: Columns) -> np.ndarray:
    """Cosine of the columns' value embeddings, negatives as 0 (NaN when either column has no vector
    or both are numeric: digits look alike to a character embedder whatever they measure, and the
    distribution signal speaks for numbers)."""
    cosine = np.clip(a.embedding @ b.embedding.T, 0.0, 1.0).astype(float)
    has_a, has_b = np.any(a.embedding, axis=1), np.any(b.embedding, axis=1)
    applies = has_a[:, None] & has_b[None, :] & ~(a.numeric[:, None] & b.numeric[None, :])
    return np.where(applies, cosine, np.nan)


def _value_matrix(a: Columns, b: Columns, overlap: np.ndarray) -> np.ndarray:
    smaller = np.minimum(a.size[:, None], b.size[None, :])
    return np.divide(overlap, smaller, out=np.full(overlap.shape, np.nan), where=smaller > 0)


# Weights fitted on the union benchmark (`bench/union_fit.py`: coordinate ascent on MAP@10 over two
# benchmark seeds, then rounded towards the seeds' consensus): header and distribution separate
# right from wrong column pairs best (AUC 0.95 and 0.99), value overlap and type least (about 0.7:
# reformatted partners share no value, unrelated real tables share many).
SIGNALS: list[ColumnSignal] = [
    ColumnSignal("value", 0.1, _value_matrix),
    ColumnSignal("header", 0.35, lambda a, b, _o: header_matrix(a, b)),
    ColumnSignal("type", 0.05, lambda a, b, _o: type_matrix(a.type, b.type)),
    ColumnSignal("distribution", 0.35, lambda a, b, _o: distribution_matrix(a, b)),
    ColumnSignal("format", 0.1, lambda a, b, _o: format_matrix(a, b)),
    ColumnSignal("embedding", 0.15, lambda a, b, _o: embedding_matrix(a, b)),
]
SIGNAL_NAMES = tuple(s.name for s in SIGNALS)


def weighted(weights: Mapping[str, float] | None) -> list[ColumnSignal]:
    """`SIGNALS` with some weights replaced (`weights`: signal name -> weight; 0 turns a signal off)."""
    if not weights:
        return SIGNALS
    unknown = sorted(set(weights) - set(SIGNAL_NAMES))
    if unknown:
        raise ValueError(f"unknown union signals {unknown}; known: {list(SIGNAL_NAMES)}")
    return [dataclasses.replace(s, weight=float(weights.get(s.name, s.weight))) for s in SIGNALS]


def pair_scores(
    a: Columns, b: Columns, overlap: np.ndarray, signals: Sequence[ColumnSignal] = SIGNALS
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(weighted mean of the signals that apply, per column pair; {signal: its matrix})."""
    parts = {s.name: np.asarray(s.score(a, b, overlap), dtype=float) for s in signals}
    return _weighted_mean(parts, signals), parts


def _weighted_mean(parts: Mapping[str, np.ndarray], signals: Sequence[ColumnSignal]) -> np.ndarray:
    """The weighted mean of the signal matrices `parts`, each signal counting where it applies."""
    shape = next(iter(parts.values())).shape
    total = np.zeros(shape)
    weight = np.zeros(shape)
    for s in signals:
        value = parts[s.name]
        applies = ~np.isnan(value)
        total += s.weight * np.where(applies, value, 0.0)
        weight += s.weight * applies
    return np.divide(total, weight, out=np.zeros_like(total), where=weight > 0)


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


def align(scores: np.ndarray, *, rows_first: bool, weights: np.ndarray | None = None) -> Alignment:
    """Maximum-weight matching of `scores` (own columns × candidate columns). `rows_first`: this
    table's id sorts before the candidate's; otherwise the matching runs on the transpose, so that
    the pair's two directions align the same columns. `weights`: each own column's weight in the
    table score (`column_weights`; all 1 when None)."""
    if scores.size == 0:
        return Alignment(0.0, [])
    oriented = scores if rows_first else scores.T
    rows, cols = linear_sum_assignment(oriented, maximize=True)
    matched = (
        zip(rows.tolist(), cols.tolist(), strict=True) if rows_first else zip(cols.tolist(), rows.tolist(), strict=True)
    )
    pairs = sorted((i, j, round(float(scores[i, j]), 6)) for i, j in matched if scores[i, j] >= MIN_PAIR_SCORE)
    w = np.ones(scores.shape[0]) if weights is None else weights
    share = sum(float(w[i]) * score for i, _, score in pairs) / float(w.sum())
    return Alignment(share * scores.shape[0] / max(scores.shape), pairs)


def column_weights(matches: np.ndarray, n_candidates: int) -> np.ndarray:
    """Each own column's weight in the table score, from `matches`: in how many of the table's
    `n_candidates` candidates it finds a match (best pair score at least `MATCH_SCORE`). One minus
    that share, counted over `WEIGHT_PRIOR` more candidates than there are: the rarer the match,
    the more it says that a candidate is a partner rather than a table with a common column."""
    return 1.0 - matches / (n_candidates + WEIGHT_PRIOR)


def alignment_json(
    own: Columns,
    other: Columns,
    offset: int,
    alignment: Alignment,
    values: Mapping[str, np.ndarray],
    weights: np.ndarray,
) -> str:
    """The published alignment: each aligned pair with its score, the weight of the own column in
    the table score (`column_weights`) and the signals that applied (the candidate's columns start
    at `offset` in `other`; `values`: each signal's value for each pair of `alignment.pairs`, NaN
    where it did not)."""
    return json.dumps(
        [
            {
                "column_id": own.column_id[i],
                "column": own.header[i],
                "candidate_column_id": other.column_id[offset + j],
                "candidate_column": other.header[offset + j],
                "score": score,
                "weight": round(float(weights[i]), 6),
                "signals": {k: round(float(v[n]), 6) for k, v in values.items() if not math.isnan(v[n])},
            }
            for n, (i, j, score) in enumerate(alignment.pairs)
        ]
    )


def _pair_values(
    parts: Mapping[str, np.ndarray], offset: int, pairs: Sequence[tuple[int, int, float]]
) -> dict[str, np.ndarray]:
    """Each signal's value for each aligned pair, read from matrices whose candidate columns start
    at `offset`."""
    rows = np.array([i for i, _, _ in pairs], dtype=np.int64)
    cols = np.array([j for _, j, _ in pairs], dtype=np.int64) + offset
    return {name: m[rows, cols] for name, m in parts.items()}


def _recomputed_values(
    own: Columns,
    other: Columns,
    overlap: np.ndarray,
    pairs: Sequence[tuple[int, int, float]],
    signals: Sequence[ColumnSignal],
) -> dict[str, np.ndarray]:
    """Each signal's value for each aligned pair, computed for those pairs alone (signals are
    elementwise: a block of pairs is the diagonal of its own small matrices)."""
    values: dict[str, list[float]] = {s.name: [] for s in signals}
    for start in range(0, len(pairs), 256):
        rows = np.array([i for i, _, _ in pairs[start : start + 256]], dtype=np.int64)
        cols = np.array([j for _, j, _ in pairs[start : start + 256]], dtype=np.int64)
        _, parts = pair_scores(own.take(rows), other.take(cols), overlap[np.ix_(rows, cols)], signals)
        for name, m in parts.items():
            values[name].extend(np.diagonal(m).tolist())
    return {name: np.array(v) for name, v in values.items()}


@dataclass(frozen=True)
class Candidate:
    """One candidate table of a table being listed: its id, columns and the value overlaps of the
    table's columns (rows) with its columns."""

    table_id: str
    columns: Columns
    overlap: np.ndarray


def rank_candidates(
    table_id: str, own: Columns, candidates: Sequence[Candidate], k: int, signals: Sequence[ColumnSignal] = SIGNALS
) -> list[dict[str, Any]]:
    """`table_id`'s top-k unionable tables among `candidates` (score desc, then id), with their
    alignments; candidates with no aligned column are left out."""
    if not candidates or not len(own):
        return []
    spans = column_spans([c.table_id for c in candidates], [len(c.columns) for c in candidates])
    everyone = Columns.concat([c.columns for c in candidates])
    overlap = np.concatenate([c.overlap for c in candidates], axis=1)
    return rank_spans(table_id, own, everyone, spans, overlap, k, signals)


def column_spans(owners: Sequence[str], widths: Sequence[int]) -> list[tuple[str, int, int]]:
    """(owner, lo, hi) of each owner's columns when their columns are laid side by side."""
    bounds = np.r_[0, np.cumsum(widths, dtype=np.int64)].tolist()
    return [(o, lo, hi) for o, lo, hi in zip(owners, bounds[:-1], bounds[1:], strict=True)]


def rank_spans(
    table_id: str,
    own: Columns,
    everyone: Columns,
    spans: Sequence[tuple[str, int, int]],
    overlap: np.ndarray,
    k: int,
    signals: Sequence[ColumnSignal] = SIGNALS,
) -> list[dict[str, Any]]:
    """`rank_candidates` with every candidate's columns in one `Columns`: candidate `id` owns the
    columns `lo:hi` of `everyone` for each (id, lo, hi) of `spans`; `overlap` is own × everyone.

    Memory stays bounded however wide the tables: scores are computed for a run of candidates at a
    time, at most `MAX_CELLS` column pairs (a wider candidate alone), in blocks of own columns of
    at most `MAX_CELLS` pairs each, keeping only the combined score matrix (the signals published
    with an alignment are then recomputed for its pairs alone). A 7,000-column table scored against 50
    copies of itself would otherwise need matrices of 7,000 × 350,000 cells per signal. The column
    weights need every candidate's matches before any matching: candidates that fit in one run are
    scored once; with more runs, each is scored again for the matching unless no candidate in it
    can enter the top k (`_score_bounds`)."""
    if not spans or not len(own):
        return []
    runs = _runs(spans, len(own))
    kept: _Scored | None = None  # one run is kept for the matching; more are each scored again (bounded memory)
    best_pairs = np.zeros((len(own), len(spans)))  # each own column's best pair score in each candidate
    at = 0
    for run in runs:
        done = _score_run(own, everyone, overlap, run, signals)
        for _, lo, hi in run:
            if hi > lo:
                best_pairs[:, at] = done.scores[:, lo - done.first : hi - done.first].max(axis=1)
            at += 1
        kept = done if len(runs) == 1 else None
    weights = column_weights((best_pairs >= MATCH_SCORE).sum(axis=1), len(spans))
    bounds = _score_bounds(best_pairs, weights, [hi - lo for _, lo, hi in spans])
    best: list[_Ranked] = []
    starts = np.cumsum([0, *(len(run) for run in runs)])
    # the runs with the most promising candidate first: a run whose bounds are all under the k-th
    # best score so far is neither matched nor, for a table wider than one run, scored again
    for r_no in sorted(range(len(runs)), key=lambda r: -float(bounds[starts[r] : starts[r + 1]].max())):
        run, run_bounds = runs[r_no], bounds[starts[r_no] : starts[r_no + 1]]
        if len(best) == k and run_bounds.max() < -best[-1].neg_score - BOUND_SLACK:
            break
        done = kept or _score_run(own, everyone, overlap, run, signals)
        first, part, block, parts = done.first, done.part, done.block, done.parts
        for i in np.argsort(-run_bounds, kind="stable").tolist():
            if len(best) == k and run_bounds[i] < -best[-1].neg_score - BOUND_SLACK:
                break  # neither this candidate nor any after it in this run can enter the top k
            other, lo, hi = run[i]
            alignment = align(done.scores[:, lo - first : hi - first], rows_first=table_id < other, weights=weights)
            if alignment.pairs:
                best = sorted([*best, _Ranked(-alignment.score, other, alignment, lo - first, hi - first)], key=_order)
                best = best[:k]
        for r in best:
            if r.described is None:
                values = (
                    _pair_values(parts, r.lo, r.alignment.pairs)
                    if parts is not None
                    else _recomputed_values(
                        own, part.take(np.arange(r.lo, r.hi)), block[:, r.lo : r.hi], r.alignment.pairs, signals
                    )
                )
                r.described = alignment_json(own, part, r.lo, r.alignment, values, weights)
    return [
        {
            "table_id": table_id,
            "rank": rank,
            "candidate_table_id": r.other,
            "score": r.alignment.score,
            "n_aligned": len(r.alignment.pairs),
            "alignment": r.described,
        }
        for rank, r in enumerate(best, start=1)
    ]


def _order(r: _Ranked) -> tuple[float, str]:
    return (r.neg_score, r.other)


def _score_bounds(best_pairs: np.ndarray, weights: np.ndarray, widths: Sequence[int]) -> np.ndarray:
    """An upper bound on each candidate's table score (`align`): each own column aligned with its
    best pair in the candidate, as if no two wanted the same column. A candidate whose bound is under
    the k-th best score so far need not be matched at all."""
    counted = np.where(best_pairs >= MIN_PAIR_SCORE, best_pairs, 0.0)
    n = len(weights)
    share = (weights @ counted) / float(weights.sum())
    return share * n / np.maximum(n, np.asarray(widths, dtype=float))


@dataclass(frozen=True)
class _Scored:
    """One run of candidates scored: its columns `part` (starting at `first` of everyone), the
    overlaps `block`, the combined `scores`, and each signal's matrix when they fit in memory."""

    first: int
    part: Columns
    block: np.ndarray
    parts: dict[str, np.ndarray] | None
    scores: np.ndarray


def _score_run(
    own: Columns,
    everyone: Columns,
    overlap: np.ndarray,
    run: Sequence[tuple[str, int, int]],
    signals: Sequence[ColumnSignal],
) -> _Scored:
    """`rank_spans`' scores of one run of candidates: every signal's matrix kept when the run fits
    in `MAX_CELLS` column pairs, else only the combined scores, computed in blocks of own columns."""
    first, last = run[0][1], run[-1][2]
    part = everyone if (first, last) == (0, len(everyone)) else everyone.take(np.arange(first, last))
    block = overlap[:, first:last]
    if len(own) * (last - first) <= MAX_CELLS:
        scores, parts = pair_scores(own, part, block, signals)
        return _Scored(first, part, block, parts, scores)
    return _Scored(first, part, block, None, _score_matrix(own, part, block, signals))


@dataclass
class _Ranked:
    """A candidate among the best so far: its alignment, its columns' place in the run that scored
    it, and its published alignment once it has one."""

    neg_score: float
    other: str
    alignment: Alignment
    lo: int
    hi: int
    described: str | None = None


def _score_matrix(own: Columns, other: Columns, overlap: np.ndarray, signals: Sequence[ColumnSignal]) -> np.ndarray:
    """`pair_scores` of own × other, computed in blocks of own columns of at most `MAX_CELLS` pairs."""
    step = max(1, MAX_CELLS // max(len(other), 1))
    if step >= len(own):
        return pair_scores(own, other, overlap, signals)[0]
    out = np.empty((len(own), len(other)))
    for lo in range(0, len(own), step):
        rows = np.arange(lo, min(lo + step, len(own)))
        out[rows] = pair_scores(own.take(rows), other, overlap[rows], signals)[0]
    return out


def _runs(spans: Sequence[tuple[str, int, int]], rows: int) -> list[list[tuple[str, int, int]]]:
    """`spans` cut into consecutive runs of at most `MAX_CELLS` column pairs with `rows` own columns
    (a wider candidate alone in its run)."""
    runs: list[list[tuple[str, int, int]]] = []
    for span in spans:
        if runs and (span[2] - runs[-1][0][1]) * rows <= MAX_CELLS:
            runs[-1].append(span)
        else:
            runs.append([span])
    return runs
