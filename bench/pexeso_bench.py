"""Benchmark: PEXESO semantic join search against numpy brute force on the same lake (issue 18).

`python -m bench.pexeso_bench [--lake text|clustered] [--vectors 1000000] [--queries 20]
[--query-size 100] [--tau 0.06] [--T 0.6] [--seed 0]`

The lake is built in process, without Spark, in columns of 20 to 2,000 distinct vectors, and
indexed with the default shape (5 PCA pivots, 6 levels):
* `text`: each value a name of 1 to 3 words of random syllables, drawn from a shared vocabulary so
  that columns overlap, embedded by PEXESO's embedder (`pexeso_embedder()`). A query is
  `--query-size` values of a lake column, a third with their case or punctuation changed (the same
  vector), a third with one letter dropped;
* `clustered`: unit vectors around 2,000 random centres in an 8-dimensional subspace (the low
  intrinsic dimension of the paper's word embeddings, which pivots exploit); a query is vectors
  near one column's vectors.
Each query runs with both methods in a random order; the answers must be identical (the run fails
otherwise).

A third method, when `faiss` (faiss-cpu, a dev extra) is installed, is what an engineer would write
instead: `IndexFlatL2.range_search` over every lake vector (squared radius, widened by 1e-6: faiss's
test is strict) plus a per-column count of the query values hit; its answers (column ids and
n_matched) are compared with PEXESO's and differences counted (float32 distances at τ may differ).

Printed: the index build time and its size in memory (vectors, pivot coordinates, keys), and the
p50/p95 latency of each method and the p50 ratios brute/pexeso and faiss/pexeso. Run with
`OPENBLAS_NUM_THREADS=1` on a shared machine: OpenBLAS threads contending for cores made every
small matrix product many times slower.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Sequence

import numpy as np

from catalog.search.pexeso.index import (
    ColumnRef,
    ColumnVectors,
    EmbeddingSpec,
    IndexShape,
    PexesoIndex,
    pexeso_embedder,
)
from catalog.search.pexeso.search import Query, need_count, search

_INTRINSIC = 8
SYLLABLES = [a + b for a in "bdfgklmnprstvz" for b in "aeiou"] + ["st", "ch", "sh", "th", "ng", "er", "an", "el"]


def _names(rng: np.random.Generator, n: int) -> list[str]:
    """`n` distinct names of 1-3 words of 2-4 syllables."""
    out: set[str] = set()
    while len(out) < n:
        k = n - len(out)
        words = rng.integers(1, 4, size=k)
        for w in words.tolist():
            out.add(" ".join("".join(rng.choice(SYLLABLES, size=int(rng.integers(2, 5)))) for _ in range(w)).title())
    return sorted(out)[:n]


def _corrupt(rng: random.Random, value: str) -> str:
    kind = rng.randrange(3)
    if kind == 0:
        return value.upper() if rng.random() < 0.5 else value.replace(" ", ". ") + "."
    if kind == 1 and len(value) > 4:
        i = rng.randrange(1, len(value) - 1)
        return value[:i] + value[i + 1 :]
    return value


def build_lake(n_vectors: int, seed: int) -> tuple[list[ColumnVectors], list[list[str]]]:
    """Columns (with their vectors) holding about `n_vectors` values, and their raw values."""
    rng = np.random.default_rng(seed)
    vocabulary = _names(rng, max(1000, n_vectors // 3))
    embedder = pexeso_embedder()
    columns: list[ColumnVectors] = []
    raw: list[list[str]] = []
    held = 0
    while held < n_vectors:
        size = min(n_vectors - held, int(rng.integers(20, 2000)))
        values = sorted({vocabulary[i] for i in rng.integers(len(vocabulary), size=size)})
        vectors = embedder.embed(values)
        ref = ColumnRef(f"c{len(columns)}", f"t{len(columns) // 4}", f"col{len(columns) % 4}")
        columns.append(ColumnVectors(ref, values, vectors))
        raw.append(values)
        held += len(values)
    return columns, raw


def clustered_lake(n_vectors: int, seed: int, dimension: int) -> list[ColumnVectors]:
    """Columns of vectors around shared centres; values are the vectors' numbers."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.standard_normal((dimension, _INTRINSIC)))[0].T  # a random 8-d subspace
    centres = rng.standard_normal((2000, _INTRINSIC)) @ basis * np.sqrt(dimension / _INTRINSIC)
    columns: list[ColumnVectors] = []
    held = 0
    while held < n_vectors:
        size = min(n_vectors - held, int(rng.integers(20, 2000)))
        picked = centres[rng.integers(len(centres), size=size)]
        m = picked + rng.standard_normal(picked.shape) * 0.05
        vectors = (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)
        ref = ColumnRef(f"c{len(columns)}", f"t{len(columns) // 4}", f"col{len(columns) % 4}")
        columns.append(ColumnVectors(ref, [f"v{held + i}" for i in range(size)], vectors))
        held += size
    return columns


def _size(index: PexesoIndex) -> int:
    return int(index.vectors.nbytes + index.mapped.nbytes + index.keys.nbytes + index.column_of.nbytes)


def _clustered_query(column: ColumnVectors, size: int, rng: random.Random, spec: EmbeddingSpec) -> Query:
    """`size` vectors near the column's (noise of 0.02 per coordinate before normalising)."""
    g = np.random.default_rng(rng.randrange(1 << 30))
    picked = column.vectors[g.integers(len(column.vectors), size=size)]
    m = picked + g.standard_normal(picked.shape) * (0.02 / np.sqrt(spec.dimension))
    vectors = (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)
    return Query(tuple(f"q{i}" for i in range(size)), vectors, np.ones(size, np.int64), spec)


def _faiss_index(index: PexesoIndex) -> object | None:
    try:
        import faiss  # deferred: an optional dev extra
    except ImportError:
        return None
    flat = faiss.IndexFlatL2(index.vectors.shape[1])
    flat.add(np.ascontiguousarray(index.vectors))
    return flat


def _faiss_answers(
    flat: object, index: PexesoIndex, query: Query, tau: float, threshold: float
) -> list[tuple[str, int]]:
    """(column_id, n_matched) of the joinable columns, by a flat range search and a per-column count."""
    radius = (2.0 * tau) ** 2 + 1e-6
    lims, _, hits = flat.range_search(np.ascontiguousarray(query.vectors), radius)  # type: ignore[attr-defined]
    owner = np.repeat(np.arange(len(query.vectors)), np.diff(lims).astype(np.int64))
    n_columns = len(index.columns)
    pairs = np.unique(owner.astype(np.int64) * n_columns + index.column_of[hits])
    matched = np.bincount(pairs % n_columns, weights=query.weights[pairs // n_columns], minlength=n_columns)
    need = need_count(threshold, query.size)
    found = [(index.columns[c].column_id, int(matched[c])) for c in np.flatnonzero(matched >= need)]
    return sorted(found)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pexeso_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lake", choices=("text", "clustered"), default="text")
    parser.add_argument("--vectors", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--query-size", type=int, default=100)
    parser.add_argument("--tau", type=float, default=0.06)
    parser.add_argument("--T", dest="threshold", type=float, default=0.6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    spec = EmbeddingSpec.of(pexeso_embedder())
    if args.lake == "text":
        columns, raw = build_lake(args.vectors, args.seed)
    else:
        columns, raw = clustered_lake(args.vectors, args.seed, spec.dimension), []
    t1 = time.perf_counter()
    index = PexesoIndex.build(columns, spec, IndexShape())
    t2 = time.perf_counter()
    print(f"lake: {len(index):,} vectors in {len(index.columns):,} columns (embedded in {t1 - t0:.1f} s)")
    print(f"index build: {t2 - t1:.1f} s; size in memory {_size(index) / 2**20:.0f} MiB")
    flat = _faiss_index(index)
    if flat is not None:
        print(f"faiss IndexFlatL2 build: {time.perf_counter() - t2:.1f} s")

    rng = random.Random(args.seed)
    times: dict[str, list[float]] = {"pexeso": [], "brute": []}
    if flat is not None:
        times["faiss"] = []
    found = []
    faiss_differs = 0
    for _ in range(args.queries):
        if args.lake == "text":
            values = raw[rng.randrange(len(raw))]
            picked = [rng.choice(values) for _ in range(args.query_size)]
            query = Query.embed([_corrupt(rng, v) for v in picked], pexeso_embedder())
        else:
            query = _clustered_query(columns[rng.randrange(len(columns))], args.query_size, rng, spec)
        answers = {}
        faiss_answer: list[tuple[str, int]] = []
        for method in rng.sample(list(times), len(times)):
            start = time.perf_counter()
            if method == "faiss":
                faiss_answer = _faiss_answers(flat, index, query, args.tau, args.threshold)
            else:
                answers[method] = search(index, query, tau=args.tau, threshold=args.threshold, k=None, method=method)  # type: ignore[arg-type]
            times[method].append(time.perf_counter() - start)
        if answers["pexeso"] != answers["brute"]:
            raise SystemExit("pexeso and brute force answered differently")
        if flat is not None:
            faiss_differs += faiss_answer != sorted((m.column_id, m.n_matched) for m in answers["pexeso"])
        found.append(len(answers["pexeso"]))
    for method, ts in times.items():
        ts.sort()
        p95 = ts[min(len(ts) - 1, int(0.95 * len(ts)))]
        print(f"{method:>7}: p50 {statistics.median(ts) * 1000:8.1f} ms   p95 {p95 * 1000:8.1f} ms")
    ratio = statistics.median(times["brute"]) / statistics.median(times["pexeso"])
    print(f"brute/pexeso at p50: {ratio:.1f}x; answers per query p50 {statistics.median(found)}; identical answers")
    if flat is not None:
        ratio = statistics.median(times["faiss"]) / statistics.median(times["pexeso"])
        print(f"faiss/pexeso at p50: {ratio:.1f}x; faiss differed on {faiss_differs} of {args.queries} queries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
