"""Value embeddings: one `Embedder` interface for every part of Juncture that compares values by
meaning rather than by equality (union search's embedding signal today, PEXESO's similarity joins
next), so that a value embedded when a lake is indexed and a value embedded at query time are
always embedded the same way.

An embedder has a `name`, a `version` (bumped whenever the same value would get a different vector)
and a `dimension`; whatever stores vectors stores those three with them and refuses to compare
vectors that differ in any. The default, `CharNgramEmbedder`, needs no model: each value's
character trigrams (of its UTF-8 bytes, between begin and end markers) are hashed into `dimension`
signed buckets (the hashing trick). Two values that share most of their trigrams — `new york` and
`new york city`, `colour` and `color`, `2013-01-05` and `2013-02-17` — point in similar directions;
values with nothing in common are near-orthogonal. It knows nothing of synonyms; a model-based
embedder can sit behind the same interface where one is installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import sparse

from catalog.core.canonical_text import canonical_text
from catalog.core.hashing import splitmix64

_BEGIN, _END = "\x02", "\x03"
_CHUNK = 1 << 16  # values embedded per numpy pass: bounds the (values × dimension) block in memory


class Embedder(Protocol):
    """Maps values to unit vectors of `dimension` floats; similar values get a high dot product."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, values: Sequence[str] | pa.Array) -> np.ndarray:
        """(len(values), dimension) float32, each row of unit length (all zeros for a value with
        nothing to embed: empty or null)."""
        ...


@dataclass(frozen=True)
class CharNgramEmbedder:
    """Hashed character n-grams: model-free, deterministic on every platform (the hash is
    splitmix64's finalizer over the n-gram's bytes and `seed`, in numpy's wrapping uint64
    arithmetic). Values longer than `max_bytes` are embedded from their first `max_bytes` bytes.

    `grams` are the n-gram lengths hashed (each in 2..4; trigrams alone by default, hashed as they
    always were, so union search's vectors do not change). `normalise` lower-cases a value, drops
    apostrophes and full stops and turns every other run of characters that are neither letters nor
    digits into one space before embedding, so `St. John's` and `st johns` get the same vector: a case
    or punctuation variant is then no variant at all. `canonical` goes further (and implies it): each
    value is embedded in its canonical form (`catalog.core.canonical_text`: accents, dates, doubled
    letters, abbreviations and word order too)."""

    dimension: int = 64
    seed: int = 0
    max_bytes: int = 64
    name: str = "char-trigram"
    version: int = 1
    grams: tuple[int, ...] = (3,)
    normalise: bool = False
    canonical: bool = False

    def __post_init__(self) -> None:
        if not 8 <= self.dimension <= 4096:
            raise ValueError(f"dimension must be in [8, 4096], got {self.dimension}")
        if not 3 <= self.max_bytes <= 1 << 16:
            raise ValueError(f"max_bytes must be in [3, 65536], got {self.max_bytes}")
        if not self.grams or len(set(self.grams)) != len(self.grams) or not all(2 <= n <= 4 for n in self.grams):
            raise ValueError(f"grams must be distinct lengths in [2, 4], got {self.grams}")

    def embed(self, values: Sequence[str] | pa.Array) -> np.ndarray:
        array = values if isinstance(values, pa.Array) else pa.array(values, pa.string())
        parts = [self._embed_chunk(array.slice(i, _CHUNK)) for i in range(0, len(array), _CHUNK)]
        return np.concatenate(parts) if parts else np.zeros((0, self.dimension), np.float32)

    def _embed_chunk(self, values: pa.Array) -> np.ndarray:
        n = len(values)
        text = pc.cast(values, pa.string())
        if self.canonical:
            text = canonical_text(text)
        elif self.normalise:
            text = normalise_values(text)
        marked = pc.binary_join_element_wise(_BEGIN, text, _END, "").fill_null("")
        marked = marked.combine_chunks() if isinstance(marked, pa.ChunkedArray) else marked
        offsets = np.frombuffer(marked.buffers()[1], np.int32, n + 1, marked.offset * 4).astype(np.int64)
        data = np.frombuffer(marked.buffers()[2], np.uint8) if marked.buffers()[2] else np.zeros(0, np.uint8)
        lengths = np.minimum(np.diff(offsets), self.max_bytes)
        lengths[np.diff(offsets) <= 2] = 0  # markers only: an empty value has no n-gram
        b = data.astype(np.uint64)
        counts = np.zeros(n * self.dimension)
        for size in self.grams:
            grams = np.where(lengths > 0, np.maximum(lengths - size + 1, 0), 0)
            owner = np.repeat(np.arange(n), grams)
            first = np.repeat(np.cumsum(grams) - grams, grams)
            at = np.repeat(offsets[:-1], grams) + (np.arange(len(owner)) - first)
            key = b[at]
            for i in range(1, size):
                key = key | (b[at + i] << np.uint64(8 * i))
            if size == 3:  # the original trigram hash, kept bit for bit
                h = splitmix64(key ^ np.uint64(self.seed & 0xFFFFFFFF) << np.uint64(24))
            else:  # the length in the top byte keeps "ab" and "ab\0\0" apart; the seed mixes in after
                h = splitmix64(splitmix64(key ^ (np.uint64(size) << np.uint64(56))) ^ np.uint64(self.seed & 0xFFFFFFFF))
            bucket = (h >> np.uint64(33)).astype(np.int64) % self.dimension
            sign = np.where(h & np.uint64(1), 1.0, -1.0)
            counts += np.bincount(owner * self.dimension + bucket, weights=sign, minlength=n * self.dimension)
        return unit_rows(counts.reshape(n, self.dimension))


def normalise_values(values: pa.Array) -> pa.Array:
    """`values` lower-cased, apostrophes and full stops dropped, every other run of characters that
    are neither letters nor digits one space: `St. John's` and `st johns` are one value (vectorised,
    in pyarrow). What `CharNgramEmbedder(normalise=True)` and a sentence-transformers model embed."""
    text = pc.replace_substring_regex(pc.utf8_lower(pc.cast(values, pa.string())), "['\u2019.]+", "")
    return pc.utf8_trim_whitespace(pc.replace_substring_regex(text, r"[^\p{L}\p{N}]+", " "))


def unit_rows(m: np.ndarray) -> np.ndarray:
    """`m` (float32) with every non-zero row scaled to unit length."""
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return np.divide(m, norms, out=np.zeros_like(m, dtype=np.float64), where=norms > 0).astype(np.float32)


def set_vectors(embedder: Embedder, values: pa.Array, owners: np.ndarray, n_sets: int) -> np.ndarray:
    """(n_sets, dimension): for each set (values with the same owner index), the unit-length mean
    of its values' vectors; all zeros for a set with nothing to embed. A column's set of values
    becomes one vector this way, each distinct value counting once."""
    vectors = embedder.embed(values)
    if not len(vectors):
        return np.zeros((n_sets, embedder.dimension), np.float32)
    members = sparse.csr_matrix(
        (np.ones(len(owners), np.float32), (owners, np.arange(len(owners)))), shape=(n_sets, len(owners))
    )
    return unit_rows(np.asarray(members @ vectors))


DEFAULT_EMBEDDER: Embedder = CharNgramEmbedder()
