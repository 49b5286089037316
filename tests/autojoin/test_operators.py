"""Each physical and logical operator, one row in Python and whole columns in Arrow, agreeing."""

from __future__ import annotations

import pyarrow as pa
import pytest

from catalog.search.autojoin.operators import (
    Constant,
    Extract,
    Program,
    concat,
    constant,
    select_k,
    split,
    substring,
)

ROWS = [("Schwarzenegger, Arnold", "x-1"), ("Obama, Barack", "yy-22-3"), ("Cher", None), ("", "z")]


def test_split_keeps_empty_parts_and_refuses_an_empty_separator() -> None:
    assert split("a,,b", ",") == ["a", "", "b"]
    assert split("abc", ",") == ["abc"]
    with pytest.raises(ValueError, match="separator"):
        split("abc", "")


def test_select_k_counts_from_both_ends_and_gives_none_out_of_range() -> None:
    items = ["a", "b", "c"]
    assert [select_k(items, k) for k in (0, 2, -1, -3)] == ["a", "c", "c", "a"]
    assert select_k(items, 3) is None and select_k(items, -4) is None


def test_substring_slices_from_front_or_back_and_recases() -> None:
    assert substring("Arnold", 0, 1) == "A"
    assert substring("Arnold", -3) == "old"
    assert substring("Arnold", 1, -1, "upper") == "RNOL"
    assert substring("mcDONALD", 0, None, "title") == "Mcdonald"
    with pytest.raises(ValueError, match="casing"):
        substring("a", casing="swap")


def test_concat_and_constant() -> None:
    assert concat(["a", constant(" "), "b"]) == "a b"
    assert concat(["a", None]) is None


@pytest.mark.parametrize(
    ("op", "expected", "printed"),
    [
        (Extract(0, ((", ", 1),)), ["Arnold", "Barack", None, None], 'SplitSubstr(name, ", ", 1)'),
        (Extract(0, ((",", 0),), 0, 1, "lower"), ["s", "o", "c", None], 'Lower(SplitSubstr(name, ",", 0, 0, 1))'),
        (Extract(1, (("-", -1),)), ["1", "3", None, "z"], 'SplitSubstr(code, "-", -1)'),
        (Extract(1, (("-", 1), ("2", 0))), ["1", "", None, None], 'SplitSplitSubstr(code, "-", 1, "2", 0)'),
        (Extract(0, (), -3), ["old", "ack", "her", None], "Substr(name, -3)"),
        (Extract(0), ["Schwarzenegger, Arnold", "Obama, Barack", "Cher", None], "name"),
        (Constant('a"b'), ['a"b'] * 4, '"a\\"b"'),
    ],
)
def test_logical_operator_python_and_arrow_agree(op, expected, printed) -> None:
    rows = [tuple(v or None for v in r) for r in ROWS]
    assert [op.apply(r) for r in rows] == expected
    columns = [pa.array([r[c] for r in rows], pa.string()) for c in range(2)]
    program = Program((op,), ("name", "code"))
    assert program.apply_arrow(columns).to_pylist() == expected
    assert op.render(("name", "code")) == printed


def test_program_concatenates_and_prints_readably() -> None:
    program = Program(
        (Extract(0, ((", ", -1),)), Constant(" "), Extract(0, ((", ", 0),))),
        ("name",),
    )
    assert str(program) == 'Concat(SplitSubstr(name, ", ", -1), " ", SplitSubstr(name, ", ", 0))'
    assert program.apply(("Obama, Barack",)) == "Barack Obama"
    assert program.apply((None,)) is None  # no value: no join key
    column = pa.array(["Obama, Barack", "Cher", None])
    assert program.apply_arrow([column]).to_pylist() == ["Barack Obama", "Cher Cher", None]  # as in Python


def test_arrow_select_on_a_sliced_column() -> None:
    column = pa.array(["a-b", "c-d-e", "f"]).slice(1)
    assert Program((Extract(0, (("-", -1),)),), ("c",)).apply_arrow([column]).to_pylist() == ["e", "f"]


def test_extract_refuses_three_splits() -> None:
    with pytest.raises(ValueError, match="twice"):
        Extract(0, (("a", 0), ("b", 0), ("c", 0)))


def test_used_columns_are_the_ones_an_operator_reads() -> None:
    program = Program((Extract(2), Constant("-"), Extract(0, (), 0, 1)), ("a", "b", "c"))
    assert program.used_columns == ("a", "c")
    assert Program((Constant("x"),), ("a",)).used_columns == ()
