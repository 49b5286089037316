"""LSH Ensemble's settings: `[index.lshensemble]` in juncture.toml (read through
`Settings.index.family("lshensemble")`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from catalog.core.errors import SettingsError

if TYPE_CHECKING:
    from catalog.core.settings import Settings


@dataclass(frozen=True)
class LshEnsembleSettings:
    # MinHash: permutations and their seed. Changing either makes every stored signature useless:
    # the next update refuses, and `juncture rebuild` re-signs the lake.
    num_perm: int = 256
    seed: int = 1
    # Size partitions: how many, and how they are cut ("optimal": the thesis's dynamic programme
    # over the size histogram; "equi_depth": the same number of columns in each).
    n_partitions: int = 16
    partitioning: Literal["optimal", "equi_depth"] = "optimal"
    # Longest band (r) a query may use; b * r <= num_perm.
    max_r: int = 4
    # Weights of false positives and false negatives when (b, r) is chosen per query.
    fp_weight: float = 0.5
    fn_weight: float = 0.5
    # A repartition is due when the false-positive cost of today's bounds (stretched by inserts
    # above every partition) exceeds that of fresh bounds by this ratio.
    rebuild_cost_ratio: float = 1.25

    def __post_init__(self) -> None:
        # deferred: minhash loads pyarrow, and every command reads the settings (with every family's class)
        from catalog.core.minhash import MAX_NUM_PERM

        checks = {
            "num_perm": 1 <= self.num_perm <= MAX_NUM_PERM,
            "seed": self.seed >= 0,
            "n_partitions": self.n_partitions >= 1,
            "max_r": 1 <= self.max_r <= self.num_perm,
            "fp_weight": self.fp_weight >= 0 and self.fp_weight + self.fn_weight > 0,
            "fn_weight": self.fn_weight >= 0,
            "rebuild_cost_ratio": self.rebuild_cost_ratio >= 1.0,
        }
        for key, ok in checks.items():
            if not ok:
                problem = f"out of range: {getattr(self, key)!r}"
                raise SettingsError("juncture.toml", f"index.lshensemble.{key}", problem)


def lshensemble_settings(settings: Settings) -> LshEnsembleSettings:
    """LSH Ensemble's settings out of the one settings object."""
    out: LshEnsembleSettings = settings.index.family("lshensemble")
    return out
