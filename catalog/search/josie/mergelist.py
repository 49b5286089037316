"""MergeList-D: read the posting list of every distinct query run and count (JOSIE, SIGMOD 2019, §2.2).

No set is read; the last list of each duplicate run credits the run length r to each of its sets.
Its cost does not depend on k. Counting is vectorised with numpy.
"""

from __future__ import annotations

import numpy as np

from catalog.search.josie.query_plan import QueryPlan
from catalog.search.josie.reader import IndexReader
from catalog.search.josie.results import SearchStats


def mergelist_counts(
    reader: IndexReader, plan: QueryPlan, *, ignore: frozenset[int] = frozenset(), stats: SearchStats | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(set ids ascending, overlaps) of every set sharing a token with the query, ignored sets left out."""
    stats = stats if stats is not None else SearchStats()
    n_runs = len(plan.run_ends)
    packed = reader.read_lists_packed(plan.list_token_ids().tolist())
    stats.n_lists_read += n_runs
    stats.n_lists_fetched += n_runs
    if len(packed.set_ids) == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    uniq, inverse = np.unique(packed.set_ids, return_inverse=True)
    skipped = np.asarray(plan.skipped, dtype=np.int64)
    if skipped.any():
        weights = np.repeat(skipped + 1, np.diff(packed.offsets))
        counts = np.bincount(inverse, weights=weights).astype(np.int64)
    else:  # no duplicate runs: every list credits 1
        counts = np.bincount(inverse)
    uniq = uniq.astype(np.int64)
    if ignore:
        keep = ~np.isin(uniq, np.fromiter(ignore, dtype=np.int64, count=len(ignore)))
        uniq, counts = uniq[keep], counts[keep]
    stats.n_candidates += len(uniq)
    return uniq, counts
