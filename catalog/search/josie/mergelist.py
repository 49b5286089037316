"""MergeList-D: read the posting list of every distinct query run and count (JOSIE, SIGMOD 2019, §2.2).

No set is read; the last list of each duplicate run credits the run length r to each of its sets.
Its cost does not depend on k. Counting is vectorised with numpy.
"""

from __future__ import annotations

import numpy as np

from catalog.search.josie.query_plan import QueryPlan
from catalog.search.josie.reader import IndexReader
from catalog.search.josie.results import SearchStats


def mergelist_overlaps(
    reader: IndexReader, plan: QueryPlan, *, ignore: frozenset[int] = frozenset(), stats: SearchStats | None = None
) -> dict[int, int]:
    """{set_id: overlap} of every set sharing a token with the query (ignored sets left out)."""
    stats = stats if stats is not None else SearchStats()
    runs = plan.runs()
    packed = reader.read_lists_packed(plan.list_token_ids().tolist())
    stats.n_lists_read += len(runs)
    stats.n_lists_fetched += len(runs)
    if len(packed.set_ids) == 0:
        return {}
    weights = np.repeat(np.asarray(plan.skipped, dtype=np.int64) + 1, np.diff(packed.offsets))
    uniq, inverse = np.unique(packed.set_ids, return_inverse=True)
    counts = np.bincount(inverse, weights=weights).astype(np.int64)
    stats.n_candidates += len(uniq)
    out = dict(zip(uniq.tolist(), counts.tolist(), strict=True))
    for sid in ignore:
        out.pop(sid, None)
    return out
