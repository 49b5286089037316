"""Read-cost lines of JOSIE's cost model, fitted on the storage the search reads from.

JOSIE (SIGMOD 2019, App. 7.2, Eq. 15) weighs reading a posting list of
length f, L(f) = a + b·f, against reading m tokens of a candidate set, S(m) = a + b·m. The paper's
constants were fitted on PostgreSQL with cold caches; ours must describe *our* read path (packed
BLOBs through SQLAlchemy, warm caches, and the work once a list or set is in memory), so `refit`
times real reads followed by that work: lists in blocks of similar length, one round trip and one
vectorised merge per block as the search reads them (a list costs its share), and sets one at a
time, each intersected with a query. Samples lean towards long lists and big sets, as the released
code's do. Both lines are fitted by least squares on the relative error (`_line`) and stored in
`josie_cost_model`, one row per database kind. `load` falls back to `DEFAULT_COSTS` when nothing
was fitted. Costs are in seconds and clamped at `floor` (fitted intercepts can be negative;
docs/algorithms/josie.md, erratum A6).
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
from sqlalchemy import Connection, Table, insert, select, update

from catalog.search.josie.models import JosieCostModel
from catalog.search.josie.query_plan import count_matches
from catalog.search.josie.reader import IndexReader

log = logging.getLogger(__name__)

_LIST_BLOCK = 32  # sampled lists of similar length read together, as the search reads its lists in blocks

josie_cost_model = cast(Table, JosieCostModel.__table__)


@dataclass(frozen=True)
class CostModel:
    """L(f) = read_list_a + read_list_b·f and S(m) = read_set_a + read_set_b·m, in seconds."""

    read_list_a: float
    read_list_b: float
    read_set_a: float
    read_set_b: float
    floor: float = 1e-6
    fitted: bool = False

    def list_cost(self, frequency: float) -> float:
        return max(self.floor, self.read_list_a + self.read_list_b * frequency)

    def lists_cost(self, n_lists: int, n_entries: float) -> float:
        """The sum of L(f) over `n_lists` lists holding `n_entries` entries in all, in O(1). Equal to the
        per-list sum whenever the intercept is at least the floor (every fit we have seen: a list costs
        microseconds before its first entry); below that it can only err low, by the clamp."""
        return max(n_lists * self.floor, n_lists * self.read_list_a + self.read_list_b * n_entries)

    def set_cost(self, n_tokens: float) -> float:
        return max(self.floor, self.read_set_a + self.read_set_b * max(0.0, n_tokens))


# `fit` on the josie_bench catalog in SQLite (warm cache, 2-core machine), rounded, so that an
# unfitted catalog starts sensibly; only their ratio matters to JOSIE's choices.
DEFAULT_COSTS = CostModel(read_list_a=6e-6, read_list_b=1.4e-8, read_set_a=2.3e-5, read_set_b=3.4e-8)


def load(conn: Connection | None, database: str) -> CostModel:
    """The fitted constants for `database`, or `DEFAULT_COSTS` when none were fitted."""
    if conn is None:
        return DEFAULT_COSTS
    stmt = select(
        josie_cost_model.c.read_list_a,
        josie_cost_model.c.read_list_b,
        josie_cost_model.c.read_set_a,
        josie_cost_model.c.read_set_b,
    ).where(josie_cost_model.c.database == database)
    row = conn.execute(stmt).first()
    if row is None:
        return DEFAULT_COSTS
    return CostModel(float(row[0]), float(row[1]), float(row[2]), float(row[3]), fitted=True)


def fit(reader: IndexReader, *, n_samples: int = 200, repeats: int = 3, seed: int = 0) -> CostModel:
    """Time `repeats` reads (best of) of about 4·n_samples lists (in blocks) and n_samples sets through
    `reader`; fit both lines."""
    rng = random.Random(seed)
    lists = reader.sample_lists(n_samples * _LIST_BLOCK // 8, rng)  # a few lists per fitted point
    sets = reader.sample_sets(n_samples, rng)
    if not lists or not sets:
        return DEFAULT_COSTS
    list_x, list_y = [], []
    lists.sort(key=lambda tf: (tf[1], tf[0]))
    for at in range(0, len(lists), _LIST_BLOCK):
        block = lists[at : at + _LIST_BLOCK]
        ids = sorted(t for t, _ in block)
        list_x.append(sum(f for _, f in block) / len(block))
        list_y.append(_best_of(repeats, lambda ids=ids: _consume_lists(reader, ids)) / len(block))
    set_x, set_y = [], []
    probe = np.arange(0, 1 << 20, 7, dtype=np.int64)  # a stand-in query for the intersection step
    for set_id, size in sets:
        set_x.append(size)
        set_y.append(_best_of(repeats, lambda s=set_id: count_matches(probe, reader.read_set_suffix(s, 0))))
    la, lb = _line(list_x, list_y)
    sa, sb = _line(set_x, set_y)
    model = CostModel(read_list_a=la, read_list_b=lb, read_set_a=sa, read_set_b=sb, fitted=True)
    log.info(
        "josie cost model fitted",
        extra={
            "database": reader.database,
            "n_lists": len(lists),
            "n_sets": len(sets),
            "read_list_a": la,
            "read_list_b": lb,
            "read_set_a": sa,
            "read_set_b": sb,
        },
    )
    return model


def _consume_lists(reader: IndexReader, token_ids: list[int]) -> int:
    """Read a block of lists in one round trip and merge them as the search does (one vectorised
    step per block): a list's cost is its share of the transfer and of that merge."""
    packed = reader.read_lists_packed(token_ids)
    sid = packed.set_ids.astype(np.int64)
    partial = np.zeros(int(sid.max()) + 1 if len(sid) else 1, dtype=np.int64)
    np.add.at(partial, sid, 1)
    np.maximum.at(partial, sid, packed.positions.astype(np.int64))
    return int(partial.sum())


def _best_of(repeats: int, read) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        read()
        best = min(best, time.perf_counter() - t0)
    return best


def _line(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Intercept and slope minimising the *relative* squared error; slope kept >= 0 (a flat line
    when sizes do not vary). Plain least squares lets the few biggest samples (sets of a million
    tokens) fix the line and drives the intercept negative, pricing the many small reads near zero,
    when their fixed cost (a statement and a decode, ~10 µs) is what decides most choices."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if np.ptp(xa) == 0:
        return float(np.median(ya)), 0.0
    slope, intercept = np.polyfit(xa, ya, 1, w=1.0 / np.maximum(ya, 1e-9))
    if slope < 0:
        return float(np.median(ya)), 0.0
    return float(intercept), float(slope)


def store(conn: Connection, database: str, model: CostModel) -> None:
    """Insert or replace the row of `database` (the caller commits)."""
    values = {
        "read_list_a": model.read_list_a,
        "read_list_b": model.read_list_b,
        "read_set_a": model.read_set_a,
        "read_set_b": model.read_set_b,
        "fitted_at": dt.datetime.now(dt.UTC),
    }
    exists = conn.execute(select(josie_cost_model.c.database).where(josie_cost_model.c.database == database)).first()
    if exists:
        conn.execute(update(josie_cost_model).where(josie_cost_model.c.database == database).values(**values))
    else:
        conn.execute(insert(josie_cost_model).values(database=database, **values))


def refit(conn: Connection, reader: IndexReader, **kwargs: int) -> CostModel:
    """Fit the constants on the database `conn` reads and store them there."""
    model = fit(reader, **kwargs)
    store(conn, reader.database, model)
    return model
