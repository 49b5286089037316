"""Benchmark: Auto-Join on table pairs of growing size, with sampling (issue 19).

`python -m bench.autojoin_bench [--sizes 1000,100000,1000000] [--trials 2000] [--runs 10] [--seed 0]
[--transform-lake demo|seed|none] [--keep DIR]`

Tables: a person table (`first`, `last`, an id) and a directory keyed by e-mail
(`first.last@corp.example`, lower case) holding every person; names are random letters, so
q-grams are as rare as in real name data. Each size runs `autojoin` once per direction pair (both
directions are tried inside) and prints the wall time, the rows the sampling read from each side,
the program and its coverage; the pairs must be exactly the true ones (the run fails otherwise).

Sampling: with participation r = 0.05 (only 5% of the target rows join), `--trials` independent
samples at the rates `sampling.sample_rates` chooses (N_s = N_t = 1M) count the joining pairs that
survive; the share with at least T = 4 is the success rate, printed beside its Chernoff bound
(1 − exp(−δ²μ/2)). Then `--runs` end-to-end `autojoin` runs (different seeds) on 100k-row tables
where only 5% of the target joins count how often the pairs are exactly the true ones (either
direction may win: random last names are a key too).

`search transform`: the local portal's `demo` seed (or the whole seed, `--transform-lake seed`)
written as a folder, crawled and indexed by the real pipeline (`crawl --dir` + `index`, embedded
defaults), then asked every case of `bench/autojoin_cases.py` (the quality test's: a real table's
key rewritten the way another publisher would have written it) as the query table. A lake table
is *relevant* to a case when it holds a copy of the case's real table: each of the table's textual
columns has at least 90% of its values in one of the lake table's columns; cases whose key is
derived from several columns have none. Per case: seconds, answers, the rank of the first
relevant table; then p50/p95/max seconds and, over the cases with a relevant table, how often it
ranks first and how often it is among the answers.
"""

from __future__ import annotations

import argparse
import shutil
import string
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.autojoin_cases import Case, cases
from bench.pipeline_bench import bench_settings, crawl_and_index
from bench.seed_lake import seed_files, table_sets, write_lake
from catalog.core.identity import split_column_id, token_set
from catalog.core.settings import Settings
from catalog.search.autojoin.join import Table, autojoin, numbers_only
from catalog.search.autojoin.sampling import sample_rates
from catalog.search.autojoin.settings import AutojoinSettings, autojoin_settings

RELEVANT_SHARE = 0.9  # of each textual column of a case's real table, held by a lake table: a copy


def _names(n: int, rng: np.random.Generator) -> tuple[pa.Array, pa.Array]:
    """n distinct (first, last) pairs of random capitalized words."""
    letters = np.array(list(string.ascii_lowercase))

    def words(k: int) -> list[str]:
        lengths = rng.integers(4, 10, k)
        chars = letters[rng.integers(0, 26, (k, 9))]
        return ["".join(row[:m]).title() for row, m in zip(chars, lengths, strict=True)]

    return pa.array(words(n), pa.string()), pa.array(words(n), pa.string())


def tables(n: int, seed: int, participation: float = 1.0) -> tuple[Table, Table, set[tuple[int, int]]]:
    """(people, directory, the true row pairs): `participation` of the directory's rows belong to
    someone in people."""
    rng = np.random.default_rng(seed)
    first, last = _names(n, rng)
    email = pc.binary_join_element_wise(pc.utf8_lower(first), ".", pc.utf8_lower(last), "@corp.example", "")
    ids = pa.array([f"p{i}" for i in range(n)], pa.string())
    joining = int(n * participation)
    people = Table(("first", "last", "id"), (first.slice(0, joining), last.slice(0, joining), ids.slice(0, joining)))
    other_first, other_last = _names(n - joining, rng)
    others = pc.binary_join_element_wise(
        pc.utf8_lower(other_first), ".x.", pc.utf8_lower(other_last), "@corp.example", ""
    )
    directory_email = pa.concat_arrays([email.slice(0, joining), others]) if n > joining else email
    order = pa.array(rng.permutation(n))
    directory = Table(("email", "office"), (directory_email.take(order), pa.array([f"o{i % 97}" for i in range(n)])))
    truth = {(int(p), j) for j, p in enumerate(order.to_numpy()) if p < joining}
    return people, directory, truth


def time_sizes(sizes: Sequence[int], seed: int) -> bool:
    ok = True
    print(f"{'rows':>9} {'seconds':>8} {'sampled':>15} {'coverage':>9}  program")
    for n in sizes:
        people, directory, truth = tables(n, seed)
        start = time.perf_counter()
        result = autojoin(people, directory, seed=seed)
        seconds = time.perf_counter() - start
        sampled = f"{result.sampled[0]}/{result.sampled[1]}"
        print(f"{n:9d} {seconds:8.2f} {sampled:>15} {result.coverage:9d}  {result.program}", flush=True)
        ok &= result.coverage >= 0.99 * n and set(result.pairs) == truth
    return ok


def sampling_success(trials: int, seed: int) -> None:
    cfg = AutojoinSettings()
    n = 1_000_000
    rates = sample_rates(n, n, examples=cfg.sample_examples, delta=cfg.delta, participation=cfg.participation)
    n_s, n_t = rates.rows(n, n)
    rng = np.random.default_rng(seed)
    joining = int(n * cfg.participation)  # target rows 0..joining-1 join source rows 0..joining-1
    successes, kept = 0, []
    for _ in range(trials):
        s = rng.choice(n, n_s, replace=False)
        t = rng.choice(n, n_t, replace=False)
        both = np.intersect1d(s[s < joining], t[t < joining], assume_unique=True).size
        kept.append(both)
        successes += both >= cfg.sample_examples
    mu = n * cfg.participation * rates.source * rates.target
    print(
        f"sampling 1M x 1M, r={cfg.participation}: {n_s} + {n_t} rows; joining pairs kept: mean {np.mean(kept):.1f} "
        f"(μ {mu:.1f}), min {min(kept)}; success (>= {cfg.sample_examples}) {successes}/{trials} = "
        f"{successes / trials:.4f}; bound >= {1 - rates.failure_bound:.4f}"
    )


def end_to_end(runs: int, seed: int) -> None:
    n, r = 100_000, AutojoinSettings().participation
    found = 0
    seconds = []
    for run in range(runs):
        people, directory, truth = tables(n, seed + run, participation=r)
        start = time.perf_counter()
        result = autojoin(people, directory, seed=seed + run)
        seconds.append(time.perf_counter() - start)
        found += set(result.pairs) == truth
    print(
        f"end to end, 100k x 100k, r={r}: exactly the true pairs in {found}/{runs} runs "
        f"(p50 {np.median(seconds):.2f} s)"
    )


def indexed_seed(subset: str, root: Path, master: str) -> tuple[Settings, dict[str, list[frozenset[str]]]]:
    """The seed `subset` crawled and indexed under `root` (reused when a kept run left it there),
    and each table's column sets as a plain-Python reading of the files gives them (the oracle's
    lake)."""
    files = seed_files(subset, root / "scratch")
    home = root / subset
    settings = bench_settings(home, master)
    if not (home / "catalog.db").exists():
        from spark_jobs.lake.session import get_spark  # deferred: only this part needs Spark

        write_lake(home / "files", files.items())
        spark = get_spark(settings, "juncture.autojoin_bench")
        try:
            run = crawl_and_index(spark, settings, home / "files", subset)
        finally:
            spark.stop()
        print(f"\n{subset} seed: {len(files):,} tables crawled and indexed in {run.total:.0f} s")
    tables: dict[str, list[frozenset[str]]] = {}
    for rel, data in files.items():
        for column, tokens in table_sets(rel, data).items():
            tables.setdefault(split_column_id(column)[0], []).append(tokens)
    return settings, tables


def relevant_tables(case: Case, tables: Mapping[str, list[frozenset[str]]]) -> set[str]:
    """Lake tables holding a copy of the case's real table: for each of its textual columns, some
    column holding >= RELEVANT_SHARE of its values (numbers alone match too many tables)."""
    if not case.key_in_lake:
        return set()
    headers, rows = case.target
    wanted = [token_set(row[i] if i < len(row) else None for row in rows) for i in range(len(headers))]
    wanted = [w for w in wanted if w and not numbers_only(pa.array(sorted(w)))]
    return {
        table
        for table, sets in tables.items()
        if wanted and all(any(len(w & s) >= RELEVANT_SHARE * len(w) for s in sets) for w in wanted)
    }


def transform_queries(subset: str, root: Path, master: str, k: int) -> None:
    from catalog.search.autojoin.transform import search_transform  # deferred: reads the lake

    settings, tables = indexed_seed(subset, root, master)
    cfg = autojoin_settings(settings)
    print(f"\nsearch transform on the {subset} seed, k={k}")
    print(f"{'case':32} {'seconds':>8} {'answers':>8} {'relevant':>9} {'rank':>5}  top answer")
    seconds, first, found, judged = [], 0, 0, 0
    for case in cases():
        relevant = relevant_tables(case, tables)
        start = time.perf_counter()
        answers = search_transform(Table.from_rows(*case.source), settings, cfg, k=k)
        seconds.append(time.perf_counter() - start)
        ranks = [i + 1 for i, a in enumerate(answers) if a["table_id"] in relevant]
        if relevant:
            judged += 1
            first += ranks[:1] == [1]
            found += bool(ranks)
        top = f"{answers[0]['table_id']} {answers[0]['program']}" if answers else "-"
        rank = str(ranks[0]) if ranks else "-"
        print(f"{case.name:32} {seconds[-1]:8.2f} {len(answers):8d} {len(relevant):9d} {rank:>5}  {top[:90]}")
    p = np.percentile(seconds, [50, 95])
    print(
        f"seconds p50 {p[0]:.2f}, p95 {p[1]:.2f}, max {max(seconds):.2f}; of {judged} cases with a relevant "
        f"table in the lake: ranked first {first}, among the answers {found}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.autojoin_bench")
    p.add_argument("--sizes", default="1000,100000,1000000")
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--transform-lake", choices=("demo", "seed", "none"), default="demo")
    p.add_argument("--transform-k", type=int, default=10)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--keep", metavar="DIR", help="index the lake under DIR and keep it; a later run reuses it")
    args = p.parse_args(argv)
    ok = time_sizes([int(s) for s in args.sizes.split(",")], args.seed)
    sampling_success(args.trials, args.seed)
    end_to_end(args.runs, args.seed)
    if args.transform_lake != "none":
        root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="juncture-autojoin-bench-"))
        try:
            transform_queries("all" if args.transform_lake == "seed" else "demo", root, args.master, args.transform_k)
        finally:
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
