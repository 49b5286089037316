"""The constrained fuzzy join (thesis §4.6, Algorithm 6): after the transformation, pair the derived
source values that equal no target key with the target keys nobody hit, when they are close enough.

The distance is the Jaccard distance of lower-cased 3-gram sets. The threshold is the loosest one
at which the join stays a function both ways: each derived value matches at most one target key
and each target key at most one derived value (the thesis's optional second constraint, which keeps
"George W. Bush" from also taking "George H. W. Bush"). Both constraints only break more as the
threshold loosens, so the loosest safe threshold is found by binary search over the distinct
similarities of the candidate pairs, and never looser than `max_distance`.

The thesis checks the constraint with every (value, key) distance, O(|C|·|K|) per probe; here the
candidate pairs come from a 3-gram inverted index (pairs sharing at least one 3-gram; a 3-gram held
by more than `max_df` values on either side is skipped, a blocking that only drops pairs too
common to be told apart anyway), so a probe is one pass over those pairs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from catalog.search.autojoin.qgrams import column_grams


def fuzzy_pairs(
    derived: Sequence[str], keys: Sequence[str], *, max_distance: float = 0.5, max_df: int = 50
) -> list[tuple[int, int]]:
    """(index into `derived`, index into `keys`) pairs of the constrained fuzzy join (distinct values)."""
    if not 0.0 <= max_distance < 1.0:
        raise ValueError(f"max_distance must be in [0, 1), got {max_distance}")
    if not derived or not keys:
        return []
    a = column_grams(list(derived), q_min=3, q_max=3)
    b = column_grams(list(keys), q_min=3, q_max=3)
    a_size = np.bincount(a.value, minlength=len(derived))
    b_size = np.bincount(b.value, minlength=len(keys))
    a_keep, b_keep = a.count <= max_df, b.count <= max_df
    a_hash, a_val = a.hashes[a_keep], a.value[a_keep]
    b_hash, b_val = b.hashes[b_keep], b.value[b_keep]
    lo = np.searchsorted(b_hash, a_hash, side="left")
    hi = np.searchsorted(b_hash, a_hash, side="right")
    reps = hi - lo
    if not reps.any():
        return []
    left = np.repeat(a_val, reps)
    right = b_val[np.repeat(lo, reps) + np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)]
    pair = left * len(keys) + right
    pair, shared = np.unique(pair, return_counts=True)
    left, right = pair // len(keys), pair % len(keys)
    similarity = shared / (a_size[left] + b_size[right] - shared)
    ok = similarity >= 1.0 - max_distance
    left, right, similarity = left[ok], right[ok], similarity[ok]
    if not len(left):
        return []
    order = np.argsort(-similarity, kind="stable")
    left, right, similarity = left[order], right[order], similarity[order]
    thresholds = np.unique(similarity)[::-1]  # strictest first

    def safe(upto: int) -> bool:
        take = similarity >= thresholds[upto]
        return _functional(left[take]) and _functional(right[take])

    if not safe(0):
        return []
    lo_i, hi_i = 0, len(thresholds) - 1  # safe(lo_i) holds; find the loosest safe threshold
    while lo_i < hi_i:
        mid = (lo_i + hi_i + 1) // 2
        if safe(mid):
            lo_i = mid
        else:
            hi_i = mid - 1
    take = similarity >= thresholds[lo_i]
    return list(zip(left[take].tolist(), right[take].tolist(), strict=True))


def _functional(ids: np.ndarray) -> bool:
    return len(np.unique(ids)) == len(ids)
