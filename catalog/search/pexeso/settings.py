"""PEXESO's settings: `[index.pexeso]` in juncture.toml (read through `Settings.index.family("pexeso")`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from catalog.core.errors import SettingsError

if TYPE_CHECKING:
    from catalog.core.embedding import Embedder
    from catalog.core.settings import Settings
    from catalog.search.pexeso.index import IndexShape

_WHERE = "juncture.toml"


@dataclass(frozen=True)
class PexesoSettings:
    # The embedder: character 2-4-grams of the normalised value hashed into `dimension` floats.
    # Changing it makes every stored vector incomparable with a new query's: the next update
    # re-embeds the whole lake.
    dimension: int = 256
    # Pivots |P| and grid levels m (the paper's defaults on its larger data set); "pca" (Mao et al.)
    # or "random" pivot selection; the seed makes a selection repeatable.
    n_pivots: int = 5
    levels: int = 6
    pivot_method: str = "pca"
    seed: int = 0
    # The profile types (`column_profiles.inferred_type`) of the columns embedded.
    types: tuple[str, ...] = field(default=("text", "categorical", "identifier"))
    # Re-select the pivots once the vectors added or deleted since the last selection reach this
    # share of the vectors then held (answers stay exact with stale pivots; pruning weakens).
    repivot_share: float = 0.5
    # The most lake vectors (MB, at ~2.3 KB a 256-d vector once loaded and gridded) one search, one
    # semantic-list refresh or one load of the API holds at once: the columns are clustered into
    # partitions of at most this size (JSD clustering, docs/algorithms/pexeso.md); the default
    # keeps a lake of about 1.8 million vectors one partition.
    memory_budget_mb: float = 4096.0
    # Re-partition (with the pivots) once the partitions' quality (1 - mean JSD of each column to
    # its centre / ln 2) has fallen by this share since they were clustered.
    repartition_share: float = 0.2
    # Optional: a sentence-transformers model saved in this local folder embeds instead of the
    # n-grams (its dimension replaces `dimension`; needs `pip install 'juncture[semantic]'`; never
    # downloaded). Empty: the n-grams. A changed model (any file of it) is another embedder, as above.
    model_path: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.dimension, int) or not 8 <= self.dimension <= 4096:
            raise SettingsError(_WHERE, "index.pexeso.dimension", f"must be in [8, 4096], got {self.dimension!r}")
        if not isinstance(self.n_pivots, int) or not isinstance(self.levels, int):
            raise SettingsError(_WHERE, "index.pexeso.n_pivots", "n_pivots and levels must be integers")
        if not self.n_pivots >= 1 or not self.levels >= 1 or self.n_pivots * self.levels > 62:
            raise SettingsError(
                _WHERE,
                "index.pexeso.n_pivots",
                f"need n_pivots, levels >= 1 and n_pivots * levels <= 62, got {self.n_pivots} * {self.levels}",
            )
        if self.pivot_method not in ("pca", "random"):
            raise SettingsError(
                _WHERE, "index.pexeso.pivot_method", f"must be pca or random, got {self.pivot_method!r}"
            )
        if not self.repivot_share > 0.0:
            raise SettingsError(_WHERE, "index.pexeso.repivot_share", f"must be > 0, got {self.repivot_share!r}")
        if not isinstance(self.memory_budget_mb, int | float) or not self.memory_budget_mb > 0:
            got = self.memory_budget_mb
            raise SettingsError(_WHERE, "index.pexeso.memory_budget_mb", f"must be a positive number, got {got!r}")
        if not 0.0 < self.repartition_share <= 1.0:
            raise SettingsError(
                _WHERE, "index.pexeso.repartition_share", f"must be in (0, 1], got {self.repartition_share!r}"
            )
        if not isinstance(self.model_path, str):
            raise SettingsError(_WHERE, "index.pexeso.model_path", f"expected a folder, got {self.model_path!r}")
        object.__setattr__(self, "types", tuple(self.types))

    @property
    def embedder(self) -> Embedder:
        if self.model_path:
            from catalog.core.sentence_embedding import SentenceTransformerEmbedder  # deferred: torch, optional

            return SentenceTransformerEmbedder.from_path(self.model_path)
        from catalog.search.pexeso.index import pexeso_embedder  # deferred: every command reads the settings

        return pexeso_embedder(self.dimension)

    @property
    def shape(self) -> IndexShape:
        from catalog.search.pexeso.index import IndexShape  # deferred: as above (numpy)

        return IndexShape(
            self.n_pivots,
            self.levels,
            self.pivot_method,  # type: ignore[arg-type]
            self.seed,
            float(self.memory_budget_mb),
        )


def pexeso_settings(settings: Settings) -> PexesoSettings:
    """PEXESO's settings out of the one settings object."""
    out: PexesoSettings = settings.index.family("pexeso")
    return out
