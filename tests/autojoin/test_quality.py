"""Auto-Join's quality on realistic cases built from the real tables the project ships
(`bench/autojoin_cases.py`; `bench.autojoin_bench` asks `search transform` the same cases):
precision and recall of joined row pairs per case and on average, against an equi-join and against
the best fuzzy join over a grid of 3-gram Jaccard thresholds (each source row joined to its most
similar target key; the threshold chosen per case with the ground truth, an oracle). As in the
thesis, a method's empty output counts in average recall and F but not in average precision.
`pytest -s` prints the table (docs/algorithms/autojoin.md shows it)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.autojoin_cases import Case, cases
from catalog.search.autojoin.join import autojoin
from catalog.search.autojoin.qgrams import column_grams

THRESHOLDS = [round(0.1 * i, 1) for i in range(1, 10)]


@dataclass(frozen=True)
class Score:
    precision: float | None  # None: no output
    recall: float

    @property
    def f(self) -> float:
        p = self.precision or 0.0
        return 0.0 if p + self.recall == 0 else 2 * p * self.recall / (p + self.recall)


def score(pairs: set[tuple[int, int]], truth: frozenset[tuple[int, int]]) -> Score:
    hit = len(pairs & truth)
    return Score(hit / len(pairs) if pairs else None, hit / len(truth))


def _source_text(case: Case) -> list[str]:
    """The source row's text a baseline compares: every column but the noise, space-joined."""
    headers, rows = case.source
    keep = [i for i, h in enumerate(headers) if h != "noise"]
    return [" ".join(r[i] or "" for i in keep) for r in rows]


def _target_keys(case: Case) -> list[str]:
    return [r[0] or "" for r in case.target[1]]


def equi_join(case: Case) -> set[tuple[int, int]]:
    at = {k: j for j, k in enumerate(_target_keys(case))}
    return {(i, at[v]) for i, v in enumerate(_source_text(case)) if v in at}


def fuzzy_top1(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """Each source row's most similar target key by 3-gram Jaccard: (target row, similarity)."""
    src, keys = _source_text(case), _target_keys(case)
    a, b = column_grams(src, q_min=3, q_max=3), column_grams(keys, q_min=3, q_max=3)
    a_size = np.bincount(a.value, minlength=len(src))
    b_size = np.bincount(b.value, minlength=len(keys))
    lo, hi = np.searchsorted(b.hashes, a.hashes, "left"), np.searchsorted(b.hashes, a.hashes, "right")
    reps = hi - lo
    left = np.repeat(a.value, reps)
    right = b.value[np.repeat(lo, reps) + np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)]
    pair, shared = np.unique(left * len(keys) + right, return_counts=True)
    left, right = pair // len(keys), pair % len(keys)
    sim = shared / (a_size[left] + b_size[right] - shared)
    best_t, best_s = np.full(len(src), -1), np.zeros(len(src))
    order = np.lexsort((-sim, left))
    first = np.ones(len(order), bool)
    first[1:] = left[order][1:] != left[order][:-1]
    chosen = order[first]
    best_t[left[chosen]], best_s[left[chosen]] = right[chosen], sim[chosen]
    return best_t, best_s


def best_fuzzy(case: Case) -> tuple[Score, float]:
    target, sim = fuzzy_top1(case)
    results = []
    for threshold in THRESHOLDS:
        pairs = {(i, int(t)) for i, (t, s) in enumerate(zip(target, sim, strict=True)) if t >= 0 and s >= threshold}
        results.append((score(pairs, case.truth), threshold))
    return max(results, key=lambda r: r[0].f)


def _avg(values: list[float | None]) -> float:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else 0.0


def test_quality_on_realistic_cases() -> None:
    all_cases = cases()
    assert len(all_cases) >= 20 and all(len(c.truth) >= 10 for c in all_cases)
    rows = []
    for case in all_cases:
        result = autojoin(case.source, case.target)
        aj = score(set(result.pairs), case.truth)
        eq = score(equi_join(case), case.truth)
        fj, threshold = best_fuzzy(case)
        rows.append((case, aj, eq, fj, threshold, result))
    print()
    print(
        f"{'case':30} {'kind':24} {'pairs':>5} | {'AJ P':>5} {'AJ R':>5} {'AJ F':>5} | {'EQ R':>5} | "
        f"{'FJ P':>5} {'FJ R':>5} {'FJ F':>5} {'s':>3} | program"
    )
    for case, aj, eq, fj, threshold, result in rows:
        fmt = lambda v: "  -  " if v is None else f"{v:5.3f}"  # noqa: E731
        print(
            f"{case.name:30} {case.kind:24} {len(case.truth):5} | {fmt(aj.precision)} {aj.recall:5.3f} {aj.f:5.3f} | "
            f"{eq.recall:5.3f} | {fmt(fj.precision)} {fj.recall:5.3f} {fj.f:5.3f} {threshold:3.1f} | {result.program}"
        )
    avg = {
        name: (_avg([r[i].precision for r in rows]), _avg([r[i].recall for r in rows]), _avg([r[i].f for r in rows]))
        for name, i in (("AJ", 1), ("EQ", 2), ("FJ", 3))
    }
    for name, (p, r, f) in avg.items():
        print(f"average {name}: precision {p:.3f} recall {r:.3f} F {f:.3f}")
    assert avg["AJ"][0] >= 0.95 and avg["AJ"][1] >= 0.90
    assert avg["AJ"][2] > avg["FJ"][2]
