"""Names, schemas and state of the MATE index in the lake (docs/algorithms/mate.md).

* `mate_postings(table_id, bucket, token, rows, cols)`: the inverted index, one row per (table,
  token): the 0-based rows and 1-based column positions of the cells holding the token, sorted by
  row (a token in two columns of a row is two items);
* `mate_row_keys(table_id, bucket, block, keys)`: the row super keys (the OR of the XASH of the
  row's cells, null cells left out), `ROW_BLOCK` rows to a blob of little-endian uint64 words (row
  r is row r % ROW_BLOCK of block r // ROW_BLOCK), as the catalog stores them; a block with no
  cell is left out (its keys are 0);
* `mate_lists` and `mate_list_tuples`: the precomputed n-ary lists and their key tuples
  (`spark_jobs.mate.lists`);
* `mate_state`: one row: the index version and the version it was derived from, the XASH spec
  every key was made with (checked on every read), and whether this version re-hashed everything.

All three are one unit (`MATE`) with one commit point; the first two are partitioned by the table's
bucket like bronze `cells`, so a batch rewrites the partitions of its tables only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from catalog.core.xash import XashSpec
from spark_jobs.lake.commit_point import UnitSpec

MATE_POSTINGS = "mate_postings"
MATE_ROW_KEYS = "mate_row_keys"
MATE_STATE = "mate_state"
MATE_LISTS = "mate_lists"
MATE_LIST_TUPLES = "mate_list_tuples"
MATE = UnitSpec("mate", (MATE_POSTINGS, MATE_ROW_KEYS, MATE_STATE, MATE_LISTS, MATE_LIST_TUPLES))

POSTINGS_SCHEMA = pa.schema(
    [
        ("table_id", pa.string()),
        ("bucket", pa.int32()),
        ("token", pa.string()),
        ("rows", pa.list_(pa.int32())),
        ("cols", pa.list_(pa.int32())),
    ]
)

ROW_KEYS_SCHEMA = pa.schema(
    [
        ("table_id", pa.string()),
        ("bucket", pa.int32()),
        ("block", pa.int32()),
        ("keys", pa.binary()),
    ]
)

LISTS_SCHEMA = pa.schema(
    [
        ("table_id", pa.string()),
        ("key", pa.string()),  # the key's columns, a JSON list
        ("rank", pa.int32()),  # 0: the list's marker
        ("candidate_table_id", pa.string()),
        ("joinability", pa.int64()),  # the marker's: 0, or OVER_BUDGET when not computed
        ("mapping", pa.string()),  # JSON: key column -> the candidate's column
        ("version", pa.int64()),  # the index version that last changed the list
        # the marker's: the matches the list's verification enumerated over the lake (lake-only:
        # a merge adds the added tables' to them, against MAX_LIST_MATCHES)
        ("matches", pa.int64()),
        # the marker's: per key position, the (tuple, item) pairs it gives over the lake, at most
        # (lake-only: a merge adds the added tables' to them, and counts again past MAX_LIST_PAIRS)
        ("pairs", pa.list_(pa.int64())),
    ]
)
LAKE_ONLY = ("matches", "pairs")  # columns of `mate_lists` the catalog does not hold

TUPLES_SCHEMA = pa.schema(
    [
        ("table_id", pa.string()),
        ("key", pa.string()),
        ("bucket", pa.int32()),
        ("tokens", pa.list_(pa.string())),
    ]
)

STATE_SCHEMA = pa.schema(
    [
        ("index_version", pa.int64()),
        ("base_version", pa.int64()),
        ("full", pa.bool_()),
        ("spec", pa.string()),
        ("n_tables", pa.int64()),
    ]
)


@dataclass(frozen=True)
class MateState:
    """The one row of `mate_state`."""

    index_version: int
    base_version: int
    full: bool  # this version hashed every table (a build, or after a spec change)
    spec: XashSpec
    n_tables: int

    def table(self) -> pa.Table:
        row = dataclasses.asdict(self)
        row["spec"] = json.dumps(self.spec.as_dict(), sort_keys=True)
        return pa.Table.from_pylist([row], schema=STATE_SCHEMA)

    @staticmethod
    def from_row(row: Mapping[str, Any]) -> MateState:
        values = {f.name: row[f.name] for f in dataclasses.fields(MateState)}
        values["spec"] = XashSpec.from_dict(json.loads(row["spec"]))
        return MateState(**values)

    def summary(self) -> dict[str, Any]:
        return {"index_version": self.index_version, "n_tables": self.n_tables, "bits": self.spec.bits}
