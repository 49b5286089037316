"""Names, schemas and state of the LSH Ensemble index in the lake (docs/algorithms/lshensemble.md).

* `lshe_signatures(column_id, table_id, size, signature)`: every non-empty column's MinHash
  signature (`num_perm` little-endian uint32) and its number of distinct tokens. A batch rewrites
  the rows of its tables only; a column's partition is not stored but follows from its size and the
  bounds in the state, so a repartition rewrites one row of state and no signature.
* `lshe_state`: one row: the index version and the version it was derived from, the MinHash spec
  every signature was made with (checked on every read), the partition upper bounds, their
  false-positive cost and that of fresh bounds (the repartition trigger), how a search picks (b, r)
  (`tuning`), and whether this version
  re-signed everything (so the catalog must be republished whole).
Both are one unit (`LSHE`) with one commit point (`spark_jobs.lake.commit_point`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from catalog.core.minhash import MinHashSpec
from spark_jobs.lake.commit_point import UnitSpec

LSHE_SIGNATURES = "lshe_signatures"
LSHE_STATE = "lshe_state"
LSHE = UnitSpec("lshensemble", (LSHE_SIGNATURES, LSHE_STATE))

SIGNATURES_SCHEMA = pa.schema(
    [
        ("column_id", pa.string()),
        ("table_id", pa.string()),
        ("size", pa.int64()),
        ("signature", pa.binary()),
    ]
)

STATE_SCHEMA = pa.schema(
    [
        ("index_version", pa.int64()),
        ("base_version", pa.int64()),
        ("full", pa.bool_()),
        ("spec", pa.string()),
        ("partitioning", pa.string()),
        ("tuning", pa.string()),
        ("uppers", pa.list_(pa.int64())),
        ("n_columns", pa.int64()),
        ("cost", pa.float64()),
        ("optimal_cost", pa.float64()),
        ("n_raised", pa.int64()),
        ("last_rebuild_batch", pa.int64()),
    ]
)


@dataclass(frozen=True)
class LsheState:
    """The one row of `lshe_state`."""

    index_version: int
    base_version: int
    full: bool  # this version re-signed every column (a build, or a rebuild after a spec change)
    spec: MinHashSpec
    partitioning: str
    tuning: str  # JSON: the search's max_r, fp_weight and fn_weight
    uppers: tuple[int, ...]
    n_columns: int
    cost: float
    optimal_cost: float
    n_raised: int  # inserts above every bound that raised the last one since the last repartition
    last_rebuild_batch: int

    def table(self) -> pa.Table:
        row = dataclasses.asdict(self)
        row["spec"] = json.dumps(self.spec.as_dict(), sort_keys=True)
        row["uppers"] = list(self.uppers)
        return pa.Table.from_pylist([row], schema=STATE_SCHEMA)

    @staticmethod
    def from_row(row: Mapping[str, Any]) -> LsheState:
        values = {f.name: row[f.name] for f in dataclasses.fields(LsheState)}
        values["spec"] = MinHashSpec.from_dict(json.loads(row["spec"]))
        values["uppers"] = tuple(int(u) for u in row["uppers"])
        return LsheState(**values)

    def summary(self) -> dict[str, Any]:
        """Flat and JSON-sized, for logs, XCom and the CLI."""
        return {
            "index_version": self.index_version,
            "n_columns": self.n_columns,
            "n_partitions": len(self.uppers),
            "cost": round(self.cost, 3),
            "optimal_cost": round(self.optimal_cost, 3),
            "n_raised": self.n_raised,
        }
