"""Auto-Join's settings: `[index.autojoin]` in juncture.toml (read through `Settings.index.family("autojoin")`).

The thesis gives no defaults for the candidate generation (k, r, L, b); these are ours, chosen on
the quality cases (docs/algorithms/autojoin.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from catalog.core.errors import SettingsError

if TYPE_CHECKING:
    from catalog.core.settings import Settings


@dataclass(frozen=True)
class AutojoinSettings:
    # rare q-gram row pairing: q-gram lengths, the largest n·m of a match kept
    q_min: int = 3
    q_max: int = 12
    max_nm: int = 4
    # characters of a value cut into q-grams (a code past them is not seen); also the longest key a
    # program is learned to produce, and how far from an end of its input an Extract may start
    max_chars: int = 128
    # the longest input value an example pair is learned from (a program still reads longer ones):
    # the search's paths grow with a value's length times its separators squared, and a real
    # lake's descriptions of 1,000-5,000 characters took a minute a pair
    max_example_chars: int = 512
    # candidate generation (Algorithm 5): the top-k example pairs of a column group, r random
    # subsets of b of them per group, at most L example sets in all
    top_k: int = 32
    subsets: int = 12
    examples_per_set: int = 3
    max_example_sets: int = 48
    # program search (Algorithm 4): τ operators, next-best operators tried per step, work cap
    max_operators: int = 10
    breadth: int = 3
    max_steps: int = 400
    # sampling (§4.5): T example pairs wanted, Chernoff δ, assumed join participation r
    sample_examples: int = 4
    delta: float = 0.8
    participation: float = 0.05
    # the join: fewest target rows a program must cover (the next setting too), the source columns
    # fed to a program, the columns of each table considered at all
    min_coverage: int = 2
    # ... and at least this share of the smaller table's rows, by the equi-join alone (ours: the
    # thesis has none; a spurious program covers a few percent at most on the quality cases)
    min_coverage_share: float = 0.05
    max_inputs: int = 3
    max_columns: int = 24
    # constrained fuzzy join (§4.6)
    fuzzy: bool = True
    fuzzy_max_distance: float = 0.5
    fuzzy_max_values: int = 100_000
    # precomputed transformation lists (`lists.py`, published by `lake_index`): each textual
    # column's best `list_candidates` columns by rare q-grams shared (at least `list_min_shared`)
    # among the first `list_tokens` tokens of each column, those sharing `list_max_exact` or more of
    # the smaller sample exactly left out (an equi-join finds them); at most `list_max_pairs` pairs
    # learned by a batch's publish (a small change is published in seconds) and
    # `list_backlog_pairs` by the backlog's after it (a first build's lists: about 0.05 s a pair on
    # the portal's real tables, 2-core machine); columns of tables over `list_max_rows` rows are
    # not candidates
    list_candidates: int = 3
    list_tokens: int = 64
    list_min_shared: int = 4
    list_max_df: int = 10
    list_max_exact: float = 0.5
    list_max_pairs: int = 64
    list_backlog_pairs: int = 5000
    list_max_rows: int = 200_000

    def __post_init__(self) -> None:
        checks = {
            "q_min": self.q_min >= 3,
            "q_max": self.q_max >= self.q_min,
            "max_nm": self.max_nm >= 1,
            "max_chars": self.max_chars >= self.q_max,
            "max_example_chars": self.max_example_chars >= self.max_chars,
            "top_k": self.top_k >= self.examples_per_set,
            "subsets": self.subsets >= 1,
            "examples_per_set": 1 <= self.examples_per_set <= 8,
            "max_example_sets": self.max_example_sets >= 1,
            "max_operators": 1 <= self.max_operators <= 32,
            "breadth": self.breadth >= 1,
            "max_steps": self.max_steps >= 1,
            "sample_examples": self.sample_examples >= 1,
            "delta": 0.0 < self.delta < 1.0,
            "participation": 0.0 < self.participation <= 1.0,
            "min_coverage": self.min_coverage >= 1,
            "min_coverage_share": 0.0 <= self.min_coverage_share <= 1.0,
            "max_inputs": 1 <= self.max_inputs <= 8,
            "max_columns": self.max_columns >= 1,
            "fuzzy_max_distance": 0.0 <= self.fuzzy_max_distance < 1.0,
            "fuzzy_max_values": self.fuzzy_max_values >= 0,
            "list_candidates": 1 <= self.list_candidates <= 50,
            "list_tokens": self.list_tokens >= 1,
            "list_min_shared": self.list_min_shared >= 1,
            "list_max_df": self.list_max_df >= 2,
            "list_max_exact": 0.0 < self.list_max_exact <= 1.0,
            "list_max_pairs": self.list_max_pairs >= 0,
            "list_backlog_pairs": self.list_backlog_pairs >= 0,
            "list_max_rows": self.list_max_rows >= 1,
        }
        for key, ok in checks.items():
            if not ok:
                raise SettingsError("juncture.toml", f"index.autojoin.{key}", f"out of range: {getattr(self, key)!r}")


def autojoin_settings(settings: Settings) -> AutojoinSettings:
    """Auto-Join's settings out of the one settings object."""
    out: AutojoinSettings = settings.index.family("autojoin")
    return out
