"""Auto-Join's operators: the five physical ones and the logical ones a program is made of.

Physical operators (thesis §4.4.2, a core subset of a string API): `split`, `select_k`, `concat`,
`constant` and `substring` (start and end counted from the front or, negative, from the back, and a
casing). A *logical* operator always returns one string, which is what lets the program search
measure progress (how much of the target it produced):

* `Constant(text)`;
* `Extract` = SelectK(column) → [Split → SelectK]{0,2} → Substring: with no split it is the thesis's
  `Substr`, with one `SplitSubstr`, with two `SplitSplitSubstr`.

A program is a sequence of logical operators whose outputs are concatenated (Concat is implicit).
Each operator runs two ways with the same semantics: on one row in Python (the search tries
thousands of candidates on 3-4 examples) and on whole columns with Arrow compute (applying a
program to a million rows is no Python per row). Semantics follow Python's: `str.split(sep)` keeps
empty parts, negative indexes count from the end, an index out of range gives no value (null).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

CASINGS = ("", "lower", "upper", "title")  # "" keeps the case


# --- physical operators (one value) ---------------------------------------------------------------


def split(value: str, sep: str) -> list[str]:
    """Split(v, sep): the parts between occurrences of `sep` (empty parts kept)."""
    if not sep:
        raise ValueError("split: the separator must not be empty")
    return value.split(sep)


def select_k(items: Sequence[str], k: int) -> str | None:
    """SelectK(array, k): the k-th item, negative k counting from the end; None when out of range."""
    if -len(items) <= k < len(items):
        return items[k]
    return None


def substring(value: str, start: int = 0, end: int | None = None, casing: str = "") -> str:
    """Substring(v, start, end, casing): Python slice semantics (negative = from the back), then a case."""
    return recase(value[start:end], casing)


def recase(value: str, casing: str) -> str:
    if casing == "":
        return value
    if casing == "lower":
        return value.lower()
    if casing == "upper":
        return value.upper()
    if casing == "title":
        return value.title()
    raise ValueError(f"unknown casing {casing!r} (one of {CASINGS})")


def constant(text: str) -> str:
    """Constant(v): the same string for every row."""
    return text


def concat(parts: Sequence[str | None]) -> str | None:
    """Concat(u, v, ...): None when any part is missing (the row gets no join key)."""
    if any(p is None for p in parts):
        return None
    return "".join(p for p in parts if p is not None)


# --- logical operators ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Constant:
    text: str

    def apply(self, row: Sequence[str | None]) -> str | None:
        return constant(self.text)

    def apply_arrow(self, columns: Sequence[pa.Array]) -> pa.Scalar:
        return pa.scalar(self.text, pa.string())

    def render(self, names: Sequence[str]) -> str:
        return _quote(self.text)


@dataclass(frozen=True)
class Extract:
    """Substr / SplitSubstr / SplitSplitSubstr: a column, up to two (separator, k) splits, a slice
    [start:end] (end None: to the end) and a casing."""

    column: int
    splits: tuple[tuple[str, int], ...] = ()
    start: int = 0
    end: int | None = None
    casing: str = ""

    def __post_init__(self) -> None:
        if len(self.splits) > 2:
            raise ValueError("an Extract splits at most twice (SplitSplitSubstr)")
        if self.casing not in CASINGS:
            raise ValueError(f"unknown casing {self.casing!r} (one of {CASINGS})")

    def element(self, row: Sequence[str | None]) -> str | None:
        """The string the slice applies to: the column's value after the splits."""
        value = row[self.column] if self.column < len(row) else None
        for sep, k in self.splits:
            if value is None:
                return None
            value = select_k(split(value, sep), k)
        return value

    def apply(self, row: Sequence[str | None]) -> str | None:
        value = self.element(row)
        return None if value is None else substring(value, self.start, self.end, self.casing)

    def apply_arrow(self, columns: Sequence[pa.Array]) -> pa.Array:
        value = columns[self.column]
        for sep, k in self.splits:
            value = _select_arrow(pc.split_pattern(value, sep), k)
        if self.start != 0 or self.end is not None:
            stop = sys.maxsize if self.end is None else self.end
            value = pc.utf8_slice_codeunits(value, self.start, stop)
        if self.casing == "lower":
            value = pc.utf8_lower(value)
        elif self.casing == "upper":
            value = pc.utf8_upper(value)
        elif self.casing == "title":
            value = pc.utf8_title(value)
        return value

    def render(self, names: Sequence[str]) -> str:
        args = [names[self.column]]
        for sep, k in self.splits:
            args += [_quote(sep), str(k)]
        if self.start != 0 or self.end is not None:
            args += [str(self.start)] + ([] if self.end is None else [str(self.end)])
        name = ("Substr", "SplitSubstr", "SplitSplitSubstr")[len(self.splits)]
        text = args[0] if len(args) == 1 else f"{name}({', '.join(args)})"
        return f"{self.casing.capitalize()}({text})" if self.casing else text

    @property
    def complexity(self) -> tuple[int, int, int, int, int]:
        return extract_complexity(self.splits, self.start, self.end, self.casing)


Operator = Constant | Extract


def extract_complexity(
    splits: tuple[tuple[str, int], ...], start: int, end: int | None, casing: str
) -> tuple[int, int, int, int, int]:
    """Occam's order among Extracts giving the same outputs: fewer slice positions (a split
    follows variable-length fields where fixed positions do not), no casing, fewer splits, then
    longer separators (", " is a more specific delimiter than " "), then parts nearer an end
    (the last of two words is more likely "the last word" than "the second"). A function of the
    parameters, so the program search ranks an Extract before (and mostly without) making it."""
    seps = ends = 0
    for sep, k in splits:  # at most two: a loop, not generators (the search ranks 10⁵ of these)
        seps -= len(sep)
        ends += k if k >= 0 else -k - 1
    return ((start != 0) + (end is not None), int(casing != ""), len(splits), seps, ends)


@dataclass(frozen=True)
class Program:
    """Logical operators concatenated; `columns` names the inputs (the source columns it reads)."""

    operators: tuple[Operator, ...]
    columns: tuple[str, ...]

    def apply(self, row: Sequence[str | None]) -> str | None:
        return concat([op.apply(row) for op in self.operators])

    def apply_arrow(self, columns: Sequence[pa.Array]) -> pa.Array:
        """The program over whole columns (one Arrow array per input, same length); nulls where a
        part is missing."""
        if not columns:
            raise ValueError("a program needs its input columns")
        parts = [op.apply_arrow(columns) for op in self.operators]
        if len(parts) == 1:
            only = parts[0]
            if isinstance(only, pa.Scalar):
                return pa.array([only.as_py()] * len(columns[0]), pa.string())
            return only
        return pc.binary_join_element_wise(*parts, "")

    @property
    def used_columns(self) -> tuple[str, ...]:
        """The inputs some operator reads, in input order (a program may be given more)."""
        used = {op.column for op in self.operators if isinstance(op, Extract)}
        return tuple(name for i, name in enumerate(self.columns) if i in used)

    def __str__(self) -> str:
        rendered = [op.render(self.columns) for op in self.operators]
        return rendered[0] if len(rendered) == 1 else f"Concat({', '.join(rendered)})"

    def __len__(self) -> int:
        return len(self.operators)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _select_arrow(lists: pa.Array, k: int) -> pa.Array:
    """SelectK over a list array: item k of each list (negative from the end), null when out of range."""
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    offsets = lists.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    lengths = np.diff(offsets)
    valid = (lengths > k) if k >= 0 else (lengths >= -k)
    valid &= ~np.asarray(lists.is_null(), dtype=bool)
    index = (offsets[:-1] + k) if k >= 0 else (offsets[1:] + k)
    values = lists.values  # unsliced: the (sliced) list's offsets index into it
    index = np.where(valid, index, 0)
    taken = values.take(pa.array(index, pa.int64())) if len(values) else pa.nulls(len(lists), pa.string())
    return pc.if_else(pa.array(valid), taken, pa.scalar(None, pa.string()))
