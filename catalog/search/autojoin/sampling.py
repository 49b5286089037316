"""How many rows of each table Auto-Join samples (thesis §4.5), with the closed form re-derived.

The join key is unknown, so the two tables are sampled independently, at rates p_s and p_t. With r
the share of target rows that join (the join participation rate, set conservatively low), the
number X of joining row pairs that survive has mean μ = N_t·r·p_t·p_s. The search needs T example
pairs; the multiplicative Chernoff bound P(X ≤ (1−δ)μ) ≤ exp(−δ²μ/2) gives, when
μ ≥ T/(1−δ), P(X ≤ T) ≤ exp(−δ²μ/2). So the constraint is p_s·p_t ≥ c = T / ((1−δ)·r·N_t), and
the rows read are N_s·p_s + N_t·p_t. Their product is fixed (N_s·N_t·c), so by AM-GM their sum is
least when they are equal:

    N_s·p_s = N_t·p_t = sqrt(T·N_s / ((1−δ)·r))
    p_s = sqrt(T / ((1−δ)·r·N_s)),   p_t = sqrt(T·N_s / ((1−δ)·r)) / N_t.

The thesis prints these two with s and t swapped (docs/algorithms/autojoin.md): its pair also meets
the constraint but reads more rows whenever N_s ≠ N_t. A rate above 1 is clipped to 1 (the whole
table) and the other raised to keep p_s·p_t ≥ c.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SampleRates:
    source: float
    target: float
    failure_bound: float  # exp(-δ²μ/2) at these rates: the chance of fewer than T joining pairs

    def rows(self, n_source: int, n_target: int) -> tuple[int, int]:
        return (min(n_source, math.ceil(self.source * n_source)), min(n_target, math.ceil(self.target * n_target)))


def sample_rates(
    n_source: int, n_target: int, *, examples: int = 4, delta: float = 0.8, participation: float = 0.05
) -> SampleRates:
    """The rates minimising N_s·p_s + N_t·p_t under N_t·r·p_s·p_t ≥ T/(1−δ)."""
    if n_source < 1 or n_target < 1:
        raise ValueError(f"both tables need rows, got {n_source} and {n_target}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if not 0.0 < participation <= 1.0:
        raise ValueError(f"participation must be in (0, 1], got {participation}")
    if examples < 1:
        raise ValueError(f"examples must be at least 1, got {examples}")
    c = examples / ((1.0 - delta) * participation * n_target)
    each = math.sqrt(examples * n_source / ((1.0 - delta) * participation))
    p_s, p_t = each / n_source, each / n_target
    if p_s > 1.0:
        p_s, p_t = 1.0, c
    if p_t > 1.0:
        p_t, p_s = 1.0, min(1.0, c)
    p_t = min(1.0, p_t)
    mu = n_target * participation * p_s * p_t
    return SampleRates(p_s, p_t, chernoff_failure(mu, delta))


def thesis_rates(
    n_source: int, n_target: int, *, examples: int = 4, delta: float = 0.8, participation: float = 0.05
) -> tuple[float, float]:
    """The thesis's printed closed form (p_s, p_t), unclipped: kept to test the re-derivation against."""
    p_t = math.sqrt(examples / ((1.0 - delta) * participation * n_source))
    p_s = math.sqrt(examples * n_source / ((1.0 - delta) * participation * n_target**2))
    return p_s, p_t


def chernoff_failure(mu: float, delta: float) -> float:
    """exp(−δ²μ/2): the bound on P(X ≤ (1−δ)μ) for a sum X of independent Bernoullis with mean μ."""
    return math.exp(-(delta**2) * mu / 2.0)
