"""The minimum-program search: the thesis's examples, backtracking past a false pair, and a
property test (a program learned from pairs a random program made reproduces it on held-out rows)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.search.autojoin.learn import (
    Example,
    LearnError,
    _common_substrings,
    _spans,
    best_program,
    learn_program,
)
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


_TEXT = st.text(alphabet="ab -c", max_size=40)


@given(st.lists(_TEXT, min_size=1, max_size=4))
@settings(max_examples=300, deadline=None)
def test_constants_are_the_maximal_common_substrings(segments: list[str]) -> None:
    """The Constants offered are exactly the strings in every segment that no longer such string
    contains, by their definition over every substring of the first segment."""
    first = segments[0]
    common = {first[i:j] for i in range(len(first)) for j in range(i + 1, len(first) + 1)}
    common = {t for t in common if all(t in seg for seg in segments[1:])}
    maximal = {t for t in common if not any(t != u and t in u for u in common)}
    assert sorted(_common_substrings(segments)) == sorted(maximal)


@given(_TEXT, _TEXT)
@settings(max_examples=300, deadline=None)
def test_spans_are_each_starts_longest_match_and_the_matching_prefixes(element: str, segment: str) -> None:
    expected: list[tuple[int, int]] = []
    for i in range(len(element)):
        ends = [j for j in range(i + 1, len(element) + 1) if element[i:j] in segment]
        if ends:
            expected.append((i, max(ends)))
            if i == 0:
                expected += [(0, j) for j in ends if j != max(ends)]
    assert _spans(element, segment) == expected


def test_long_texts_are_scanned_in_linear_steps() -> None:
    """Two descriptions of 22,000 characters differing in one word: growing every start from
    scratch made about 10^8 substring tests of them (a real lake's descriptions stalled a
    publish for minutes); the scan makes a few per character."""
    text = "".join(f"item {i} of the list, " for i in range(1000))
    cut = text.index("item 500 ")
    other = text[:cut] + "ITEM" + text[cut + 4 :]
    assert sorted(_common_substrings([text, other]), key=len)[-2:] == [text[:cut], text[cut + 4 :]]
    assert _spans(text, other)[0] == (0, cut)


def test_an_extract_starts_within_reach_of_an_end() -> None:
    """A code 150 characters from both ends of a value with no separator: out of the default reach
    (128, `max_chars`), within a reach of 200."""
    codes = ["QWE", "RTY", "UIO", "PAS"]
    examples = _ex([("x" * 150 + c + "y" * 150,) for c in codes], codes)
    assert learn_program(examples, ["v"]) is None
    program = learn_program(examples, ["v"], reach=200)
    assert program is not None and program.apply(("x" * 150 + "ZZZ" + "y" * 150,)) == "ZZZ"
