"""PEXESO's optional model-based embedder: a sentence-transformers model read from a local folder
(`[index.pexeso] model_path`), behind the same `Embedder` interface as the hashed n-grams. A model
knows that `car` and `automobile` mean one thing, which no character n-gram can; the price is the
optional `semantic` extra (torch and transformers) and a model the user chose and put on disk.

Nothing is ever downloaded: the folder must exist and is loaded with `local_files_only`, so a
missing model is a one-line settings error, never a hub request. The embedder's `version` is a
stable hash of the model's files, so a model changed on disk is another embedder: the next update
re-embeds the lake, and a query embedded by the changed model against the old index is refused.

The embedder itself is a few strings and integers (it travels to Spark's executors as such); the
model is loaded on first use in each process, once per (folder, version), on the CPU.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from catalog.core.embedding import normalise_values, unit_rows
from catalog.core.errors import SettingsError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

WHERE, KEY = "juncture.toml", "index.pexeso.model_path"
INSTALL = "pip install 'juncture[semantic]'"
NAME_PREFIX = "sentence-transformers:"
_CHUNK = 1 << 14  # values per encode call: bounds the (values × dimension) block in memory
_BATCH = 256  # values per forward pass inside one encode call
# Files that do not change a vector: the model card, and hidden files (editor, git, cache litter).
_NOT_THE_MODEL = frozenset({"README.md"})
_VERSIONS: dict[tuple[str, tuple[tuple[str, int, int], ...]], int] = {}


@dataclass(frozen=True)
class SentenceTransformerEmbedder:
    """A sentence-transformers model's text embeddings, unit-normalised float32. Build it with
    `from_path`, which checks the folder, hashes its files into `version` and reads `dimension`
    from the loaded model."""

    path: str
    name: str
    version: int
    dimension: int

    @classmethod
    def from_path(cls, path: str | Path) -> SentenceTransformerEmbedder:
        folder = model_folder(path)
        version = model_version(folder)
        dimension = _dimension(load_model(str(folder), version), folder)
        return cls(str(folder), NAME_PREFIX + folder.name, version, dimension)

    def embed(self, values: Sequence[str] | pa.Array) -> np.ndarray:
        """(len(values), dimension) float32 unit rows; all zeros for a null, a value that
        normalises to nothing, and a value the model maps to the zero vector (none of its words
        known to a static model)."""
        array = values if isinstance(values, pa.Array) else pa.array(values, pa.string())
        out = np.zeros((len(array), self.dimension), np.float32)
        text = normalise_values(array)
        present = pc.fill_null(pc.greater(pc.utf8_length(text), 0), False)
        rows = np.flatnonzero(present.to_numpy(zero_copy_only=False))
        if not len(rows):
            return out
        model = load_model(self.path, self.version)
        strings = text.filter(present)
        for i in range(0, len(rows), _CHUNK):
            chunk = strings.slice(i, _CHUNK).to_pylist()  # the tokenizer takes Python strings
            vectors = model.encode(chunk, batch_size=_BATCH, convert_to_numpy=True, show_progress_bar=False)
            out[rows[i : i + _CHUNK]] = unit_rows(np.nan_to_num(np.asarray(vectors, np.float64)))
        return out


def model_folder(path: str | Path) -> Path:
    """`path` as an absolute folder, or a one-line settings error saying what is wrong with it."""
    folder = Path(path).expanduser().absolute()
    if not folder.exists():
        raise SettingsError(WHERE, KEY, f"no model folder at {str(folder)!r} (models are never downloaded)")
    if not folder.is_dir():
        raise SettingsError(WHERE, KEY, f"{str(folder)!r} is not a folder (a saved sentence-transformers model)")
    return folder


def model_version(folder: Path) -> int:
    """A stable hash of the model's files (their paths and bytes) in [1, 2³¹ − 1]: the same model
    on any machine gets the same version, a changed file another. Remembered per process while
    no file's size or modification time changes, so asking again costs a directory walk."""
    files = _model_files(folder)
    try:
        stats = tuple((rel, st.st_size, st.st_mtime_ns) for rel, st in ((rel, p.stat()) for rel, p in files))
        key = (str(folder), stats)
        if key not in _VERSIONS:
            digest = hashlib.sha256()
            for (rel, p), (_, size, _) in zip(files, stats, strict=True):
                digest.update(f"{rel}\0{size}\0".encode())
                with p.open("rb") as f:
                    for block in iter(functools.partial(f.read, 1 << 20), b""):
                        digest.update(block)
            _VERSIONS[key] = int.from_bytes(digest.digest()[:8], "big") % (2**31 - 1) + 1
    except OSError as e:
        raise SettingsError(WHERE, KEY, f"cannot read the model in {str(folder)!r}: {e.strerror or e}") from None
    return _VERSIONS[key]


def _model_files(folder: Path) -> list[tuple[str, Path]]:
    """(path relative to the folder, path) of every file that makes the model, sorted."""
    try:
        found = sorted((p.relative_to(folder).as_posix(), p) for p in folder.rglob("*") if p.is_file())
    except OSError as e:
        raise SettingsError(WHERE, KEY, f"cannot read the model in {str(folder)!r}: {e.strerror or e}") from None
    kept = [(rel, p) for rel, p in found if rel not in _NOT_THE_MODEL and not rel.startswith(".") and "/." not in rel]
    if not kept:
        raise SettingsError(WHERE, KEY, f"{str(folder)!r} holds no model files")
    return kept


@functools.lru_cache(maxsize=2)
def load_model(path: str, version: int) -> SentenceTransformer:
    """The model in `path`, loaded once per process (driver, API worker or Spark executor) from the
    local folder only, on the CPU; refused if its files no longer hash to `version` (the model was
    changed after the embedder was made: its vectors would not be the recorded embedder's)."""
    try:
        from sentence_transformers import SentenceTransformer  # deferred: optional extra, and torch is slow to import
    except ImportError:
        raise SettingsError(WHERE, KEY, f"needs the optional sentence-transformers package: {INSTALL}") from None
    folder = model_folder(path)
    found = model_version(folder)
    if found != version:
        raise SettingsError(
            WHERE, KEY, f"the model in {path!r} changed (version {found}, expected {version}): run `juncture index`"
        )
    try:
        return SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    except (OSError, ValueError, KeyError, RuntimeError, TypeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise SettingsError(WHERE, KEY, f"cannot load a sentence-transformers model from {path!r}: {first}") from None


def _dimension(model: Any, folder: Path) -> int:
    dimension = model.get_embedding_dimension()
    if not isinstance(dimension, int) or dimension < 1:
        raise SettingsError(WHERE, KEY, f"the model in {str(folder)!r} does not say its embedding dimension")
    return dimension
