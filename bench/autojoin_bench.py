"""Benchmark: Auto-Join on table pairs of growing size, with sampling (issue 19).

`python -m bench.autojoin_bench [--sizes 1000,100000,1000000] [--trials 2000] [--runs 10] [--seed 0]`

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
"""

from __future__ import annotations

import argparse
import string
import sys
import time
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from catalog.search.autojoin.join import Table, autojoin
from catalog.search.autojoin.sampling import sample_rates
from catalog.search.autojoin.settings import AutojoinSettings


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


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.autojoin_bench")
    p.add_argument("--sizes", default="1000,100000,1000000")
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    ok = time_sizes([int(s) for s in args.sizes.split(",")], args.seed)
    sampling_success(args.trials, args.seed)
    end_to_end(args.runs, args.seed)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
