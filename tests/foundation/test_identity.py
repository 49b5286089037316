from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from catalog.core.identity import (
    column_headers,
    column_id,
    file_table_id,
    normalize_token,
    split_column_id,
    table_bucket,
    token_set,
    valid_table_id,
)


@pytest.mark.parametrize(
    ("raw", "token"),
    [
        ("  New   York ", "new york"),
        ("STRASSE", "strasse"),
        ("Straße", "strasse"),  # casefold, not lower
        ("ｆｕｌｌｗｉｄｔｈ", "fullwidth"),  # NFKC
        ("a\u00a0b", "a b"),  # NFKC turns NBSP into a space, then collapsed
        ("12.0", "12"),
        ("12.00", "12"),
        ("-0.0", "0"),
        ("-7.000", "-7"),
        ("+3.0", "3"),
        ("007.0", "7"),
        ("12.50", "12.50"),
        ("1e3", "1e3"),
        ("12.", "12."),
        ("N/A", None),
        (" null ", None),
        ("NaN", None),
        ("-", None),
        ("", None),
        ("   ", None),
        (None, None),
        ("na", None),
        ("nan2", "nan2"),
    ],
)
def test_normalize_token(raw: str | None, token: str | None) -> None:
    assert normalize_token(raw) == token


@given(st.text())
def test_normalization_is_idempotent(value: str) -> None:
    token = normalize_token(value)
    if token is not None:
        assert normalize_token(token) == token


def test_token_set_is_distinct_and_drops_nulls() -> None:
    assert token_set(["A", "a ", None, "n/a", "b", "B"]) == {"a", "b"}


def test_headers_trimmed_blank_named_and_repeats_numbered() -> None:
    assert column_headers([" id ", "", "name", "name", None, "name", "x"]) == [
        "id",
        "column_2",
        "name",
        "name~2",
        "column_5",
        "name~3",
        "x",
    ]


def test_repeat_suffix_skips_a_real_header_spelled_like_it() -> None:
    assert column_headers(["a", "a~2", "a"]) == ["a", "a~2", "a~3"]


def test_column_ids_round_trip() -> None:
    cid = column_id("socrata:data.ny.gov:abcd-1234", "a#b")
    assert split_column_id(cid) == ("socrata:data.ny.gov:abcd-1234", "a#b")
    with pytest.raises(ValueError):
        split_column_id("no-hash")


def test_file_table_ids_are_relative_posix_paths() -> None:
    # one-to-one: a backslash is a character of a POSIX file name, not a separator
    assert file_table_id("sub\\dir/t.csv") == "file:sub%5Cdir/t.csv" != file_table_id("sub/dir/t.csv")
    assert file_table_id("a#1 %2.csv") == "file:a%231 %252.csv"
    for bad in ("/etc/passwd", "../x.csv", "a/../../x"):
        with pytest.raises(ValueError):
            file_table_id(bad)


def test_valid_table_id() -> None:
    assert valid_table_id("ckan:host:pkg/res")
    assert not valid_table_id("ftp:host:x")
    assert not valid_table_id("file:a#b")
    assert not valid_table_id("socrata:")


def test_table_bucket_is_stable_and_in_range() -> None:
    buckets = {table_bucket(f"file:t{i}.csv", 16) for i in range(200)}
    assert buckets <= set(range(16)) and len(buckets) > 8
    assert table_bucket("file:a.csv", 16) == table_bucket("file:a.csv", 16)
