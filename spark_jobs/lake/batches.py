"""Change batches: what a crawl or a manual update asks the index jobs to apply.

A job records the batches it has applied as Delta transaction ids on the tables it writes
(`app_id` = the job's name, version = batch id), so "what is pending for job X?" is a read of the
`changes` table and one `transaction_version`, and re-running a batch is a no-op.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.compute as pc

from spark_jobs.lake.bronze import ADD, CHANGES, DELETE
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


def next_batch_id(store: LakeStore) -> int:
    ids = batch_ids(store)
    return (ids[-1] + 1) if ids else 1


def pending_batches(store: LakeStore, table: str, app_id: str) -> list[ChangeBatch]:
    """Batches not yet applied by `app_id` to its output `table`, oldest first."""
    done = store.committed_version(table, app_id) or 0
    return [load_batch(store, b) for b in batch_ids(store) if b > done]
