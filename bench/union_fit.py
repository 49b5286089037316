"""Fitting the union signals' weights on the union benchmark (`bench.union_bench --fit`): "weigh
signals by how well they separate partners from non-partners on the benchmark".

    python -m bench.union_fit ROOT [--seed 0] [--passes 4]

ROOT is a folder `python -m bench.union_bench --keep` left behind (its `truth.json` and the indexed
`home-1`); `union_bench --fit` runs the same fit on the lake it has just indexed.

Nothing is recomputed in Spark: the features (`unionable_features`), each query's candidates
(`unionable_candidates`) and the value overlaps (gold `joinable`, both ways, the largest per column
pair, as `unionable.unionable_rows` takes them) are read with pyarrow, and each query is ranked by
`unionable.score_group`, the very function the relate stage runs per table, under a weight vector
(`union_score.weighted`). That it reproduces the gold lists with the default weights is checked
first, so the fit optimizes what the pipeline computes. Every signal's matrix for a query is
computed once (`SignalCache`): a fit ranks each query under a few hundred weight vectors, and only
the weighted mean and the matching depend on the weights.

Besides the fit, the report splits what the gold lists lose between candidate generation and
scoring: the queries are ranked again with every relevant table added to their candidates
(`with_every_relevant`), so that only the signals and the matching can miss.

The fit is coordinate ascent over `GRID`, from the defaults, on the queries of a seeded half of the
bases (split by base, so a family's partners never sit on both sides), maximising MAP@10 with P@5
breaking ties; a move must strictly improve, so the search is deterministic and stops at a fixed
point. Weights only count relative to each other (the pair score is their weighted mean).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.union_bench import (
    Metrics,
    Separability,
    auc,
    column_origins,
    evaluate,
    ranked_lists,
    union_settings,
)
from bench.union_lake import Member, Truth
from catalog.core.identity import file_table_id

if TYPE_CHECKING:
    from spark_jobs.lake.store import LakeStore
    from spark_jobs.relate.union_score import Columns, ColumnSignal
    from spark_jobs.relate.unionable import GroupFeatures

GRID = (0.0, 0.05, 0.1, 0.15, 0.25, 0.35, 0.5, 0.75, 1.0)
MIN_PAIR_SCORES = (0.1, 0.2, 0.3, 0.4, 0.5)  # the sensitivity check's thresholds
Weights = dict[str, float]
Objective = tuple[float, float]  # (MAP@10, P@5): compared as a tuple, so P@5 breaks MAP ties

GROUP_SCHEMA = pa.schema(
    [
        ("table_id", pa.string()),
        ("candidate_table_id", pa.string()),
        ("column_id", pa.string()),
        ("candidate_column_id", pa.string()),
        ("overlap", pa.float64()),
    ]
)


# ---------------------------------------------------------------------------------------- the lake
@dataclass(frozen=True)
class IndexedLake:
    """What scoring the queries needs from an indexed lake: every column's features, and per query
    the rows `unionable_rows` groups for it (its candidates, and its columns' value overlaps)."""

    features: GroupFeatures
    groups: Mapping[str, pa.Table]  # query table_id -> score_group's input
    gold: Mapping[str, list[str]]  # query table_id -> gold `unionable` list
    k: int


def best_overlaps(joinable: pa.Table, table_ids: Sequence[str]) -> pa.Table:
    """(table_id, column_id, candidate_column_id, overlap) for the columns of `table_ids`: gold
    `joinable` seen from both columns, the largest overlap per column pair (what
    `unionable.joinable_both_ways` and `unionable_rows` give the scoring groups)."""
    names = ("table_id", "column_id", "candidate_column_id")
    forward = joinable.select([*names, "overlap"])
    backward = pa.table(
        {
            "table_id": joinable.column("candidate_table_id"),
            "column_id": joinable.column("candidate_column_id"),
            "candidate_column_id": joinable.column("column_id"),
            "overlap": joinable.column("overlap"),
        }
    )
    both = pa.concat_tables([forward, backward])
    both = both.filter(pc.is_in(both.column("table_id"), pa.array(list(table_ids), pa.string())))
    best = both.group_by(list(names)).aggregate([("overlap", "max")])
    return best.rename_columns([*names, "overlap"]).cast(
        pa.schema([(n, pa.string()) for n in names] + [("overlap", pa.float64())])
    )


def scoring_groups(candidates: pa.Table, overlaps: pa.Table, table_ids: Sequence[str]) -> dict[str, pa.Table]:
    """Per table, its candidate rows (column ids null) and its overlap rows (candidate table null),
    as `unionable_rows` unions them before grouping by table."""
    n_o = len(overlaps)
    rows = pa.concat_tables(
        [
            candidate_rows(candidates.column("table_id"), candidates.column("candidate_table_id")),
            pa.table(
                {
                    "table_id": overlaps.column("table_id"),
                    "candidate_table_id": pa.nulls(n_o, pa.string()),
                    "column_id": overlaps.column("column_id"),
                    "candidate_column_id": overlaps.column("candidate_column_id"),
                    "overlap": overlaps.column("overlap"),
                },
                schema=GROUP_SCHEMA,
            ),
        ]
    )
    return {t: rows.filter(pc.equal(rows.column("table_id"), t)) for t in table_ids}


def candidate_rows(table_ids: pa.Array | pa.ChunkedArray, candidate_ids: pa.Array | pa.ChunkedArray) -> pa.Table:
    """Scoring-group rows naming candidates (their column ids and overlap null)."""
    n = len(table_ids)
    return pa.table(
        {
            "table_id": table_ids,
            "candidate_table_id": candidate_ids,
            "column_id": pa.nulls(n, pa.string()),
            "candidate_column_id": pa.nulls(n, pa.string()),
            "overlap": pa.nulls(n, pa.float64()),
        },
        schema=GROUP_SCHEMA,
    )


def load_indexed(store: LakeStore, query_ids: Sequence[str], k: int) -> IndexedLake:
    """The queries' scoring inputs and gold lists from the lake the pipeline indexed (no Spark)."""
    from spark_jobs.relate.joinable import JOINABLE  # deferred: these pull in pyspark's modules
    from spark_jobs.relate.union_features import UNIONABLE_FEATURES  # deferred: as above
    from spark_jobs.relate.unionable import UNIONABLE, UNIONABLE_CANDIDATES, GroupFeatures  # deferred: as above

    where = {"table_id": list(query_ids)}
    features = GroupFeatures.from_arrow(store.read_arrow(UNIONABLE_FEATURES))
    candidates = store.read_arrow(UNIONABLE_CANDIDATES, where=where)
    joinable = store.read_arrow(
        JOINABLE, columns=["table_id", "column_id", "candidate_table_id", "candidate_column_id", "overlap"]
    )
    groups = scoring_groups(candidates, best_overlaps(joinable, query_ids), query_ids)
    return IndexedLake(features, groups, ranked_lists(store.read_arrow(UNIONABLE, where=where)), k)


def with_every_relevant(lake: IndexedLake, truth: Truth) -> IndexedLake:
    """`lake` with each query's relevant tables added to its candidates. Ranked like that, the
    queries measure the scoring alone: what the gold lists lose beyond it, candidate generation
    lost (a relevant table that was never a candidate cannot be listed, whatever the signals)."""
    groups = {}
    for query, group in lake.groups.items():
        relevant = sorted(truth.relevant(query))
        added = candidate_rows(pa.array([query] * len(relevant), pa.string()), pa.array(relevant, pa.string()))
        groups[query] = pa.concat_tables([group, added])
    return dataclasses.replace(lake, groups=groups)


def load_truth(path: Path) -> Truth:
    """The truth `Truth.save` wrote."""
    doc = json.loads(path.read_text())
    members = tuple(
        Member(**{**m, "headers": tuple(m["headers"]), "origins": tuple(m["origins"])}) for m in doc["members"]
    )
    return Truth(members, tuple(doc["queries"]))


# ---------------------------------------------------------------------------------------- ranking
@dataclass
class CachedGroup:
    """One scoring group's columns (own × everyone) and each signal's matrix over them."""

    own: Columns
    everyone: Columns
    overlap: np.ndarray
    matrices: dict[str, np.ndarray]


class SignalCache:
    """Signals whose matrices are computed once per scoring group and then reused: `score_group`
    calls each signal with the same columns whatever the weights, so only the weighted mean and
    the matching are redone per weight vector. Keyed by the columns' ids, so the smaller calls
    union_score may make besides (the signals of the aligned pairs alone, for the published
    alignment) are cached apart and correctly; `query_group` finds a query's whole group."""

    def __init__(self) -> None:
        self.groups: dict[tuple[tuple[str, ...], tuple[str, ...]], CachedGroup] = {}

    def signals(self, weights: Mapping[str, float] | None) -> list[ColumnSignal]:
        """`union_score.weighted(weights)` with every signal's score served from the cache."""
        from spark_jobs.relate.union_score import weighted  # deferred: as above

        return [dataclasses.replace(s, score=functools.partial(self._score, s)) for s in weighted(weights)]

    def _score(self, signal: ColumnSignal, a: Columns, b: Columns, overlap: np.ndarray) -> np.ndarray:
        key = (tuple(a.column_id.tolist()), tuple(b.column_id.tolist()))
        group = self.groups.setdefault(key, CachedGroup(a, b, overlap, {}))
        if signal.name not in group.matrices:
            group.matrices[signal.name] = np.asarray(signal.score(a, b, overlap), dtype=float)
        return group.matrices[signal.name]

    def query_group(self, own_ids: Sequence[str]) -> CachedGroup | None:
        """The group of all of a table's columns against the most columns: the one `rank_spans`
        scored the table's candidates in (not one of the smaller ones for aligned pairs)."""
        key = tuple(own_ids)
        whole = [g for (own, _), g in self.groups.items() if own == key]
        return max(whole, key=lambda g: len(g.everyone), default=None)


def rank_queries(
    lake: IndexedLake, queries: Sequence[str], weights: Mapping[str, float] | None, cache: SignalCache
) -> dict[str, list[str]]:
    """Each query's ranked candidate ids under `weights`, as the relate stage would list them."""
    from spark_jobs.relate.unionable import score_group  # deferred: as above

    signals = cache.signals(weights)
    out = {}
    for q in queries:
        ranked = score_group(lake.groups[q], lake.features, lake.k, signals)
        out[q] = ranked.column("candidate_table_id").to_pylist()
    return out


def objective(m: Metrics) -> Objective:
    return (round(m.map[10], 9), round(m.precision[5], 9))


# ---------------------------------------------------------------------------------------- the fit
@dataclass(frozen=True)
class Split:
    """The queries of a seeded half of the bases (train) and of the others (held out)."""

    train: Truth
    held_out: Truth


def split_by_base(truth: Truth, seed: int) -> Split:
    bases = sorted({m.base for m in truth.members})
    random.Random(seed).shuffle(bases)
    train_bases = set(bases[: len(bases) // 2])
    by_table = truth.by_table
    train = tuple(q for q in truth.queries if by_table[file_table_id(q)].base in train_bases)
    held_out = tuple(q for q in truth.queries if by_table[file_table_id(q)].base not in train_bases)
    return Split(Truth(truth.members, train), Truth(truth.members, held_out))


def query_ids(truth: Truth) -> list[str]:
    return [file_table_id(q) for q in truth.queries]


@dataclass(frozen=True)
class Step:
    """One accepted move of the search."""

    pass_no: int
    signal: str
    old: float
    new: float
    objective: Objective


def coordinate_ascent(
    lake: IndexedLake, truth: Truth, start: Weights, cache: SignalCache, passes: int
) -> tuple[Weights, list[Step]]:
    """Weights maximising `objective` on `truth`'s queries: per pass, each signal in turn takes the
    grid value that scores best with the others fixed (the current value on a tie); stops after a
    pass without a move or after `passes`."""
    queries = query_ids(truth)

    def score(w: Weights) -> Objective:
        return objective(evaluate(rank_queries(lake, queries, w, cache), truth))

    weights, best = dict(start), score(start)
    steps = []
    for pass_no in range(1, passes + 1):
        moved = False
        for name in list(weights):
            for value in GRID:
                if value == weights[name]:
                    continue
                tried = score({**weights, name: value})
                if tried > best:
                    steps.append(Step(pass_no, name, weights[name], value, tried))
                    weights, best, moved = {**weights, name: value}, tried, True
        if not moved:
            break
    return weights, steps


# ---------------------------------------------------------------------------------------- separability
def pair_separability(
    lake: IndexedLake, cache: SignalCache, truth: Truth, weights: Mapping[str, Weights]
) -> dict[str, Separability]:
    """AUC of right against wrong column pairs over every pair of a query's column with a column of
    each of its candidates (right = both cut from the same base column), per signal where it
    applies (not NaN), and of the combined pair score under each of `weights`."""
    from spark_jobs.relate.union_score import pair_scores  # deferred: as above

    origins = column_origins(truth)
    scores: dict[str, tuple[list[float], list[float]]] = {}
    columns = lake.features.columns
    for q in query_ids(truth):
        group = cache.query_group(columns.column_id[lake.features.tables[q]].tolist())
        if group is None:  # a query without candidates
            continue
        mine = [origins.get(c) for c in group.own.column_id.tolist()]
        theirs = [origins.get(c) for c in group.everyone.column_id.tolist()]
        right = np.array([[a is not None and a == b for b in theirs] for a in mine], dtype=bool)
        matrices = dict(group.matrices)
        for label, w in weights.items():
            matrices[label] = pair_scores(group.own, group.everyone, group.overlap, cache.signals(w))[0]
        for name, m in matrices.items():
            applies = ~np.isnan(m)
            r, w_ = scores.setdefault(name, ([], []))
            r.extend(m[applies & right].tolist())
            w_.extend(m[applies & ~right].tolist())
    return {name: auc(r, w) for name, (r, w) in scores.items()}


# ---------------------------------------------------------------------------------------- MIN_PAIR_SCORE
@contextmanager
def min_pair_score(value: float) -> Iterator[None]:
    """`union_score.MIN_PAIR_SCORE` set to `value` for a sensitivity check (`align` reads the
    module constant when called; union_score takes it as no parameter)."""
    from spark_jobs.relate import union_score  # deferred: as above

    saved = union_score.MIN_PAIR_SCORE
    union_score.MIN_PAIR_SCORE = value
    try:
        yield
    finally:
        union_score.MIN_PAIR_SCORE = saved


# ---------------------------------------------------------------------------------------- the report
@dataclass
class FitReport:
    seed: int
    defaults: Weights
    fitted: Weights
    steps: list[Step]
    reproduced: int  # queries whose default ranking equals their gold list
    n_queries: int
    same_metrics: bool  # the default ranking's metrics equal the gold lists'
    table: list[tuple[str, str, Metrics]]  # (weights, split, metrics)
    separability: dict[str, Separability]
    thresholds: list[tuple[float, Metrics, Metrics]]  # (MIN_PAIR_SCORE, defaults, fitted), all queries
    every_relevant: list[tuple[str, Metrics]]  # (weights, metrics): every relevant table a candidate
    seconds: float


def fit(store: LakeStore, truth: Truth, k: int, seed: int, passes: int = 4) -> FitReport:
    """Reproduce the gold lists, fit the weights on the training half, and measure both halves."""
    from spark_jobs.relate.union_score import SIGNALS  # deferred: as above

    t0 = time.perf_counter()
    lake = load_indexed(store, query_ids(truth), k)
    cache = SignalCache()
    defaults = {s.name: s.weight for s in SIGNALS}
    everything = query_ids(truth)
    ranked = rank_queries(lake, everything, None, cache)
    reproduced = sum(ranked[q] == lake.gold.get(q, []) for q in everything)
    same = evaluate(ranked, truth).same_as(evaluate(lake.gold, truth))
    split = split_by_base(truth, seed)
    fitted, steps = coordinate_ascent(lake, split.train, defaults, cache, passes)
    table = []
    for label, w in (("defaults", defaults), ("fitted", fitted)):
        lists = rank_queries(lake, everything, w, cache)
        for part, t in (("train", split.train), ("held out", split.held_out), ("all", truth)):
            table.append((label, part, evaluate(lists, t)))
    thresholds = []
    for value in MIN_PAIR_SCORES:
        with min_pair_score(value):
            at_defaults = evaluate(rank_queries(lake, everything, defaults, cache), truth)
            at_fitted = evaluate(rank_queries(lake, everything, fitted, cache), truth)
        thresholds.append((value, at_defaults, at_fitted))
    separability = pair_separability(lake, cache, truth, {"combined (defaults)": defaults, "combined (fitted)": fitted})
    ideal = with_every_relevant(lake, truth)
    every_relevant = [
        (label, evaluate(rank_queries(ideal, everything, w, cache), truth))
        for label, w in (("defaults", defaults), ("fitted", fitted))
    ]
    return FitReport(
        seed,
        defaults,
        fitted,
        steps,
        reproduced,
        len(everything),
        same,
        table,
        separability,
        thresholds,
        every_relevant,
        time.perf_counter() - t0,
    )


def print_fit(r: FitReport) -> None:
    print(f"\n### Fitted weights (coordinate ascent over {list(GRID)}, split seed {r.seed})\n")
    verdict = "equal" if r.same_metrics else "**NOT equal**"
    print(
        f"check: `score_group` re-ranks {r.reproduced} of {r.n_queries} queries exactly as the gold lists "
        f"with the default weights; metrics {verdict} to the gold lists'\n"
    )
    print("| weights | queries | n | MAP@10 | P@5 | MAP@5 | P@10 |")
    print("|---|---|---|---|---|---|---|")
    for label, part, m in r.table:
        cells = (m.map[10], m.precision[5], m.map[5], m.precision[10])
        print(f"| {label} | {part} | {m.n_queries} | {' | '.join(f'{c:.3f}' for c in cells)} |")
    print("\nsearch moves (train MAP@10, P@5 after the move):\n")
    for step in r.steps:
        obj = step.objective
        print(f"- pass {step.pass_no}: {step.signal} {step.old:g} -> {step.new:g}: {obj[0]:.3f}, {obj[1]:.3f}")
    if not r.steps:
        print("- none: the defaults are a fixed point of the search")
    print("\nfitted weights, to paste:\n")
    print(f"    UNION_WEIGHTS = {r.fitted!r}")
    print(f"    # defaults: {r.defaults!r}")
    print("\nevery column pair of a query with each candidate (right = cut from the same base column)\n")
    print("| signal | AUC right vs wrong | right pairs | wrong pairs |")
    print("|---|---|---|---|")
    for name, s in r.separability.items():
        print(f"| {name} | {s.auc:.3f} | {s.n_right:,} | {s.n_wrong:,} |")
    print("\nMIN_PAIR_SCORE (union_score's constant, not a parameter: patched for this check), all queries\n")
    print("| MIN_PAIR_SCORE | defaults MAP@10 | defaults P@5 | fitted MAP@10 | fitted P@5 |")
    print("|---|---|---|---|---|")
    for value, d, f in r.thresholds:
        print(f"| {value:g} | {d.map[10]:.3f} | {d.precision[5]:.3f} | {f.map[10]:.3f} | {f.precision[5]:.3f} |")
    print("\nwhere the gold lists lose, all queries: candidate generation or scoring (every relevant table")
    print("added to its query's candidates, so that only the scoring can miss)\n")
    print("| weights | candidates | MAP@10 | P@5 | R@10 |")
    print("|---|---|---|---|---|")
    as_generated = {label: m for label, part, m in r.table if part == "all"}
    for label, m in r.every_relevant:
        for kind, row in (("as generated", as_generated[label]), ("every relevant added", m)):
            print(f"| {label} | {kind} | {row.map[10]:.3f} | {row.precision[5]:.3f} | {row.recall[10]:.3f} |")
    print(f"\nfit time {r.seconds:.1f}s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.union_fit", description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="a folder union_bench --keep left (truth.json, home-1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the train / held-out split of the bases")
    parser.add_argument("--passes", type=int, default=4)
    args = parser.parse_args(argv)
    from spark_jobs.lake.store import LakeStore  # deferred: as above

    settings = union_settings(args.root / "home-1", "local[1]")
    report = fit(
        LakeStore(settings.lake),
        load_truth(args.root / "truth.json"),
        settings.index.unionable_k,
        args.seed,
        args.passes,
    )
    print_fit(report)
    return 0 if report.same_metrics else 1


if __name__ == "__main__":
    raise SystemExit(main())
