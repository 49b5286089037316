"""Brute force: the oracle the exact methods are tested against, and the CLI's `--method brute`.

`brute_force_top_k` works on plain Python sets of tokens (no index at all); `scan_overlaps` reads
every integer set of an index and intersects it with the query. Both rank by overlap desc, then
column_id asc, and never return overlap 0.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from catalog.core.identity import split_column_id
from catalog.search.josie.query_plan import QueryPlan, count_matches
from catalog.search.josie.reader import IndexReader
from catalog.search.josie.results import JoinResult, SearchStats


def brute_force_top_k(
    columns: Mapping[str, Collection[str]], query: Collection[str], k: int, *, exclude_column_id: str | None = None
) -> list[JoinResult]:
    """Top k of column_id -> tokens by |tokens ∩ query|, from Python sets alone."""
    q = set(query)
    scored = []
    for cid, tokens in columns.items():
        if cid == exclude_column_id:
            continue
        o = len(q.intersection(tokens))
        if o > 0:
            scored.append((-o, cid))
    scored.sort()
    out = []
    for neg, cid in scored[:k]:
        table_id, header = split_column_id(cid)
        out.append(JoinResult(table_id=table_id, column=header, column_id=cid, overlap=-neg))
    return out


def scan_overlaps(
    reader: IndexReader, plan: QueryPlan, *, ignore: frozenset[int] = frozenset(), stats: SearchStats | None = None
) -> dict[int, int]:
    """{set_id: overlap} over every set of the index (a full scan)."""
    stats = stats if stats is not None else SearchStats()
    out = {}
    for sid, tokens in reader.iter_sets():
        stats.n_sets_read += 1
        stats.n_set_tokens_read += len(tokens)
        if sid in ignore:
            continue
        o = count_matches(plan.token_ids, tokens)
        if o:
            out[sid] = o
    return out
