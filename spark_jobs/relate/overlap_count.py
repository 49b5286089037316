"""Exact top-k overlap per column from grouped posting lists, in numpy: the counting kernel of gold
`joinable` (`spark_jobs/relate/joinable.py` builds the groups in Spark and runs this in Arrow
batches).

Columns are dense integer ids `0..n-1` assigned in `column_id` order, so "ties broken by the
candidate's column_id" is "ties broken by the smaller id". A *group* is a set of columns that share
`weight` tokens (identical posting lists collapsed, JOSIE §3.5). The overlap of column `c` with `d`
is the sum of the weights of the groups holding both; the kernel gathers the members of `c`'s
groups and counts them, so one column costs the length of its groups, not a pass over every pair
of the lake (Spark's explode-then-aggregate wrote one row per pair: 1.34 billion rows on a
2,000-table lake).

Counting uses a dense `bincount` when the gathered members are many relative to the number of
columns and a sort (`np.unique`) when they are few, so a column costs about
min(members · log members, columns) instead of always a pass over every column.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

TOP_SCHEMA = pa.schema(
    [
        ("cid", pa.int64()),
        ("candidate_cid", pa.int64()),
        ("overlap", pa.int64()),
        ("rank", pa.int32()),
        ("n_skipped", pa.int64()),
        ("complete", pa.bool_()),  # the list holds every candidate of the column (k was not reached)
    ]
)
DENSE_FACTOR = 16  # a dense count pays off once the members number n / DENSE_FACTOR or more


@dataclass(frozen=True)
class Groups:
    """Groups in CSR form both ways: the members of each group, and the groups of each column.

    `members[offsets[g]:offsets[g+1]]` are group g's column ids (sorted), `weights[g]` its token
    count; `groups_of[column_offsets[c]:column_offsets[c+1]]` are the groups holding column c.
    `n_skipped[c]` counts c's tokens whose lists were too long to count (its answers are inexact).
    """

    n_columns: int
    offsets: np.ndarray
    members: np.ndarray
    weights: np.ndarray
    column_offsets: np.ndarray
    groups_of: np.ndarray
    n_skipped: np.ndarray

    @classmethod
    def from_lists(
        cls, n_columns: int, lists: pa.ListArray, weights: np.ndarray, skipped_ids: np.ndarray, skipped: np.ndarray
    ) -> Groups:
        """From the counted groups (`lists` of column ids, `weights`) and each column's number of
        skipped tokens (`skipped[i]` for column `skipped_ids[i]`; absent: none)."""
        offsets = _offsets(lists)
        members = _values(lists)
        lengths = np.diff(offsets)
        owner = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        order = np.argsort(members, kind="stable")
        column_offsets = np.zeros(n_columns + 1, dtype=np.int64)
        np.cumsum(np.bincount(members, minlength=n_columns), out=column_offsets[1:])
        return cls(
            n_columns=n_columns,
            offsets=offsets,
            members=members,
            weights=weights.astype(np.int64),
            column_offsets=column_offsets,
            groups_of=owner[order],
            n_skipped=np.bincount(skipped_ids.astype(np.int64), weights=skipped, minlength=n_columns).astype(np.int64),
        )

    def overlaps(self, column: int) -> tuple[np.ndarray, np.ndarray]:
        """(candidate ids ascending, overlaps) of every column sharing a counted token with `column`."""
        groups = self.groups_of[self.column_offsets[column] : self.column_offsets[column + 1]]
        if len(groups) == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        starts = self.offsets[groups]
        lengths = self.offsets[groups + 1] - starts
        total = int(lengths.sum())
        # positions of every member of every group, without a Python loop over the groups
        shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        gathered = self.members[np.arange(total, dtype=np.int64) + shift]
        weight = np.repeat(self.weights[groups], lengths)
        if total * DENSE_FACTOR >= self.n_columns:
            counts = np.bincount(gathered, weights=weight, minlength=self.n_columns)
            ids = np.flatnonzero(counts)
            values = counts[ids]
        else:
            ids, inverse = np.unique(gathered, return_inverse=True)
            values = np.bincount(inverse, weights=weight)
        keep = ids != column
        return ids[keep], values[keep].astype(np.int64)


def top_k(ids: np.ndarray, values: np.ndarray, k: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The k best (ids, values) by value descending, then id ascending (`ids` come ascending); all
    of them, so ordered, when k is None."""
    if k is not None and len(ids) > k:
        threshold = np.partition(values, len(values) - k)[len(values) - k]
        near = values >= threshold
        ids, values = ids[near], values[near]
    order = np.argsort(-values, kind="stable")[:k]
    return ids[order], values[order]


def top_k_batches(groups: Groups, columns: Iterator[pa.RecordBatch], k: int | None) -> Iterator[pa.RecordBatch]:
    """For each batch of column ids (`cid`), their top-k rows (TOP_SCHEMA; every candidate when k is
    None); a column sharing no counted token with another has no rows, as it has no list."""
    for batch in columns:
        out: dict[str, list[np.ndarray]] = {name: [] for name in TOP_SCHEMA.names}
        for column in batch.column("cid").to_numpy():
            candidates, overlaps = groups.overlaps(int(column))
            ids, values = top_k(candidates, overlaps, k)
            n = len(ids)
            out["cid"].append(np.full(n, column, np.int64))
            out["candidate_cid"].append(ids)
            out["overlap"].append(values)
            out["rank"].append(np.arange(1, n + 1, dtype=np.int32))
            out["n_skipped"].append(np.full(n, groups.n_skipped[column], np.int64))
            out["complete"].append(np.full(n, n == len(candidates), np.bool_))
        if out["cid"]:
            arrays = [pa.array(np.concatenate(out[f.name]), type=f.type) for f in TOP_SCHEMA]
            yield pa.RecordBatch.from_arrays(arrays, schema=TOP_SCHEMA)


def _offsets(lists: pa.ListArray) -> np.ndarray:
    """The list offsets rebased to the first (a sliced array's offsets need not start at 0)."""
    offsets = lists.offsets.to_numpy().astype(np.int64)
    return offsets - offsets[0] if len(offsets) else np.zeros(1, np.int64)


def _values(lists: pa.ListArray) -> np.ndarray:
    return lists.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
