"""`autojoin(source, target)`: join two tables whose keys need a transformation, and say which one.

The thesis's pipeline (ch. 4; docs/algorithms/autojoin.md), in both directions (the one that covers
more target rows wins; on a tie, the one covering more without the fuzzy step):

1. sample both tables (`sampling.sample_rates`: enough rows for T joining pairs, with high chance);
2. find joinable row pairs: rare q-grams between each source column and each *key* column of the
   target (only 1:1 and N:1 joins: the target side is a key, every source row joins one row at most);
3. per target key column (a group), take its top-k pairs and learn a program from each of r random
   subsets of b of them (at most L in all; the i-th drawn from the best b + 2i pairs, so the
   strongest are tried first); keep the program covering the most sampled target rows;
4. apply it to the whole source (Arrow compute) and equi-join with the target key;
5. the constrained fuzzy join pairs what is left, if it can without breaking the 1:1 / N:1 shape.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from catalog.core.errors import UserError
from catalog.search.autojoin.candidates import NUMBER
from catalog.search.autojoin.fuzzy import fuzzy_pairs
from catalog.search.autojoin.learn import Example, learn_program
from catalog.search.autojoin.operators import Program
from catalog.search.autojoin.qgrams import ColumnGrams, GramMemo, match_values
from catalog.search.autojoin.sampling import sample_rates
from catalog.search.autojoin.settings import AutojoinSettings

Rows = Sequence[Sequence[str | None]]


@dataclass(frozen=True)
class Table:
    """A table as Arrow string columns (one per header, equal lengths)."""

    headers: tuple[str, ...]
    columns: tuple[pa.Array, ...]

    @classmethod
    def from_rows(cls, headers: Sequence[str], rows: Rows) -> Table:
        """From data rows of raw cells; short rows are padded with nulls, empty cells are nulls."""
        if not headers:
            raise UserError("a table needs at least one column")
        width = len(headers)
        cols = []
        for c in range(width):
            cells = [(r[c] if c < len(r) else None) for r in rows]
            cols.append(pa.array([v if v not in (None, "") else None for v in cells], pa.string()))
        return cls(tuple(headers), tuple(cols))

    def __len__(self) -> int:
        return len(self.columns[0]) if self.columns else 0


@dataclass(frozen=True)
class AutoJoinResult:
    """The joined row pairs (source row, target row; 0-based data rows of the inputs as given),
    the program, the columns it reads and the key columns it produces, and how many target key rows
    it covers. `reversed`: the program reads the TARGET's columns and produces the SOURCE's key (the
    direction the thesis also tries); `source_columns` and `target_columns` still name each input's
    own columns."""

    pairs: list[tuple[int, int]]
    program: Program | None
    source_columns: tuple[str, ...]
    target_columns: tuple[str, ...]
    coverage: int
    fuzzy: bool
    reversed: bool = False
    sampled: tuple[int, int] = (0, 0)  # rows the pairing read from each side

    def as_dict(self) -> dict[str, Any]:
        """The JSON document of `juncture autojoin --json` and POST /v1/autojoin."""
        return {
            "pairs": [{"source_row": s, "target_row": t} for s, t in self.pairs],
            "program": None if self.program is None else str(self.program),
            "source_columns": list(self.source_columns),
            "target_columns": list(self.target_columns),
            "coverage": self.coverage,
            "fuzzy": self.fuzzy,
        }


@dataclass
class _Found:
    program: Program
    inputs: tuple[int, ...]  # source column positions the program reads
    key: int  # target key column position
    pairs: list[tuple[int, int]] = field(default_factory=list)
    coverage: int = 0
    exact: int = 0  # target rows covered by the equi-join alone
    fuzzy: bool = False

    @property
    def rank(self) -> tuple[int, int]:
        """Directions compare by coverage, then by how much of it needs no fuzzy step."""
        return (self.coverage, self.exact)


def autojoin(
    source: Table | tuple[Sequence[str], Rows],
    target: Table | tuple[Sequence[str], Rows],
    settings: AutojoinSettings | None = None,
    *,
    seed: int = 0,
    memo: GramMemo | None = None,
    numeric_keys: bool = True,
) -> AutoJoinResult:
    """Auto-Join of two tables (each a `Table` or (headers, data rows)); both directions tried
    (`memo`: q-grams cut by earlier calls of the same run, else this call's own; `numeric_keys`
    False: a column of numbers alone is never the key a program's output must equal)."""
    cfg = settings or AutojoinSettings()
    s = source if isinstance(source, Table) else Table.from_rows(*source)
    t = target if isinstance(target, Table) else Table.from_rows(*target)
    memo = memo or GramMemo()
    forward = _direction(s, t, cfg, seed, memo, numeric_keys)
    backward = _direction(t, s, cfg, seed, memo, numeric_keys)
    sampled = sample_rates(max(1, len(s)), max(1, len(t)), **_rate_args(cfg)).rows(len(s), len(t))
    best, flipped = forward, False
    if backward is not None and (forward is None or backward.rank > forward.rank):
        best, flipped = backward, True
    if best is None:
        return AutoJoinResult([], None, (), (), 0, False, False, sampled)
    reads = best.program.used_columns
    key = ((t if not flipped else s).headers[best.key],)
    if flipped:
        pairs = sorted((b, a) for a, b in best.pairs)
        return AutoJoinResult(pairs, best.program, key, reads, best.coverage, best.fuzzy, True, sampled)
    return AutoJoinResult(sorted(best.pairs), best.program, reads, key, best.coverage, best.fuzzy, False, sampled)


def _rate_args(cfg: AutojoinSettings) -> dict[str, Any]:
    return {"examples": cfg.sample_examples, "delta": cfg.delta, "participation": cfg.participation}


def _direction(
    s: Table, t: Table, cfg: AutojoinSettings, seed: int, memo: GramMemo, numeric_keys: bool
) -> _Found | None:
    """The best program turning rows of `s` into a key of `t`, applied to the whole tables."""
    if len(s) == 0 or len(t) == 0:
        return None
    rng = random.Random(seed)
    rates = sample_rates(len(s), len(t), **_rate_args(cfg))
    n_s, n_t = rates.rows(len(s), len(t))
    s_rows = _sample(len(s), n_s, rng)
    t_rows = _sample(len(t), n_t, rng)
    s_cols = [s.columns[c].take(s_rows) for c in range(min(len(s.headers), cfg.max_columns))]
    # a key column is unique in the sample (cheap); the winner's is checked on the whole table
    t_sampled = {c: t.columns[c].take(t_rows) for c in range(min(len(t.headers), cfg.max_columns))}
    t_keys = {k: col for k, col in t_sampled.items() if _is_key(col) and (numeric_keys or not numbers_only(col))}
    keys = list(t_keys)
    if not keys:
        return None
    s_index = {c: _distinct(col, cfg, memo) for c, col in enumerate(s_cols)}
    t_index = {k: _distinct(col, cfg, memo) for k, col in t_keys.items()}
    groups = []
    for k in keys:
        t_values, _t_first, t_grams = t_index[k]
        if not len(t_values):
            continue
        per_column = []
        for c, (s_values, s_first, s_grams) in s_index.items():
            if not len(s_values):
                continue
            vp = match_values(s_grams, t_grams, max_nm=cfg.max_nm)
            strong = int((vp.score == 1.0).sum())
            if strong >= 2:
                per_column.append((strong, c, vp, s_first, t_values))
        if per_column:
            per_column.sort(key=lambda x: (-x[0], x[1]))
            groups.append((per_column[0][0], k, per_column[: cfg.max_inputs]))
    groups.sort(key=lambda g: (-g[0], g[1]))
    best: _Found | None = None
    best_rank: tuple[int, int] = (0, 0)
    tried: set[tuple[str, int]] = set()
    budget = cfg.max_example_sets
    for _strength, k, per_column in groups:
        if budget <= 0:
            break
        inputs = tuple(sorted(c for _, c, *_ in per_column))
        pool = _example_pool(per_column, inputs, s_cols, cfg)
        if len(pool) < min(cfg.examples_per_set, 2):
            continue
        names = tuple(s.headers[c] for c in inputs)
        in_cols = [s_cols[c] for c in inputs]
        for i in range(cfg.subsets):
            if budget <= 0:
                break
            budget -= 1
            size = min(len(pool), cfg.examples_per_set + (i % 2))  # b = 3 and 4 in turn
            # the i-th subset draws from the best 3 + 2i pairs: the strongest pairs are tried first
            # (weak ones, one shared q-gram, are often false), the pool widens as subsets fail
            window = pool[: max(size, min(len(pool), cfg.examples_per_set + 2 * i))]
            chosen = rng.sample(window, size)
            program = learn_program(
                chosen,
                names,
                max_operators=cfg.max_operators,
                breadth=cfg.breadth,
                max_steps=cfg.max_steps,
                reach=cfg.max_chars,
            )
            if program is None or (str(program), k) in tried:
                continue
            tried.add((str(program), k))
            covered = _coverage(program.apply_arrow(in_cols), t_keys[k])
            rank = (covered, -len(program))
            # a program must join more than the pairs it was learned from: one that only
            # reproduces its own (coincidental) examples is the spurious join the thesis warns of
            if covered > len(chosen) and (best is None or rank > best_rank):
                best, best_rank = _Found(program, inputs, k), rank
                if covered >= min(len(s_rows), len(t_keys[k]) - t_keys[k].null_count):
                    budget = 0  # every sampled source row (or key) joins: no program can cover more
    if best is None or not _is_key(t.columns[best.key]):
        return None
    _join_all(best, s, t, cfg)
    # coincidences (digits of one column landing on dates of another) cover a sliver of the tables
    enough = max(cfg.min_coverage, cfg.min_coverage_share * min(len(s), len(t)))
    return best if best.exact >= enough else None


def numbers_only(column: pa.Array) -> bool:
    """Whether every value of `column` is a number as written (nulls aside)."""
    values = pc.utf8_trim_whitespace(column.drop_null())
    return bool(pc.all(pc.match_substring_regex(values, NUMBER)).as_py() is not False)


def _is_key(column: pa.Array) -> bool:
    """A target key column: some values, all distinct (nulls aside)."""
    valid = len(column) - column.null_count
    return valid > 0 and pc.count_distinct(column, mode="only_valid").as_py() == valid


def _sample(n: int, k: int, rng: random.Random) -> pa.Array:
    if k >= n:
        return pa.array(np.arange(n, dtype=np.int64))
    return pa.array(np.sort(np.asarray(rng.sample(range(n), k), dtype=np.int64)))


def _distinct(column: pa.Array, cfg: AutojoinSettings, memo: GramMemo) -> tuple[pa.Array, np.ndarray, ColumnGrams]:
    """A sampled column's distinct values, the first sampled row holding each, and their q-grams."""
    values = pc.unique(column.drop_null())
    first = pc.index_in(values, value_set=column).to_numpy(zero_copy_only=False)
    grams = memo.column_grams(values.to_pylist(), q_min=cfg.q_min, q_max=cfg.q_max, max_chars=cfg.max_chars)
    return values, first, grams


def _example_pool(
    per_column: list[Any], inputs: tuple[int, ...], s_cols: list[pa.Array], cfg: AutojoinSettings
) -> list[Example]:
    """The group's top-k example pairs: best score, then most shared rare q-grams; one per source
    row; none whose target passes `max_chars` (the pairing saw only that much of it: a text that
    long is no key a program reproduces) or whose input passes `max_example_chars` (learning from
    a real lake's long descriptions took a minute a pair)."""
    scored = []
    for _strength, _c, vp, s_first, t_values in per_column:
        for j in np.lexsort((-vp.shared, -vp.score))[: cfg.top_k * 2]:
            scored.append(
                (-float(vp.score[j]), -int(vp.shared[j]), int(s_first[vp.source[j]]), int(vp.target[j]), t_values)
            )
    scored.sort(key=lambda x: (x[0], x[1], x[2]))
    pool: list[Example] = []
    seen: set[int] = set()
    for _score, _shared, row, target, t_values in scored:
        key = t_values[target].as_py()
        if row in seen or len(key) > cfg.max_chars:
            continue
        seen.add(row)
        values = tuple(s_cols[c][row].as_py() for c in inputs)
        if any(v is not None and len(v) > cfg.max_example_chars for v in values):
            continue
        pool.append(Example(values, key))
        if len(pool) >= cfg.top_k:
            break
    return pool


def _coverage(derived: pa.Array, keys: pa.Array) -> int:
    """Distinct target keys some derived value equals."""
    hit = pc.is_in(keys, value_set=derived.drop_null() if len(derived) else derived)
    return int(pc.sum(hit).as_py() or 0)


def _join_all(found: _Found, s: Table, t: Table, cfg: AutojoinSettings) -> None:
    """Apply the program to the whole source, equi-join with the whole target key, then fuzzy-join
    the rest (`fuzzy.fuzzy_pairs`)."""
    derived = found.program.apply_arrow([s.columns[c] for c in found.inputs])
    key = t.columns[found.key]
    index = pc.index_in(derived, value_set=key)  # the key is unique: its position is the target row
    matched = np.asarray(index.is_valid(), dtype=bool)
    target_row = index.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    rows = np.nonzero(matched)[0]
    found.pairs = list(zip(rows.tolist(), target_row[rows].tolist(), strict=True))
    hit = np.zeros(len(key), bool)
    hit[target_row[rows]] = True
    found.exact = int(hit.sum())
    if cfg.fuzzy:
        extra = _fuzzy(derived, matched, key, hit, cfg)
        if extra:
            found.pairs += extra
            found.fuzzy = True
            for _, j in extra:
                hit[j] = True
    found.coverage = int(hit.sum())


def _fuzzy(
    derived: pa.Array, matched: np.ndarray, key: pa.Array, hit: np.ndarray, cfg: AutojoinSettings
) -> list[tuple[int, int]]:
    """Pairs of the constrained fuzzy join between unmatched derived values and unhit target keys."""
    valid = ~np.asarray(derived.is_null(), dtype=bool)
    open_rows = np.nonzero(valid & ~matched)[0]
    key_valid = ~np.asarray(key.is_null(), dtype=bool)
    open_keys = np.nonzero(~hit & key_valid)[0]
    if not len(open_rows) or not len(open_keys):
        return []
    values = derived.take(pa.array(open_rows)).to_pylist()
    distinct = sorted(set(values))
    if len(distinct) > cfg.fuzzy_max_values or len(open_keys) > cfg.fuzzy_max_values:
        return []
    key_values = key.take(pa.array(open_keys)).to_pylist()
    found = fuzzy_pairs(distinct, key_values, max_distance=cfg.fuzzy_max_distance)
    to_key = {distinct[a]: int(open_keys[b]) for a, b in found}
    return [(int(r), to_key[v]) for r, v in zip(open_rows.tolist(), values, strict=True) if v in to_key]
