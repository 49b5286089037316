"""Names and schemas of the JOSIE index tables in the lake (described in docs/algorithms/josie.md, "Lake tables").

* `josie_tokens(token, token_id, frequency, group_id)`: the dictionary. After a build or rebuild
  token ids are dense 0..N-1 in global order (frequency ascending, then the mmh3 hash of the posting
  list's sorted set ids, then the list itself) and `group_id` is the dense rank of the token's
  duplicate group (a contiguous token-id range of identical posting lists). An incremental update
  never renumbers a token: new tokens get ids from `next_token_id` on (the end of the order), and a
  list whose set-id membership changed gets the fresh singleton group `DIRTY_GROUP_BASE + token_id`
  until the next rebuild (so `group_id >= DIRTY_GROUP_BASE` means "dirty"). Lists whose entries only
  moved (position or size of a changed set) keep their group: their set ids are still identical.
* `josie_sets(set_id, table_id, column_id, size, tokens)`: integer sets, token ids ascending.
  Set ids are stable and never reused: a column keeps its set id while it has tokens (a changed
  table's surviving columns keep theirs and get a (token, set) diff); a column that disappears or
  becomes empty loses its id for good, and a column seen again later gets a new one.
* `josie_postings(token_id, set_ids, positions, sizes)`: entries sorted by set id; positions are
  0-based positions of `token_id` inside that set's sorted tokens.
The five tables are one unit (`JOSIE`): an update, build or rebuild writes them and then commits
the unit's manifest (`spark_jobs.lake.commit_point`), its one commit point.

* `josie_state`: one row: index_version, n_lists, n_dirty_lists, dirty_share, next_set_id,
  next_token_id, last_rebuild_batch.
* `josie_changes(index_version, base_version, kind, key)`: what each index version changed, so the
  catalog publish rewrites only those rows: kind `token` (token_id whose dictionary row or posting
  list changed or vanished), `set` (set_id), or `full` (rebuild/build: everything, key -1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa

from spark_jobs.lake.commit_point import UnitSpec

JOSIE_TOKENS = "josie_tokens"
JOSIE_SETS = "josie_sets"
JOSIE_POSTINGS = "josie_postings"
JOSIE_STATE = "josie_state"
JOSIE_CHANGES = "josie_changes"

DIRTY_GROUP_BASE = 1 << 30  # group ids at or above this are fresh singleton groups of dirty lists
HASH_SEED = 0x4A05  # mmh3 seed of posting-list hashes (fixed: every worker must agree)

TOKENS_SCHEMA = pa.schema(
    [
        ("token", pa.string()),
        ("token_id", pa.int64()),
        ("frequency", pa.int32()),
        ("group_id", pa.int64()),
    ]
)

SETS_SCHEMA = pa.schema(
    [
        ("set_id", pa.int64()),
        ("table_id", pa.string()),
        ("column_id", pa.string()),
        ("size", pa.int32()),
        ("tokens", pa.list_(pa.int32())),
    ]
)

POSTINGS_SCHEMA = pa.schema(
    [
        ("token_id", pa.int64()),
        ("set_ids", pa.list_(pa.int32())),
        ("positions", pa.list_(pa.int32())),
        ("sizes", pa.list_(pa.int32())),
    ]
)

STATE_SCHEMA = pa.schema(
    [
        ("index_version", pa.int64()),
        ("n_lists", pa.int64()),
        ("n_dirty_lists", pa.int64()),
        ("dirty_share", pa.float64()),
        ("next_set_id", pa.int64()),
        ("next_token_id", pa.int64()),
        ("last_rebuild_batch", pa.int64()),
    ]
)

CHANGES_SCHEMA = pa.schema(
    [
        ("index_version", pa.int64()),
        ("base_version", pa.int64()),
        ("kind", pa.string()),
        ("key", pa.int64()),
    ]
)

CHANGE_TOKEN, CHANGE_SET, CHANGE_FULL = "token", "set", "full"


@dataclass(frozen=True)
class JosieState:
    """The one row of `josie_state`."""

    index_version: int = 0
    n_lists: int = 0
    n_dirty_lists: int = 0
    dirty_share: float = 0.0
    next_set_id: int = 0
    next_token_id: int = 0
    last_rebuild_batch: int = 0

    def table(self) -> pa.Table:
        return pa.Table.from_pylist([dataclasses.asdict(self)], schema=STATE_SCHEMA)

    @staticmethod
    def from_row(row: Mapping[str, Any]) -> JosieState:
        return JosieState(**{f.name: row[f.name] for f in dataclasses.fields(JosieState)})

    def with_counts(self, n_lists: int, n_dirty_lists: int, **changes: Any) -> JosieState:
        """A copy with new list counts (and the dirty share they give) and any other changes."""
        return dataclasses.replace(
            self,
            n_lists=n_lists,
            n_dirty_lists=n_dirty_lists,
            dirty_share=(n_dirty_lists / n_lists) if n_lists else 0.0,
            **changes,
        )


JosieMode = Literal["build", "update", "rebuild", "skipped", "empty", "absent", "not_due"]


@dataclass(frozen=True)
class JosieResult:
    """What a JOSIE job did: its mode, the committed state, whether a rebuild is due now, and (for
    an update) how many posting lists and sets it rewrote."""

    mode: JosieMode
    state: JosieState | None = None
    rebuild_due: bool = False
    n_lists_rewritten: int = 0
    n_affected_sets: int = 0

    def summary(self) -> dict[str, Any]:
        """Flat and JSON-sized, for logs, XCom and the CLI."""
        state = dataclasses.asdict(self.state) if self.state else {}
        return {
            "mode": self.mode,
            **state,
            "rebuild_due": self.rebuild_due,
            "n_lists_rewritten": self.n_lists_rewritten,
            "n_affected_sets": self.n_affected_sets,
        }


JOSIE = UnitSpec("josie", (JOSIE_TOKENS, JOSIE_SETS, JOSIE_POSTINGS, JOSIE_STATE, JOSIE_CHANGES))

SCHEMAS: dict[str, pa.Schema] = {
    JOSIE_TOKENS: TOKENS_SCHEMA,
    JOSIE_SETS: SETS_SCHEMA,
    JOSIE_POSTINGS: POSTINGS_SCHEMA,
    JOSIE_STATE: STATE_SCHEMA,
    JOSIE_CHANGES: CHANGES_SCHEMA,
}
