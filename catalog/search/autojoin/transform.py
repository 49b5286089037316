"""`juncture search transform --csv FILE`: lake tables a query table joins with after a
transformation, ranked by coverage, each with its program.

Candidates come from q-gram overlap, not exact overlap (these pairs have little of it): the lake's
silver `column_tokens` (each column's distinct normalized tokens), at most `tokens_per_column` of
each column, are cut into q-grams (q = 4..6); a query column's distinct values (at most
`query_values`) likewise; a lake column scores the number of distinct q-grams it shares with a
query column among those held by at most `max_df` lake columns (common q-grams say nothing). The
`max_candidates` best tables (by their best column pair) are read from bronze and `autojoin`ed with
the query; tables with a program are answered, best coverage first. The work is bounded by those
four settings whatever the lake's size, except the one read of `column_tokens`.

A column whose values are all numbers is never the key a program must produce (on either side),
and the lake's such columns do not choose the candidates, as in the precomputed lists
(`candidates.py`): digits cut out of one column land on the numbers of another by chance (on the
demo lake, most wrong answers were such joins: four digits of a random id on a column of
measurements), and they would fill the candidate tables. The price: a key written as a number
(`19670701` for the date `1967-07-01`, `507,4` for `507.4`) is not joined either; numbers may
still be a program's input. `bench.autojoin_bench` measures both sides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from catalog.search.autojoin.candidates import first_tokens, textual_columns
from catalog.search.autojoin.join import Table, autojoin
from catalog.search.autojoin.qgrams import GramMemo, column_grams
from catalog.search.autojoin.settings import AutojoinSettings

if TYPE_CHECKING:
    from catalog.core.settings import Settings


COLUMN_TOKENS = "column_tokens"  # spark_jobs.profile.tokens.COLUMN_TOKENS (importing it loads Spark)


@dataclass(frozen=True)
class TransformLimits:
    tokens_per_column: int = 64
    query_values: int = 2000
    max_df: int = 50
    max_candidates: int = 20


def search_transform(
    query: Table, settings: Settings, cfg: AutojoinSettings, *, k: int = 10, limits: TransformLimits | None = None
) -> list[dict[str, Any]]:
    """Answers (table_id, coverage, program, query_columns, table_columns), best coverage first."""
    from catalog.search.autojoin.tables import lake_table  # deferred: reads the lake (delta-rs)

    lim = limits or TransformLimits()
    answers: list[dict[str, Any]] = []
    memo = GramMemo()  # the query's columns, cut once for every candidate table when sampled whole
    for table_id in candidate_tables(query, settings, lim):
        result = autojoin(query, lake_table(table_id, settings), cfg, memo=memo, numeric_keys=False)
        if result.program is None:
            continue
        answers.append(
            {
                "coverage": result.coverage,
                "table_id": table_id,
                "program": str(result.program),
                "query_columns": list(result.source_columns),
                "table_columns": list(result.target_columns),
            }
        )
    answers.sort(key=lambda a: (-a["coverage"], a["table_id"]))
    return answers[:k]


def candidate_tables(query: Table, settings: Settings, lim: TransformLimits) -> list[str]:
    """The tables whose columns share the most rare q-grams with a query column, best first."""
    tokens = _lake_tokens(settings, lim.tokens_per_column)
    tokens = None if tokens is None else textual_columns(tokens)
    if tokens is None or tokens.num_rows == 0:
        return []
    column_ids, column_of = np.unique(tokens["column_id"].to_numpy(zero_copy_only=False), return_inverse=True)
    lake = column_grams(tokens["token"].to_pylist(), q_min=4, q_max=6)
    lake_column = column_of[lake.value]
    # distinct (q-gram, lake column) and how many lake columns hold each q-gram
    pair = np.unique(np.stack([lake.hashes, lake_column.astype(np.uint64)], axis=1), axis=0)
    hashes, columns = pair[:, 0], pair[:, 1].astype(np.int64)
    starts = np.flatnonzero(np.concatenate(([True], hashes[1:] != hashes[:-1])))
    runs = np.diff(np.append(starts, len(hashes)))
    rare = np.repeat(runs, runs) <= lim.max_df
    hashes, columns = hashes[rare], columns[rare]
    best = np.zeros(len(column_ids), np.int64)
    for column in query.columns:
        values = pc.unique(column.drop_null()).slice(0, lim.query_values).to_pylist()
        if not values:
            continue
        grams = np.unique(column_grams(values, q_min=4, q_max=6).hashes)
        lo, hi = np.searchsorted(hashes, grams, "left"), np.searchsorted(hashes, grams, "right")
        reps = hi - lo
        hit = columns[np.repeat(lo, reps) + np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)]
        best = np.maximum(best, np.bincount(hit, minlength=len(column_ids)))
    table_of = np.asarray([c.split("#", 1)[0] for c in column_ids.tolist()])
    order = np.argsort(-best, kind="stable")
    out: list[str] = []
    for i in order.tolist():
        if best[i] == 0 or len(out) >= lim.max_candidates:
            break
        if table_of[i] not in out:
            out.append(str(table_of[i]))
    return out


def _lake_tokens(settings: Settings, per_column: int) -> pa.Table | None:
    """`column_tokens` (column_id, token), the first `per_column` tokens of each column in sort
    order (a bounded, deterministic sample)."""
    from spark_jobs.lake.store import LakeStore  # deferred: the lake loads only to search it

    store = LakeStore(settings.lake)
    if not store.exists(COLUMN_TOKENS):
        return None
    return first_tokens(store.read_arrow(COLUMN_TOKENS, columns=["column_id", "token"]), per_column)
