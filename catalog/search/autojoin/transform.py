"""`juncture search transform --csv FILE`: lake tables a query table joins with after a
transformation, ranked by coverage, each with its program.

Candidates come from q-gram overlap, not exact overlap (these pairs have little of it): each lake
column's first `tokens_per_column` distinct normalized tokens in byte order (silver
`column_token_samples`, kept by the tokens stage) are cut into q-grams (q = 4..6); a query
column's distinct values (at most `query_values`) likewise; a lake column scores the number of
distinct q-grams it shares with a query column among those held by at most `max_df` lake columns
(common q-grams say nothing). The `max_candidates` best tables (by their best column pair) are read
from bronze and `autojoin`ed with the query; tables with a program are answered, best coverage
first. The work is bounded by those four settings whatever the lake's size, except the one read of
the samples (64 tokens a column).

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

from catalog.core.identity import SAMPLE_TOKENS
from catalog.search.autojoin.candidates import first_tokens, gram_columns, gram_key, textual_columns
from catalog.search.autojoin.join import Table, autojoin
from catalog.search.autojoin.qgrams import GramMemo, column_grams, equal_runs
from catalog.search.autojoin.settings import AutojoinSettings

if TYPE_CHECKING:
    from catalog.core.settings import Settings
    from spark_jobs.lake.store import LakeStore


# spark_jobs.profile.tokens' names (importing it loads Spark)
COLUMN_TOKENS = "column_tokens"
COLUMN_TOKEN_SAMPLES = "column_token_samples"


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
    from spark_jobs.lake.store import LakeStore  # deferred: the lake loads only to search it

    tokens = sampled_tokens(LakeStore(settings.lake), lim.tokens_per_column, ["column_id", "token"])
    tokens = None if tokens is None else textual_columns(tokens)
    if tokens is None or tokens.num_rows == 0:
        return []
    column_ids, column_of = np.unique(tokens["column_id"].to_numpy(zero_copy_only=False), return_inverse=True)
    hashes, columns = gram_columns(tokens["token"].to_pylist(), column_of, len(column_ids))
    # keep the q-grams held by at most max_df lake columns
    _, runs = equal_runs(hashes)
    rare = np.repeat(runs, runs) <= lim.max_df
    hashes, columns = hashes[rare], columns[rare]
    best = np.zeros(len(column_ids), np.int64)
    for column in query.columns:
        values = pc.unique(column.drop_null()).slice(0, lim.query_values).to_pylist()
        if not values:
            continue
        grams = np.unique(gram_key(column_grams(values, q_min=4, q_max=6).hashes))
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


def sampled_tokens(store: LakeStore, per_column: int, columns: list[str]) -> pa.Table | None:
    """`columns` of the first `per_column` tokens of each lake column in byte order (a bounded,
    deterministic sample): read from the token samples when they hold that many, else (a larger
    setting, or a lake whose tokens stage has not written samples yet) from all of `column_tokens`."""
    name = COLUMN_TOKEN_SAMPLES if per_column <= SAMPLE_TOKENS and store.exists(COLUMN_TOKEN_SAMPLES) else COLUMN_TOKENS
    if not store.exists(name):
        return None
    return first_tokens(store.read_arrow(name, columns=columns), per_column)
