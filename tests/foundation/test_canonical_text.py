"""The canonical form, rule by rule: each format variant real copies differ by is brought to one
spelling, what is not a variant stays apart, and the whole runs per array (nulls kept)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from catalog.core import embedding
from catalog.core.canonical_text import ABBREVIATIONS, canonical_text, collapse_repeats, sorted_words
from catalog.core.embedding import CharNgramEmbedder


def canon(*values: str | None) -> list[str | None]:
    return canonical_text(pa.array(values, pa.string())).to_pylist()


def test_case_punctuation_and_accents_are_dropped() -> None:
    assert canon("St. John's", "ST JOHNS", "st-johns") == ["johns st"] * 3
    assert canon("Café Müller", "CAFE MULLER") == ["cafe muler"] * 2
    assert canon("AT&T", "at and t") == ["and at t"] * 2
    assert canon(None, "", "...") == [None, "", ""]


@pytest.mark.parametrize(
    "written",
    [
        "2021-03-04",
        "2021/3/4",
        "03/04/2021",
        "3/4/2021",
        "04.03.2021",
        "4 March 2021",
        "4th Mar. 2021",
        "4-Mar-2021",
        "March 4, 2021",
        "Mar 4 2021",
        "mar 04 2021",
    ],
)
def test_written_dates_become_iso_us_order_with_slashes_european_with_dots(written: str) -> None:
    assert canon(written) == ["2021 03 04"]


def test_dates_keep_their_order_and_times_lose_t_z_and_zero_seconds() -> None:
    assert canon("2021-04-03") == ["2021 04 03"]  # 3 April is not 4 March
    assert canon("2013-01-01T10:00:00Z", "01/01/2013 10:00", "2013-01-01 10:00:00") == ["2013 01 01 10 00"] * 3
    assert canon("04-03-2021", "4/3/21") == ["04 03 2021", "4 3 21"]  # dashed day-month, two-digit years: left alone


def test_doubled_letters_collapse_but_digits_and_other_scripts_do_not() -> None:
    assert canon("Misssissippi", "Mississippi", "Misisipi") == ["misisipi"] * 3
    assert canon("2000", "東京東京") == ["2000", "東京東京"]
    sliced = pa.array(["xx", "aab", "", "bbb"]).slice(1, 3)
    assert collapse_repeats(sliced).to_pylist() == ["ab", "", "b"]


def test_abbreviations_are_spelt_as_their_group_first_word() -> None:
    assert canon("Main Street", "Main St.", "MAIN STR") == ["main st"] * 3
    assert canon("Saint Paul", "St Paul") == ["paul st"] * 2
    assert canon("Acme Company Incorporated", "ACME CO., INC.") == ["acme co inc"] * 2
    assert canon("Abilene Regional", "Abilene Rgnl") == ["abilene rgnl"] * 2
    assert canon("North Platte", "N. Platte") == ["n plate"] * 2  # doubled letters collapse too
    words = [w for group in ABBREVIATIONS for w in group]
    assert len(words) == len(set(words)), "a word belongs to one group"
    assert canon("Main Streets") == ["main strets"]  # whole words only (the doubled e collapsed)


def test_name_parts_in_any_order_are_one_name_but_numbers_keep_their_order() -> None:
    assert canon("Smith, John", "John Smith", "SMITH JOHN") == ["john smith"] * 3
    assert canon("1005 S. Fresno St.", "Fresno St, 1005 South") == ["fresno s st 1005"] * 2
    assert canon("10 20", "20 10") == ["10 20", "20 10"]
    assert sorted_words(pa.array(["b a", "", "c 2 a 1"]).slice(1, 2)).to_pylist() == ["", "a c 2 1"]


def test_the_canonical_embedder_gives_variants_one_vector_and_keeps_others_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(embedding, "_CHUNK", 2)
    e = CharNgramEmbedder(dimension=256, grams=(2, 3, 4), normalise=True, canonical=True)
    v = e.embed(["Smith, John", "JOHN SMITH", "4 March 2021", "03/04/2021", "Jane Smith", "2021-04-03"])
    assert np.array_equal(v[0], v[1]) and np.array_equal(v[2], v[3])
    assert v[0] @ v[4] < 0.9 and v[2] @ v[5] < 0.9
