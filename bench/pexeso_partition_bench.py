"""Benchmark: PEXESO searched under a memory budget, JSD partitions against consecutive column
ranges and the whole index in memory (issue 18).

`python -m bench.pexeso_partition_bench [--lake topics|clustered] [--vectors 200000]
[--budget-mb 64] [--queries 20] [--query-size 100] [--tau 0.06] [--T 0.6] [--seed 0]`

The lake is `bench.pexeso_bench`'s clustered one (unit vectors around 2,000 centres in an 8-d
subspace of 256 dimensions, columns of 20 to 2,000 vectors): with `clustered` each column draws its
vectors from any centre (every column spans the whole lake), with `topics` from the 40 centres of
one of 50 topics (the centres of a topic lie near each other), so columns differ in distribution,
which is what the paper's partitioning is for. It is published into a SQLite catalog in a temporary
folder as the PEXESO publisher writes it, partitioned (`repartition`), and each query (vectors near
one column's) searched

* `whole`: by the whole index, loaded once and held (no load in the time);
* `jsd`: partition by partition under the budget, skipping the partitions out of reach, each load
  read from the catalog and gridded inside the time (as the paper times its out-of-core search);
* `ranges`: the same budget, consecutive column_ref ranges (the catalog's columns with no
  partition recorded: what `--memory-budget` did before the JSD partitions);
* `jsd-own-pivots`: the JSD partitions held in memory each with pivots of its own selected from
  its vectors (the paper's choice), against `jsd-shared` the same partitions in memory under the
  global pivots; search time only, to isolate what own pivots would buy.

All answers must be identical (the run fails otherwise). Printed: p50/p95 latency, partitions
loaded and skipped per query.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sqlalchemy import Connection, Engine, delete, insert, update

from bench.pexeso_bench import _INTRINSIC, _clustered_query, clustered_lake
from catalog.db.engine import open_catalog
from catalog.search.pexeso.index import ColumnRef, ColumnVectors, EmbeddingSpec, IndexShape, PexesoIndex
from catalog.search.pexeso.models import PexesoColumn, PexesoMeta, PexesoPartition
from catalog.search.pexeso.pivots import select_pivots
from catalog.search.pexeso.repartition import repartition
from catalog.search.pexeso.search import Query, SemanticMatch, search, search_partitions
from catalog.search.pexeso.source import IndexFrame, load_index, partitions

_SPEC = EmbeddingSpec("char-ngram-2-4", 1, 256)


def topic_lake(n_vectors: int, seed: int, dimension: int) -> list[ColumnVectors]:
    """Columns each drawn from the centres of one topic (50 topics of 40 nearby centres)."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.standard_normal((dimension, _INTRINSIC)))[0].T
    topics = rng.standard_normal((50, _INTRINSIC))
    centres = (topics[:, None, :] + 0.25 * rng.standard_normal((50, 40, _INTRINSIC))) @ basis
    centres *= np.sqrt(dimension / _INTRINSIC)
    columns: list[ColumnVectors] = []
    held = 0
    while held < n_vectors:
        size = min(n_vectors - held, int(rng.integers(20, 2000)))
        topic = centres[int(rng.integers(50))]
        picked = topic[rng.integers(40, size=size)]
        m = picked + rng.standard_normal(picked.shape) * 0.05
        vectors = (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)
        ref = ColumnRef(f"c{len(columns)}", f"t{len(columns) // 4}", f"col{len(columns) % 4}")
        columns.append(ColumnVectors(ref, [f"v{held + i}" for i in range(size)], vectors))
        held += size
    return columns


def publish(conn: Connection, columns: list[ColumnVectors], shape: IndexShape) -> IndexFrame:
    """The columns and facts as the PEXESO publisher writes them, then partitioned."""
    for start in range(0, len(columns), 200):
        conn.execute(
            insert(PexesoColumn),
            [
                {
                    "column_ref": start + i + 1,
                    "column_id": c.ref.column_id,
                    "table_id": c.ref.table_id,
                    "header": c.ref.column,
                    "n_values": len(c.values),
                    "value_list": json.dumps(list(c.values)),
                    "vectors": c.vectors.astype("<f4").tobytes(),
                }
                for i, c in enumerate(columns[start : start + 200])
            ],
        )
    sample = np.concatenate([c.vectors for c in columns[:: max(1, len(columns) // 64)]])
    pivots = select_pivots(sample, shape.n_pivots, method=shape.pivot_method, seed=shape.seed)
    facts = {
        "index_version": "1",
        "spec": json.dumps(dataclasses.asdict(_SPEC)),
        "shape": json.dumps(dataclasses.asdict(shape)),
        "pivots": base64.b64encode(pivots.astype("<f4").tobytes()).decode("ascii"),
        "n_columns": str(len(columns)),
        "n_vectors": str(sum(len(c.values) for c in columns)),
    }
    conn.execute(insert(PexesoMeta), [{"key": k, "value": v} for k, v in facts.items()])
    frame = IndexFrame.of(facts)
    repartition(conn, frame)
    return frame


def _answers(found: list[SemanticMatch]) -> list[tuple[str, int]]:
    return [(m.column_id, m.n_matched) for m in found]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.pexeso_partition_bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--lake", choices=("topics", "clustered"), default="topics")
    parser.add_argument("--vectors", type=int, default=200_000)
    parser.add_argument("--budget-mb", type=float, default=64.0)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--query-size", type=int, default=100)
    parser.add_argument("--tau", type=float, default=0.06)
    parser.add_argument("--T", dest="threshold", type=float, default=0.6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    make = topic_lake if args.lake == "topics" else clustered_lake
    columns = make(args.vectors, args.seed, _SPEC.dimension)
    shape = IndexShape(memory_budget_mb=args.budget_mb)
    folder = Path(tempfile.mkdtemp(prefix="pexeso-bench-"))
    try:
        engine = open_catalog(f"sqlite:///{folder / 'jsd.db'}")
        t0 = time.perf_counter()
        with engine.begin() as conn:
            frame = publish(conn, columns, shape)
        print(
            f"lake: {args.lake}, {args.vectors:,} vectors in {len(columns):,} columns; "
            f"published and partitioned in {time.perf_counter() - t0:.1f} s"
        )
        engine.dispose()
        shutil.copy(folder / "jsd.db", folder / "ranges.db")
        ranges = open_catalog(f"sqlite:///{folder / 'ranges.db'}")
        with ranges.begin() as conn:
            conn.execute(update(PexesoColumn).values(partition=None))
            conn.execute(delete(PexesoPartition))
        engine = open_catalog(f"sqlite:///{folder / 'jsd.db'}")
        _run(args, columns, engine, ranges, frame)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


def _run(
    args: argparse.Namespace, columns: list[ColumnVectors], engine: Engine, ranges: Engine, frame: IndexFrame
) -> None:
    with engine.connect() as conn:
        whole = load_index(conn).index
        parts = partitions(conn, args.budget_mb)
        loads = parts.with_capacity(parts.capacity)
        shared = [parts.load(load) for load in loads]
    own = [PexesoIndex.build(_columns_of(p), p.spec, p.shape) for p in shared]
    print(
        f"budget {args.budget_mb} MB = {parts.capacity:,} vectors a load; "
        f"{len(np.unique(parts.partition_of))} JSD partitions, {len(loads)} loads"
    )
    rng = random.Random(args.seed)
    times: dict[str, list[float]] = {m: [] for m in ("whole", "jsd", "ranges", "jsd-shared", "jsd-own-pivots")}
    skipped, loaded, loaded_ranges = [], [], []
    kw = {"tau": args.tau, "threshold": args.threshold}
    for _ in range(args.queries):
        query: Query = _clustered_query(columns[rng.randrange(len(columns))], args.query_size, rng, frame.spec)
        results = {}
        t = time.perf_counter()
        results["whole"] = _answers(search(whole, query, **kw))
        times["whole"].append(time.perf_counter() - t)
        with engine.connect() as conn:
            t = time.perf_counter()
            p = partitions(conn, args.budget_mb)
            plan = p.plan(query.vectors, args.tau)
            results["jsd"] = _answers(search_partitions((p.load(x) for x in plan.loads), query, **kw))
            times["jsd"].append(time.perf_counter() - t)
        skipped.append(plan.n_skipped)
        loaded.append(len(plan.loads))
        with ranges.connect() as conn:
            t = time.perf_counter()
            p = partitions(conn, args.budget_mb)
            plan = p.plan(query.vectors, args.tau)
            results["ranges"] = _answers(search_partitions((p.load(x) for x in plan.loads), query, **kw))
            times["ranges"].append(time.perf_counter() - t)
        loaded_ranges.append(len(plan.loads))
        for name, held in (("jsd-shared", shared), ("jsd-own-pivots", own)):
            t = time.perf_counter()
            results[name] = _answers(search_partitions(held, query, **kw))
            times[name].append(time.perf_counter() - t)
        if len({json.dumps(sorted(r)) for r in results.values()}) != 1:
            raise SystemExit(f"the methods answered differently: {results}")
    for method, ts in times.items():
        ts.sort()
        p95 = ts[min(len(ts) - 1, int(0.95 * len(ts)))]
        print(f"{method:>15}: p50 {statistics.median(ts) * 1000:8.1f} ms   p95 {p95 * 1000:8.1f} ms")
    print(
        f"per query: jsd loads p50 {statistics.median(loaded)}, partitions skipped p50 {statistics.median(skipped)} "
        f"(min {min(skipped)}, max {max(skipped)}); ranges loads {statistics.median(loaded_ranges)}; identical answers"
    )


def _columns_of(index: PexesoIndex) -> list[ColumnVectors]:
    order, starts = index.column_rows
    return [
        ColumnVectors(
            ref, list(index.values[order[starts[i] : starts[i + 1]]]), index.vectors[order[starts[i] : starts[i + 1]]]
        )
        for i, ref in enumerate(index.columns)
    ]


if __name__ == "__main__":
    raise SystemExit(main())
