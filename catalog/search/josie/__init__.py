"""Online search of the lake for a query column that need not be in it.

`search_join` answers "which columns share the most distinct values with mine?" exactly, over a JOSIE
index read through an `IndexReader` (the catalog database or an in-memory index), with one of:

- `josie` — JOSIE (Zhu et al., SIGMOD 2019), cost-based choice between list and set reads;
- `mergelist` — MergeList-D, read every distinct list and count;
- `probeset` — ProbeSet-D, prefix + position filter, read each candidate at first sight;
- `brute` — scan every set of the index.

All four return the same answer: ordered by overlap desc then column_id asc, at most k, never a set
with overlap 0 (see `results` for the tie rule). Query values are normalized with
`catalog.core.identity.normalize_token` exactly as the index was; values not in the dictionary cannot
match and are dropped. `exclude_column_id` leaves a query column that is itself in the lake out of
the answer.
"""

from __future__ import annotations

from collections.abc import Iterable

from catalog.core.errors import UnknownIdError
from catalog.core.identity import normalize_token
from catalog.search.josie.cost_model import DEFAULT_COSTS, CostModel
from catalog.search.josie.query_plan import QueryPlan, plan_tokens
from catalog.search.josie.reader import (
    DbIndexReader,
    IndexReader,
    InMemoryIndex,
    QueryToken,
    build_memory_index,
)
from catalog.search.josie.results import JoinResult, SearchOutcome, SearchStats, rank, rank_arrays

METHODS = ("josie", "mergelist", "probeset", "brute")

__all__ = [
    "METHODS",
    "CostModel",
    "DbIndexReader",
    "InMemoryIndex",
    "IndexReader",
    "JoinResult",
    "QueryToken",
    "SearchOutcome",
    "SearchStats",
    "build_memory_index",
    "normalize_values",
    "search_join",
    "search_tokens",
]


def normalize_values(values: Iterable[str | None]) -> set[str]:
    """The query column's set: its distinct normalized tokens."""
    return {t for t in map(normalize_token, values) if t is not None}


def search_join(
    reader: IndexReader,
    values: Iterable[str | None],
    *,
    k: int = 10,
    method: str = "josie",
    exclude_column_id: str | None = None,
    costs: CostModel | None = None,
    exact_ties: bool = True,
) -> SearchOutcome:
    """Top-k columns by distinct-value overlap with `values` (raw cell values; normalized here)."""
    return search_tokens(
        reader,
        normalize_values(values),
        k=k,
        method=method,
        exclude_column_id=exclude_column_id,
        costs=costs,
        exact_ties=exact_ties,
    )


def search_tokens(
    reader: IndexReader,
    tokens: Iterable[str],
    *,
    k: int = 10,
    method: str = "josie",
    exclude_column_id: str | None = None,
    costs: CostModel | None = None,
    exact_ties: bool = True,
) -> SearchOutcome:
    """`search_join` for tokens that are already normalized."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r} (one of {', '.join(METHODS)})")
    ignore: frozenset[int] = frozenset()
    if exclude_column_id is not None:
        sid = reader.set_id_of(exclude_column_id)
        if sid is None:
            raise UnknownIdError("column_id", exclude_column_id)
        ignore = frozenset({sid})
    plan = plan_tokens(reader, tokens)
    return run_plan(reader, plan, k=k, method=method, ignore=ignore, costs=costs, exact_ties=exact_ties)


def run_plan(
    reader: IndexReader,
    plan: QueryPlan,
    *,
    k: int,
    method: str,
    ignore: frozenset[int] = frozenset(),
    costs: CostModel | None = None,
    exact_ties: bool = True,
) -> SearchOutcome:
    """Run one method on a prepared query. Benchmarks time this part only, after the dictionary lookup
    and the plan, as the JOSIE reference implementation's experiments do."""
    # deferred: the method modules import this package (a cycle at module level)
    from catalog.search.josie.brute_force import scan_overlaps
    from catalog.search.josie.mergelist import mergelist_counts  # deferred: as above
    from catalog.search.josie.probeset import probeset_top_k  # deferred: as above
    from catalog.search.josie.search import josie_top_k  # deferred: as above

    stats = SearchStats(method=method, n_query_tokens=plan.n)
    if method == "josie":
        top = josie_top_k(
            reader, plan, k, costs=costs or DEFAULT_COSTS, ignore=ignore, exact_ties=exact_ties, stats=stats
        )
        results = top.results(reader)
    elif method == "probeset":
        results = probeset_top_k(reader, plan, k, ignore=ignore, exact_ties=exact_ties, stats=stats).results(reader)
    elif method == "mergelist":
        results = rank_arrays(reader, *mergelist_counts(reader, plan, ignore=ignore, stats=stats), k)
    else:
        results = rank(reader, scan_overlaps(reader, plan, ignore=ignore, stats=stats), k)
    return SearchOutcome(results=results, stats=stats)
