"""The minimum-program search (thesis Algorithm 4): from 3-4 example pairs (a source row, the target
key it should become), a program of the fewest logical operators consistent with every example.

Greedy and recursive: among every logical operator (and its parameters) whose output, on every
example, occurs in what is left of that example's target, take the one producing the most target
characters summed over the examples; place it at its output's leftmost occurrence; solve the left
and right remainders the same way; when a remainder cannot be solved, backtrack to the next-best
operator (`breadth` of them per step). Operators producing the same outputs on every example are
kept once, the simplest (`Extract.complexity`): Occam's razor among programs the examples cannot
tell apart. The total length is capped at `max_operators` (τ; the thesis: 10 sufficed on every real
case) and the work at `max_steps` solved remainders, so a hopeless example set fails fast.

The search runs a few hundred times per learned pair (12 subsets per key column, both directions),
so its inner loop is kept to what can succeed: a path some example lacks is never expanded, an
operator is made only once its outputs pass and it ranks among the `breadth` kept, and constants
are grown, not shrunk, from each start.
"""

from __future__ import annotations

import functools
import heapq
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

from catalog.search.autojoin.operators import (
    CASINGS,
    Constant,
    Extract,
    Operator,
    Program,
    extract_complexity,
    recase,
)

Row = tuple[str | None, ...]
Path = tuple[int, tuple[tuple[str, int], ...]]  # (column, splits): where an Extract takes its element
_Rank = tuple[int, int, tuple[int, ...]]  # (-characters produced, kind, complexity): smaller is better
_SEPARATORS = re.compile(r"[^0-9A-Za-z\u00C0-\uFFFF]+")


@dataclass(frozen=True)
class Example:
    row: Row  # the source row's input values
    target: str  # the target key it joins


class LearnError(ValueError):
    """The examples cannot define a program (none given, or an empty target)."""


def learn_program(
    examples: Sequence[Example],
    columns: Sequence[str],
    *,
    max_operators: int = 10,
    breadth: int = 3,
    max_steps: int = 400,
    reach: int = 128,
) -> Program | None:
    """The (greedy) minimum program turning every example's row into its target, or None
    (`reach`: an Extract starts at most this many characters from an end of what it slices)."""
    if not examples:
        raise LearnError("no example pairs to learn from")
    if any(not e.target for e in examples):
        raise LearnError("an example's target is empty")
    search = _Search(list(examples), len(columns), max_operators, breadth, max_steps, reach)
    spans = tuple((0, len(e.target)) for e in examples)
    found = search.solve(spans, max_operators)
    return None if found is None else Program(tuple(found), tuple(columns))


@dataclass
class _Search:
    examples: list[Example]
    n_columns: int
    max_operators: int
    breadth: int
    max_steps: int
    reach: int
    steps: int = 0
    memo: dict[tuple[tuple[tuple[int, int], ...], int], list[Operator] | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.elements = [_elements(tuple(e.row), self.n_columns) for e in self.examples]

    def solve(self, spans: tuple[tuple[int, int], ...], budget: int) -> list[Operator] | None:
        """The operators producing target[a:b] of every example (spans), at most `budget` of them."""
        if all(a == b for a, b in spans):
            return []
        if budget <= 0 or any(a == b for a, b in spans):
            return None  # an operator never outputs an empty string: some example would get one
        key = (spans, budget)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = None  # until solved (also stops a cycle)
        self.steps += 1
        if self.steps > self.max_steps:
            return None
        segments = [e.target[a:b] for e, (a, b) in zip(self.examples, spans, strict=True)]
        for op, outputs in self._candidates(segments):
            left, right = [], []
            for (a, _b), seg, out in zip(spans, segments, outputs, strict=True):
                at = a + seg.index(out)
                left.append((a, at))
                right.append((at + len(out), _b))
            lhs = self.solve(tuple(left), budget - 1)
            if lhs is None:
                continue
            rhs = self.solve(tuple(right), budget - 1 - len(lhs))
            if rhs is None:
                continue
            self.memo[key] = [*lhs, op, *rhs]
            return self.memo[key]
        return None

    def _candidates(self, segments: list[str]) -> list[tuple[Operator, tuple[str, ...]]]:
        """The `breadth` best operators whose output occurs in every segment: most characters
        produced, then extracts before constants (but a constant before an extract giving the same
        string on every example), then the simplest; one per distinct output tuple."""
        best: dict[tuple[str, ...], tuple[_Rank, _Spec]] = {}

        def offer(outputs: tuple[str, ...], kind: int, spec: _Spec) -> None:
            chars = -sum(map(len, outputs))
            held = best.get(outputs)
            if held is not None and held[0][:2] < (chars, kind):
                return  # ranked without the complexity: most offers lose here
            rank = (chars, kind, _complexity(spec))
            if held is None or rank < held[0]:
                best[outputs] = (rank, spec)

        first = segments[0]
        rest = segments[1:]
        trigrams = {first[i : i + 3] for i in range(len(first) - 2)}
        found: dict[str, list[tuple[int, int]]] = {}
        others = self.elements[1:]
        several = len(segments) > 1
        for path, element in self.elements[0].items():
            found_there = [elements.get(path) for elements in others]
            if None in found_there:
                continue  # an Extract of this path gives nothing on some example
            theirs = cast(list[str], found_there)
            for casing in CASINGS:
                cased = recase(element, casing)
                if casing and cased == element:
                    continue
                # an element sharing no 3-gram with the segment can only give it 1-2 characters:
                # its short prefixes (initials) are all worth trying, not every slice of it
                spans = found.get(cased)
                if spans is None:  # one part is reached by several paths (k and k - n at least)
                    shares = any(cased[i : i + 3] in trigrams for i in range(len(cased) - 2))
                    whole = shares or len(cased) <= 3
                    spans = _spans(cased, first, self.reach) if whole else _short_prefixes(cased, first)
                    found[cased] = spans
                if not spans:
                    continue
                # casing a slice = slicing the cased string (no casing, or ASCII lower/upper): the
                # others' values are then cased once, and the first example's output is the span
                sliced = not casing or (casing != "title" and element.isascii() and all(map(str.isascii, theirs)))
                their_cased = [recase(v, casing) for v in theirs] if sliced else []
                for start, end in spans:
                    for begin, stop in _bounds(start, end, len(element)):
                        if sliced:
                            outputs = _sliced(cased[start:end], their_cased, begin, stop, rest)
                        else:
                            outputs = self._outputs(path, begin, stop, casing, segments)
                        if outputs is not None:  # the operator is made only if it ranks: most do not
                            # an extract giving one string on every example is a Constant in disguise
                            kind = 2 if several and len(set(outputs)) == 1 else 0
                            offer(outputs, kind, (path, begin, stop, casing))
        for text in _common_substrings(segments):
            offer(tuple(text for _ in segments), 1, text)
        ranked = heapq.nsmallest(self.breadth, best.items(), key=lambda item: item[1][0])
        return [(_operator(spec), outputs) for outputs, (_rank, spec) in ranked]

    def _outputs(
        self, path: Path, start: int, end: int | None, casing: str, segments: list[str]
    ) -> tuple[str, ...] | None:
        """What `Extract(*path, start, end, casing)` gives on each example (every one holds `path`),
        or None when some output is empty or not in its segment."""
        outputs = []
        for elements, seg in zip(self.elements, segments, strict=True):
            out = recase(elements[path][start:end], casing)  # `_candidates` skips paths some example lacks
            if not out or out not in seg:
                return None
            outputs.append(out)
        return tuple(outputs)


_Spec = tuple[Path, int, int | None, str] | str  # an Extract's (path, start, end, casing), or a Constant's text


def _complexity(spec: _Spec) -> tuple[int, int, int, int, int]:
    if isinstance(spec, str):
        return (0, 0, 0, 0, 0)
    (_column, splits), start, end, casing = spec
    return extract_complexity(splits, start, end, casing)


def _operator(spec: _Spec) -> Operator:
    if isinstance(spec, str):
        return Constant(spec)
    (column, splits), start, end, casing = spec
    return Extract(column, splits, start, end, casing)


def _sliced(own: str, theirs: list[str], start: int, end: int | None, segments: list[str]) -> tuple[str, ...] | None:
    """`_Search._outputs` where each value is already cased (`own`: the first example's output)."""
    outputs = [own]
    for value, seg in zip(theirs, segments, strict=True):
        out = value[start:end]
        if not out or out not in seg:
            return None
        outputs.append(out)
    return tuple(outputs)


@functools.lru_cache(maxsize=512)
def _elements(row: Row, n_columns: int) -> dict[Path, str]:
    """Every string an Extract can slice in this row: each column's value, each part of it split
    once by a separator it holds (k counted from the front and from the back), and each part of
    those split again by another separator. Cached (callers only read it): a group's subsets
    draw their examples from the same few dozen pairs."""
    out: dict[Path, str] = {}
    for column in range(n_columns):
        value = row[column] if column < len(row) else None
        if value is None:
            continue
        out[(column, ())] = value
        for sep, k, part in _parts(value):
            out[(column, ((sep, k),))] = part
            for sep2, k2, part2 in _parts(part):
                if sep2 != sep:
                    out[(column, ((sep, k), (sep2, k2)))] = part2
    return out


def _parts(value: str) -> list[tuple[str, int, str]]:
    """(separator, k, part) for every separator in `value`: each run of non-alphanumeric characters
    and each single character of such a run."""
    seps: set[str] = set()
    for run in _SEPARATORS.findall(value):
        seps.add(run)
        seps.update(run)
    out = []
    for sep in sorted(seps):
        parts = value.split(sep)
        n = len(parts)
        for k, part in enumerate(parts):
            if part:
                out.append((sep, k, part))
                out.append((sep, k - n, part))
    return out


def _match_ends(text: str, occurs: Callable[[str], bool]) -> list[int]:
    """For each start i of `text`, the end of the longest text[i:end] that `occurs` (i when none:
    a matching statistic). A match from i less its first character is a match from i + 1, so each
    start's search begins where the previous one ended: linear in the text's length, where growing
    every start from scratch was cubic (long texts made that the search's cost)."""
    ends = []
    end = 0
    for i in range(len(text)):
        end = max(end, i)
        while end < len(text) and occurs(text[i : end + 1]):
            end += 1
        ends.append(end)
    return ends


def _spans(element: str, segment: str, reach: int | None = None) -> list[tuple[int, int]]:
    """The slices of `element` worth trying against `segment`: from each start within `reach` of
    an end (None: any), the longest match occurring in the segment, and every prefix of the
    element that occurs (an initial, a fixed-length code)."""
    out = []
    far = len(element) if reach is None else reach
    for i, end in enumerate(_match_ends(element, segment.__contains__)):
        if end > i and (i < far or i >= len(element) - far):
            out.append((i, end))
            if i == 0:
                out.extend((0, j) for j in range(1, end))
    return out


def _short_prefixes(element: str, segment: str) -> list[tuple[int, int]]:
    return [(0, j) for j in (1, 2) if j <= len(element) and element[:j] in segment]


def _bounds(start: int, end: int, length: int) -> list[tuple[int, int | None]]:
    """The (start, end) of the Extracts taking element[start:end]: each end counted from the front
    or the back."""
    starts = [start] if start == 0 else [start, start - length]
    ends: list[int | None] = [None] if end == length else [end, end - length]
    return [(s, e) for s in starts for e in ends]


def _common_substrings(segments: list[str]) -> list[str]:
    """Strings occurring in every segment that no longer such string contains (the Constants):
    from each start of the first segment the longest one; a start whose string ends where the
    previous start's did holds a part of it and is not kept."""
    first = segments[0]
    rest = segments[1:]
    ends = _match_ends(first, lambda text: all(text in seg for seg in rest))
    found = {first[i:end] for i, end in enumerate(ends) if end > i and (i == 0 or end > ends[i - 1])}
    return [t for t in found if not any(t != u and t in u for u in found)]


def best_program(
    examples: Sequence[Example],
    columns: Sequence[str],
    *,
    subsets: int = 12,
    size: int = 3,
    seed: int = 0,
    **search: int,
) -> Program | None:
    """Algorithm 5 on example pairs alone: programs learned from random subsets of `size` pairs,
    the one reproducing the most of all `examples` kept (then the shortest). A false pair spoils
    only the subsets holding it."""
    import random  # deferred: only this entry point draws subsets

    rng = random.Random(seed)
    best: Program | None = None
    best_rank = (0, 0)
    seen: set[str] = set()
    for _ in range(subsets):
        chosen = rng.sample(list(examples), min(size, len(examples)))
        program = learn_program(chosen, columns, **search)
        if program is None or str(program) in seen:
            continue
        seen.add(str(program))
        rank = (sum(program.apply(e.row) == e.target for e in examples), -len(program))
        if rank > best_rank:
            best, best_rank = program, rank
    return best
