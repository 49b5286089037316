"""PEXESO's optional sentence-transformers embedder, on a tiny model each test builds and saves itself
(a static word-embedding model over a dozen words: no download). The model gives synonyms (`car`,
`automobile`) the same or nearly the same vector and unrelated words orthogonal ones, so PEXESO
finds a column of synonyms that exact search and the hashed n-grams miss. The last test runs the
pipeline (crawl, embed in Spark, publish, search by CLI and HTTP) with `model_path` set, on both
catalog databases."""

from __future__ import annotations

import json
import re
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from fastapi.testclient import TestClient
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import StaticEmbedding
from sqlalchemy import select
from tokenizers import Tokenizer, models, pre_tokenizers

from catalog.api.app import create_app
from catalog.cli.main import main
from catalog.core.embedding import Embedder, normalise_values
from catalog.core.errors import EmbedderMismatchError, SettingsError
from catalog.core.identity import file_table_id
from catalog.core.sentence_embedding import SentenceTransformerEmbedder, load_model
from catalog.core.settings import load_settings
from catalog.db.engine import open_catalog
from catalog.search.pexeso.index import ColumnRef, EmbeddingSpec, IndexShape, PexesoIndex, embed_column, pexeso_embedder
from catalog.search.pexeso.models import PexesoMeta
from catalog.search.pexeso.search import Query, search
from catalog.search.pexeso.settings import PexesoSettings, pexeso_settings
from catalog.search.pexeso.source import embedder_for
from spark_jobs.lake.store import LakeStore
from tests.conftest import cli_home

DIMENSION = 16
# word -> concept: a concept is a basis vector, so words of different concepts are √2 apart
CONCEPTS = {
    "car": 0,
    "automobile": 0,
    "bike": 1,
    "bicycle": 1,
    "lorry": 2,
    "truck": 2,
    "apple": 3,
    "banana": 4,
    "cherry": 5,
    "boston": 6,
}
NEARLY = {"automobile": 0.02}  # a synonym a little off its concept (distance ≈ 0.02, inside τ = 0.06)
VEHICLES = ["automobile", "bicycle", "truck"]  # the lake column only the model joins with...
QUERY = ["Car", "BIKE", "lorry."]  # ...this query (no token in common, no n-gram close)
FRUIT = ["apple", "banana", "cherry"]


def save_tiny_model(folder: Path, *, swap: tuple[str, str] | None = None) -> Path:
    """A static word-embedding model over CONCEPTS (unknown words: the zero vector), saved to
    `folder`; `swap` exchanges two words' vectors (a changed model)."""
    vocab = {"[UNK]": 0} | {w: i + 1 for i, w in enumerate(CONCEPTS)}
    weights = np.zeros((len(vocab), DIMENSION), np.float32)
    for word, concept in CONCEPTS.items():
        weights[vocab[word], concept] = 1.0
        weights[vocab[word], DIMENSION - 1] = NEARLY.get(word, 0.0)
    if swap:
        a, b = vocab[swap[0]], vocab[swap[1]]
        weights[[a, b]] = weights[[b, a]]
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    SentenceTransformer(modules=[StaticEmbedding(tokenizer, embedding_weights=weights)], device="cpu").save(str(folder))
    return folder


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return save_tiny_model(tmp_path / "tiny")


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection or name lookup fails: a hub request would raise."""

    def refused(*args: object, **kwargs: object) -> None:
        raise OSError("the network is blocked in this test")

    monkeypatch.setattr(socket.socket, "connect", refused)
    monkeypatch.setattr(socket, "getaddrinfo", refused)


def test_the_model_loads_from_its_folder_with_the_hub_blocked(tiny: Path, no_network: None) -> None:
    load_model.cache_clear()
    embedder = PexesoSettings(model_path=str(tiny)).embedder
    assert isinstance(embedder, SentenceTransformerEmbedder)
    assert (embedder.name, embedder.dimension) == ("sentence-transformers:tiny", DIMENSION)
    assert 1 <= embedder.version < 2**31 and embedder.path == str(tiny)
    vectors = embedder.embed(["car", "automobile", "apple"])
    assert vectors.dtype == np.float32 and vectors.shape == (3, DIMENSION)
    assert np.linalg.norm(vectors[0] - vectors[1]) < 0.03 and np.linalg.norm(vectors[0] - vectors[2]) > 1.4


def test_the_version_is_a_hash_of_the_model_files(tmp_path: Path) -> None:
    first = SentenceTransformerEmbedder.from_path(save_tiny_model(tmp_path / "a" / "tiny"))
    same = SentenceTransformerEmbedder.from_path(save_tiny_model(tmp_path / "b" / "tiny"))
    assert EmbeddingSpec.of(same) == EmbeddingSpec.of(first)  # same files elsewhere: the same embedder
    (tmp_path / "a" / "tiny" / "README.md").write_text("notes\n")
    assert SentenceTransformerEmbedder.from_path(tmp_path / "a" / "tiny").version == first.version
    changed = SentenceTransformerEmbedder.from_path(save_tiny_model(tmp_path / "a" / "tiny", swap=("apple", "cherry")))
    assert changed.name == first.name and changed.version != first.version
    assert np.allclose(changed.embed(["apple"]), same.embed(["cherry"]))


def test_vectors_are_unit_rows_of_the_normalised_values(tiny: Path) -> None:
    embedder = SentenceTransformerEmbedder.from_path(tiny)
    values = pa.array(["Car", "AUTOMOBILE.", None, "", "...", "zebra", "car apple", "Bike!"])
    vectors = embedder.embed(values)
    norms = np.linalg.norm(vectors, axis=1)
    assert np.allclose(norms, [1, 1, 0, 0, 0, 0, 1, 1], atol=1e-6)  # nothing known to the model: zeros
    assert np.allclose(vectors[0], embedder.embed(["car"])[0]) and np.allclose(vectors[7], embedder.embed(["bike"])[0])
    assert np.isclose(vectors[6] @ embedder.embed(["apple"])[0], np.sqrt(0.5), atol=1e-6)  # the mean of two words
    # the model sees a value as the n-gram embedder does: its normalisation is the same
    variants = ["St. John's", "NEW-YORK  city", "o'neil", "Ünïcode—Straße", "a.b.c"]
    ngrams = pexeso_embedder()
    assert np.array_equal(ngrams.embed(variants), ngrams.embed(normalise_values(pa.array(variants))))


def _index(embedder: Embedder, columns: dict[str, list[str]]) -> PexesoIndex:
    lake = [embed_column(ColumnRef(f"t#{c}", "t", c), values, embedder) for c, values in columns.items()]
    return PexesoIndex.build(lake, EmbeddingSpec.of(embedder), IndexShape(n_pivots=2, levels=3))


def test_pexeso_with_the_model_finds_the_synonym_column_the_others_miss(tiny: Path) -> None:
    model = SentenceTransformerEmbedder.from_path(tiny)
    columns = {"vehicles": VEHICLES, "fruit": FRUIT}
    found = search(_index(model, columns), Query.embed(QUERY, model))
    assert [(m.column_id, m.n_matched) for m in found] == [("t#vehicles", 3)]
    assert {(e.query_value, e.lake_value) for e in found[0].examples} >= {("Car", "automobile"), ("BIKE", "bicycle")}
    ngrams = pexeso_embedder()
    assert search(_index(ngrams, columns), Query.embed(QUERY, ngrams), tau=0.3, threshold=0.3) == []
    assert not {v.casefold().strip(".") for v in QUERY} & set(VEHICLES)  # and exact search has nothing to join


def test_a_query_embedded_by_the_other_embedder_is_refused(tiny: Path, tmp_path: Path) -> None:
    model, ngrams = SentenceTransformerEmbedder.from_path(tiny), pexeso_embedder()
    by_model, by_ngrams = _index(model, {"v": VEHICLES}), _index(ngrams, {"v": VEHICLES})
    other = re.escape(ngrams.name)
    with pytest.raises(EmbedderMismatchError, match=f"{other} .* built with sentence-transformers:tiny"):
        search(by_model, Query.embed(QUERY, ngrams))
    with pytest.raises(EmbedderMismatchError, match=f"sentence-transformers:tiny .* built with {other}"):
        search(by_ngrams, Query.embed(QUERY, model))
    # the serving side picks the query's embedder from the settings and refuses a mismatch
    with_model, without = PexesoSettings(model_path=str(tiny)), PexesoSettings()
    assert EmbeddingSpec.of(embedder_for(by_model.spec, with_model)) == by_model.spec
    assert EmbeddingSpec.of(embedder_for(by_ngrams.spec, without)) == by_ngrams.spec
    for spec, conf in ((by_ngrams.spec, with_model), (by_model.spec, without)):
        with pytest.raises(EmbedderMismatchError, match=f"built with {spec.name}"):
            embedder_for(spec, conf)
    changed = SentenceTransformerEmbedder.from_path(save_tiny_model(tiny, swap=("bike", "boston")))
    with pytest.raises(EmbedderMismatchError, match=f"v{changed.version} .* built with sentence-transformers:tiny"):
        embedder_for(by_model.spec, with_model)


def _one_line_error(path: Path | str) -> str:
    with pytest.raises(SettingsError) as raised:
        _ = PexesoSettings(model_path=str(path)).embedder
    message = str(raised.value)
    assert "\n" not in message and message.startswith("juncture.toml: index.pexeso.model_path: ")
    return message


def test_a_bad_model_path_or_a_missing_extra_is_one_line(tmp_path: Path, tiny: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert "no model folder at" in _one_line_error(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    assert "is not a folder" in _one_line_error(tmp_path / "file")
    (tmp_path / "empty").mkdir()
    assert "holds no model files" in _one_line_error(tmp_path / "empty")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "modules.json").write_text("{not json")
    assert "cannot load a sentence-transformers model" in _one_line_error(tmp_path / "junk")
    with pytest.raises(SettingsError, match="model_path: expected a folder"):
        PexesoSettings(model_path=3)  # type: ignore[arg-type]
    load_model.cache_clear()
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # the extra not installed
    assert "pip install 'juncture[semantic]'" in _one_line_error(tiny)
    load_model.cache_clear()


# ---------------------------------------------------------------------- through the pipeline
def _toml(model: Path | None) -> str:
    return "[index]\ncells_buckets = 4\n" + (f'\n[index.pexeso]\nmodel_path = "{model}"\n' if model else "")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalog_url: str, spark) -> Iterator[Path]:  # type: ignore[no-untyped-def]
    yield cli_home(tmp_path, monkeypatch, catalog_url, _toml(save_tiny_model(tmp_path / "tiny")))


def _rows(capsys, *args: str) -> list[dict]:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _found(rows: list[dict]) -> set[tuple[str, int]]:
    return {(r["column_id"], r["n_matched"]) for r in rows}


@pytest.mark.slow
def test_the_pipeline_embeds_with_the_configured_model(home: Path, catalog_url: str, capsys) -> None:  # type: ignore[no-untyped-def]
    """Crawl, embed on Spark's executors with the model, publish, search by CLI and HTTP; the
    n-gram side is refused; a changed model is re-embedded by the next batch."""
    files = home / "files"
    tables = (("vehicles", "kind", VEHICLES), ("transport", "mode", QUERY), ("fruit", "fruit", FRUIT))
    for name, header, values in tables:
        (files / f"{name}.csv").write_text("\n".join([header, *values]) + "\n")
    (home / "q.txt").write_text("\n".join(QUERY) + "\n")
    vehicles, transport = f"{file_table_id('vehicles.csv')}#kind", f"{file_table_id('transport.csv')}#mode"
    assert main(["crawl", "--dir", str(files), "--no-progress"]) == 0
    assert main(["index"]) == 0
    model = pexeso_settings(load_settings()).embedder
    assert LakeStore(load_settings().lake).read_arrow("pexeso_state").to_pylist()[0]["spec"] == json.dumps(
        {"dimension": DIMENSION, "name": "sentence-transformers:tiny", "version": model.version}
    )

    found = _found(_rows(capsys, "search", "semantic", "--values", str(home / "q.txt")))
    assert found == {(vehicles, 3), (transport, 3)}
    assert {r["column_id"] for r in _rows(capsys, "search", "join", "--values", str(home / "q.txt"))} == {transport}
    assert [r["column_id"] for r in _rows(capsys, "lookup", "joinable", transport, "--semantic")] == [vehicles]
    answer = TestClient(create_app(load_settings())).post("/v1/search/semantic", json={"values": QUERY})
    assert answer.status_code == 200 and _found(answer.json()["results"]) == {(vehicles, 3), (transport, 3)}

    (home / "juncture.toml").write_text(_toml(None))  # the query side on n-grams: refused
    assert main(["search", "semantic", "--values", str(home / "q.txt")]) == 2
    assert "but the index was built with sentence-transformers:tiny" in capsys.readouterr().err

    # a changed model: refused until the next batch re-embeds every column with it
    (home / "juncture.toml").write_text(_toml(save_tiny_model(home / "tiny", swap=("bicycle", "boston"))))
    assert main(["search", "semantic", "--values", str(home / "q.txt")]) == 2
    assert "but the index was built with sentence-transformers:tiny" in capsys.readouterr().err
    (files / "more.csv").write_text("city\nboston\nseattle\n")
    assert main(["crawl", "--dir", str(files), "--no-progress"]) == 0
    assert main(["index"]) == 0
    changed = pexeso_settings(load_settings()).embedder
    with open_catalog(catalog_url).connect() as conn:
        spec = conn.execute(select(PexesoMeta.value).where(PexesoMeta.key == "spec")).scalar_one()
    assert json.loads(spec)["version"] == changed.version != model.version
    # "boston" now means what "bicycle" meant: the vehicles match two of three, the new city column one
    got = _found(_rows(capsys, "search", "semantic", "--values", str(home / "q.txt"), "--T", "0.3"))
    assert got == {(vehicles, 2), (transport, 3), (f"{file_table_id('more.csv')}#city", 1)}
