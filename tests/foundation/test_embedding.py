"""The default embedder: unit rows, zeros for nothing, the same vector for a value whatever else is
embedded with it, near values nearer than unrelated ones, and parameters checked at the edge."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from catalog.core import embedding
from catalog.core.embedding import CharNgramEmbedder, set_vectors


def test_rows_are_unit_vectors_and_empty_values_are_zero() -> None:
    e = CharNgramEmbedder()
    v = e.embed(["new york", "", None, "x", "a much longer value " * 20])  # type: ignore[list-item]
    assert v.shape == (5, e.dimension) and v.dtype == np.float32
    norms = np.linalg.norm(v, axis=1)
    assert np.allclose(norms[[0, 3, 4]], 1.0, atol=1e-6)
    assert not v[1].any() and not v[2].any()


def test_a_value_gets_the_same_vector_alone_and_in_a_batch_across_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding, "_CHUNK", 3)  # several numpy passes over one call
    e = CharNgramEmbedder()
    values = [f"value {i}" for i in range(10)] + ["héllo wörld", "東京"]
    together = e.embed(values)
    alone = np.stack([e.embed([v])[0] for v in values])
    assert np.array_equal(together, alone)
    assert np.array_equal(e.embed(pa.array(values)), together)
    assert np.array_equal(e.embed(pa.array(values).slice(4, 5)), together[4:9])


def test_values_sharing_most_characters_are_nearer_than_unrelated_ones() -> None:
    e = CharNgramEmbedder()
    v = e.embed(["colour", "color", "new york", "new york city", "zebra", "2013-01-05", "2013-01-06"])
    cos = v @ v.T
    assert cos[0, 1] > 0.4 and cos[2, 3] > 0.4 and cos[5, 6] > 0.4
    assert cos[0, 1] > abs(cos[0, 4]) and cos[2, 3] > abs(cos[2, 4]) and cos[5, 6] > abs(cos[5, 0])


def test_other_seeds_and_sizes_embed_differently_and_bad_parameters_are_refused() -> None:
    values = ["alpha", "beta"]
    assert not np.array_equal(CharNgramEmbedder(seed=1).embed(values), CharNgramEmbedder().embed(values))
    assert CharNgramEmbedder(dimension=128).embed(values).shape == (2, 128)
    for bad in ({"dimension": 4}, {"dimension": 10_000}, {"max_bytes": 2}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            CharNgramEmbedder(**bad)


def test_a_set_vector_is_the_unit_mean_of_its_values_vectors() -> None:
    e = CharNgramEmbedder()
    values = pa.array(["red", "green", "blue", "", "cyan"])
    owners = np.array([0, 0, 1, 1, 3])
    sets = set_vectors(e, values, owners, 4)
    single = e.embed(values)
    first = single[0] + single[1]
    assert np.allclose(sets[0], first / np.linalg.norm(first), atol=1e-6)
    assert np.allclose(sets[1], single[2], atol=1e-6)  # the empty value adds nothing
    assert not sets[2].any()  # no values
    assert np.allclose(sets[3], single[4], atol=1e-6)


def test_more_gram_lengths_and_normalising_are_opt_in() -> None:
    values = ["St. John's", "st johns", "ST-JOHNS", "Saint Johns", "New York"]
    assert np.array_equal(CharNgramEmbedder(grams=(3,)).embed(values), CharNgramEmbedder().embed(values))
    e = CharNgramEmbedder(dimension=256, grams=(2, 3, 4), normalise=True)
    v = e.embed(values)
    assert np.allclose(v[0], v[1]) and np.allclose(v[0], v[2])  # case and punctuation variants: one vector
    assert (v[3] @ v[1]) > 0.5 > abs(v[4] @ v[1])
    assert not np.allclose(CharNgramEmbedder(grams=(2,)).embed(values), CharNgramEmbedder().embed(values))
    for bad in ((), (1,), (3, 3), (5,)):
        with pytest.raises(ValueError, match="grams"):
            CharNgramEmbedder(grams=bad)
    assert not e.embed(["..."]).any()  # nothing left to embed after normalising
