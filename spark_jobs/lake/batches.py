"""Change batches: what a crawl or a manual update asks the index jobs to apply.

Every stage and index family is a unit with a manifest (`spark_jobs.lake.commit_point`) whose
`batch_id` says the last batch its committed state includes, so "has stage X applied batch N?" is
one manifest read, and re-running a batch is a no-op.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.compute as pc

from spark_jobs.lake.bronze import ADD, BRONZE, CHANGES, DELETE
from spark_jobs.lake.commit_point import applied_batch
from spark_jobs.lake.store import LakeStore


@dataclass(frozen=True)
class ChangeBatch:
    """One committed batch. `added` tables are new or changed (replace what was indexed);
    `deleted` tables are gone. `touched` is both: everything a job must first remove."""

    batch_id: int
    added: tuple[str, ...]
    deleted: tuple[str, ...]

    @property
    def touched(self) -> tuple[str, ...]:
        return tuple(sorted({*self.added, *self.deleted}))

    @property
    def empty(self) -> bool:
        return not self.added and not self.deleted


def batch_ids(store: LakeStore) -> list[int]:
    if not store.exists(CHANGES):
        return []
    ids = store.read_arrow(CHANGES, columns=["batch_id"])["batch_id"]
    return sorted(set(ids.to_pylist()))


def load_batch(store: LakeStore, batch_id: int) -> ChangeBatch:
    changes = store.read_arrow(CHANGES, where={"batch_id": [batch_id]})
    added = changes.filter(pc.equal(changes["op"], ADD))["table_id"].to_pylist()
    deleted = changes.filter(pc.equal(changes["op"], DELETE))["table_id"].to_pylist()
    return ChangeBatch(batch_id, tuple(sorted(added)), tuple(sorted(deleted)))


def last_batch_id(store: LakeStore) -> int:
    """The last batch landed in bronze (0: none). The next one is this plus one, allocated under
    the lake lock by the landing itself."""
    return applied_batch(store, BRONZE)
