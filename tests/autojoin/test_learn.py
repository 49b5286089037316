"""The minimum-program search: the thesis's examples, backtracking past a false pair, and a
property test (a program learned from pairs a random program made reproduces it on held-out rows)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.search.autojoin.learn import Example, LearnError, best_program, learn_program
from catalog.search.autojoin.operators import Constant, Extract, Program


def _ex(rows: list[tuple[str, ...]], targets: list[str]) -> list[Example]:
    return [Example(r, t) for r, t in zip(rows, targets, strict=True)]


def test_name_reordering_is_three_operators() -> None:
    """The thesis's running example: last, first -> first last."""
    examples = _ex(
        [("Schwarzenegger, Arnold",), ("Obama, Barack",), ("Bush, George W.",)],
        ["Arnold Schwarzenegger", "Barack Obama", "George W. Bush"],
    )
    program = learn_program(examples, ["name"])
    assert program is not None and len(program) == 3
    assert str(program) == 'Concat(SplitSubstr(name, ", ", -1), " ", SplitSubstr(name, ", ", 0))'
    assert program.apply(("Clinton, William",)) == "William Clinton"


def test_usernames_from_two_columns() -> None:
    examples = _ex([("John", "Smith"), ("Mary", "Jones"), ("Peter", "Parker")], ["jsmith", "mjones", "pparker"])
    program = learn_program(examples, ["first", "last"])
    assert str(program) == "Concat(Lower(Substr(first, 0, 1)), Lower(last))"
    assert program is not None and program.apply(("Ada", "Lovelace")) == "alovelace"


def test_obama_email_shape_needs_four_operators() -> None:
    """The thesis's Obama example (a split of a split, a split, a constant) in our data's shape."""
    examples = _ex(
        [("Barack Hussein Obama",), ("George Walker Bush",), ("William Jefferson Clinton",)],
        ["obama.b@ex.com", "bush.g@ex.com", "clinton.w@ex.com"],
    )
    program = learn_program(examples, ["name"])
    assert program is not None and len(program) == 4
    assert program.apply(("Ada King Lovelace",)) == "lovelace.a@ex.com"


def test_dates_and_codes() -> None:
    dates = _ex([("2019-05-03",), ("2020-12-31",), ("1999-01-07",)], ["05/03/2019", "12/31/2020", "01/07/1999"])
    program = learn_program(dates, ["d"])
    assert program is not None and program.apply(("2001-02-28",)) == "02/28/2001"
    codes = _ex(
        [("order ABC-1 shipped",), ("order XYZ-98 pending",), ("order Q-5555 lost",)], ["ABC-1", "XYZ-98", "Q-5555"]
    )
    program = learn_program(codes, ["d"])
    assert str(program) == 'SplitSubstr(d, " ", 1)'


def test_minimum_program_is_a_single_operator_when_one_suffices() -> None:
    examples = _ex([("N10156",), ("N102UW",), ("N103US",)], ["10156", "102UW", "103US"])
    program = learn_program(examples, ["tailnum"])
    assert program == Program((Extract(0, (), 1),), ("tailnum",))


def test_backtracking_past_the_greedy_choice() -> None:
    """The longest match first ("ab" + "ab" as one Constant would not place); the search backs off to
    the next-best operator and still finds a program."""
    examples = _ex([("xx", "ab"), ("yy", "ab"), ("zz", "ab")], ["xx-ab", "yy-ab", "zz-ab"])
    program = learn_program(examples, ["a", "b"], breadth=3)
    assert program is not None and all(program.apply(e.row) == e.target for e in examples)


def test_a_false_example_pair_fails_and_subsets_recover() -> None:
    good = _ex(
        [("Smith, John",), ("Jones, Mary",), ("Parker, Peter",), ("Wayne, Bruce",), ("Kent, Clark",)],
        ["John Smith", "Mary Jones", "Peter Parker", "Bruce Wayne", "Clark Kent"],
    )
    false = Example(("Lane, Lois",), "Diana Prince")
    assert learn_program([*good[:2], false], ["name"], max_operators=4) is None
    program = best_program([*good, false], ["name"], subsets=12)
    assert program is not None and program.apply(("Allen, Barry",)) == "Barry Allen"


def test_refuses_no_examples_or_an_empty_target() -> None:
    with pytest.raises(LearnError):
        learn_program([], ["a"])
    with pytest.raises(LearnError):
        learn_program([Example(("a",), "")], ["a"])


# --- property test ---------------------------------------------------------------------------------

_WORD = st.text("abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=8)


@st.composite
def _rows(draw: st.DrawFn) -> list[tuple[str, str]]:
    rows = []
    for _ in range(30):
        words = draw(st.lists(_WORD, min_size=2, max_size=4))
        code = draw(
            st.lists(st.text("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789", min_size=2, max_size=5), min_size=2, max_size=3)
        )
        rows.append((" ".join(words), "-".join(code)))
    return rows


_OPERATOR = st.one_of(
    st.builds(Constant, st.sampled_from(["@", "#", "::", "@mail.org", "/"])),
    st.builds(
        Extract,
        st.just(0),
        st.sampled_from([((" ", 0),), ((" ", -1),), ((" ", 1),)]),
        st.just(0),
        st.sampled_from([None, 1, 2]),
        st.sampled_from(["", "upper", "title"]),
    ),
    st.builds(Extract, st.just(1), st.sampled_from([(("-", 0),), (("-", -1),), ()]), st.just(0), st.just(None)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=_rows(), operators=st.lists(_OPERATOR, min_size=1, max_size=3))
def test_learned_program_reproduces_a_random_program_on_held_out_rows(rows, operators) -> None:
    hidden = Program(tuple(operators), ("words", "code"))
    made = [(r, hidden.apply(r)) for r in rows]
    made = [(r, t) for r, t in made if t]
    if len(made) < 12 or len({t for _, t in made}) < len(made) // 2:
        return  # too few rows (or the program hardly depends on them): nothing to learn from
    train, held_out = made[:10], made[10:]
    program = best_program([Example(r, t) for r, t in train], ["words", "code"], subsets=8)
    assert program is not None, f"nothing learned for {hidden}"
    for row, target in held_out:
        assert program.apply(row) == target, f"learned {program} for {hidden}"
