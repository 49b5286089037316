"""JOSIE index build benchmark: full Spark build vs an incremental 1% ADD/DELETE batch, same lake.

Target: the 1% batch takes at most 5% of a full build, Spark start-up not counted (the
session is started and warmed before either is timed). The tokens stage (column_tokens) is not
timed either: both measure the josie stage alone. The batch is applied by both update engines
(the driver's Arrow one, which `update_josie.run` picks at this size, and Spark's, on a copy of the
same index); the ratio is the driver engine's.

    .venv/bin/python -m bench.josie_build_bench --sets 100000

`measure_build_vs_update` is the hook bench/josie_bench.py calls with its own lake and session.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from catalog.core.identity import split_column_id, table_bucket
from catalog.core.settings import Settings, load_settings


def _column_tokens(
    lake: Mapping[str, set[str] | frozenset[str]], table_ids: set[str] | None, n_buckets: int
) -> pa.Table:
    from spark_jobs.profile.tokens import TOKENS_SCHEMA  # deferred: each benchmark loads only what it runs

    tids: list[str] = []
    buckets: list[int] = []
    cids: list[str] = []
    toks: list[str] = []
    for cid, tokens in lake.items():
        tid = split_column_id(cid)[0]
        if table_ids is not None and tid not in table_ids:
            continue
        n = len(tokens)
        tids.extend([tid] * n)
        buckets.extend([table_bucket(tid, n_buckets)] * n)
        cids.extend([cid] * n)
        toks.extend(tokens)
    return pa.table(
        {
            "table_id": tids,
            "bucket": pa.array(buckets, pa.int32()),
            "column_id": cids,
            "token": toks,
            "n": pa.array([1] * len(toks), pa.int64()),
        },
        schema=TOKENS_SCHEMA,
    )


def one_percent_batch(
    lake: dict[str, set[str]], *, share: float, seed: int
) -> tuple[dict[str, set[str]], list[str], list[str]]:
    """A changed copy of `lake` touching `share` of its tables: half changed (tokens removed, existing
    and new tokens added), a quarter deleted, and as many new tables as a quarter. Returns
    (new lake, added-or-changed table ids, deleted table ids)."""
    rng = random.Random(seed)
    tables: dict[str, list[str]] = {}
    for cid in lake:
        tables.setdefault(split_column_id(cid)[0], []).append(cid)
    chosen = rng.sample(sorted(tables), max(4, int(len(tables) * share)))
    vocabulary = [t for cid in rng.sample(sorted(lake), min(200, len(lake))) for t in sorted(lake[cid])]
    new_lake = {cid: set(t) for cid, t in lake.items()}
    added, deleted = [], []
    for i, tid in enumerate(chosen):
        if i % 4 == 0:
            for cid in tables[tid]:
                del new_lake[cid]
            deleted.append(tid)
            continue
        for cid in tables[tid]:
            toks = new_lake[cid]
            for t in rng.sample(sorted(toks), len(toks) // 5):
                toks.discard(t)
            toks.update(rng.sample(vocabulary, min(len(vocabulary), 3)))
            toks.add(f"bench-new-{i}-{rng.randrange(10**9)}")
        added.append(tid)
        if i % 4 == 1:  # and a brand-new table shaped like it
            new_tid = f"file:bench/new{i}.csv"
            for cid in tables[tid]:
                new_lake[f"{new_tid}#{split_column_id(cid)[1]}"] = set(lake[cid])
            added.append(new_tid)
    return new_lake, sorted(added), sorted(deleted)


def measure_build_vs_update(
    spark: Any, settings: Settings, lake: dict[str, set[str]], *, share: float = 0.01, seed: int = 0
) -> dict[str, Any]:
    """Full build of `lake` in `settings.lake`, then one `share` ADD/DELETE batch; seconds of each."""
    from spark_jobs.josie import build as josie_index  # deferred: each benchmark loads only what it runs
    from spark_jobs.josie import update as update_josie  # deferred: each benchmark loads only what it runs
    from spark_jobs.josie import update_arrow as update_josie_arrow  # deferred: each benchmark loads only what it runs
    from spark_jobs.lake.batches import ChangeBatch  # deferred: each benchmark loads only what it runs
    from spark_jobs.lake.store import LakeStore  # deferred: each benchmark loads only what it runs

    store = LakeStore(settings.lake, spark)
    n_buckets = settings.index.cells_buckets
    store.overwrite("column_tokens", _column_tokens(lake, None, n_buckets), partition_by=["bucket"])
    t0 = time.perf_counter()
    built = josie_index.build(spark, store, batch_id=1)
    build_s = time.perf_counter() - t0

    new_lake, added, deleted = one_percent_batch(lake, share=share, seed=seed)
    touched = sorted({*added, *deleted})
    buckets = sorted({table_bucket(t, n_buckets) for t in touched})
    store.overwrite_where(
        "column_tokens",
        _column_tokens(new_lake, set(added), n_buckets),
        column="table_id",
        values=touched,
        partitions={"bucket": buckets},
        partition_by=["bucket"],
    )
    batch = ChangeBatch(2, tuple(added), tuple(deleted))
    # Both update engines apply the same batch to the same built index (the Spark one to a copy).
    spark_lake = Path(str(settings.lake) + "-spark-update")
    shutil.copytree(settings.lake, spark_lake)
    t0 = time.perf_counter()
    update_josie.update(spark, LakeStore(str(spark_lake), spark), batch, n_buckets=n_buckets)
    spark_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    updated = update_josie_arrow.update(store, batch, n_buckets=n_buckets)
    update_s = time.perf_counter() - t0
    n_lists = built.state.n_lists if built.state else 0
    return {
        "n_sets": len(lake),
        "n_pairs": sum(len(t) for t in lake.values()),
        "n_lists": n_lists,
        "batch_tables": len(touched),
        "batch_sets": updated.n_affected_sets,
        "lists_rewritten": updated.n_lists_rewritten,
        "build_s": round(build_s, 2),
        "update_s": round(update_s, 2),
        "ratio": round(update_s / build_s, 4),
        "spark_update_s": round(spark_s, 2),
        "spark_ratio": round(spark_s / build_s, 4),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="josie_build_bench")
    parser.add_argument("--sets", type=int, default=100_000)
    parser.add_argument("--share", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from bench.josie_lake import zipf_lake  # deferred: each benchmark loads only what it runs
    from spark_jobs.lake.session import get_spark  # deferred: each benchmark loads only what it runs

    home = Path(tempfile.mkdtemp(prefix="josie-build-bench-"))
    settings = dataclasses.replace(load_settings({}, cwd=home), home=home, lake=str(home / "lake"))
    t0 = time.perf_counter()
    spark = get_spark(settings, "juncture.josie_build_bench")
    spark.range(10).count()
    startup_s = time.perf_counter() - t0
    lake = zipf_lake(args.sets, seed=args.seed)
    r = measure_build_vs_update(spark, settings, lake, share=args.share, seed=args.seed)
    print(f"spark start-up            {startup_s:8.2f} s (not counted)")
    print(f"lake                      {r['n_sets']} sets, {r['n_pairs']} (token, set) pairs, {r['n_lists']} lists")
    print(f"full build                {r['build_s']:8.2f} s")
    print(
        f"incremental {args.share:.0%} batch    {r['update_s']:8.2f} s  ({r['batch_tables']} tables, "
        f"{r['batch_sets']} sets, {r['lists_rewritten']} lists rewritten; driver engine, the default here)"
    )
    print(f"  same batch, Spark engine {r['spark_update_s']:7.2f} s  ({r['spark_ratio']:.2%} of the build)")
    print(f"batch / build             {r['ratio']:8.2%}  (target <= 5%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
