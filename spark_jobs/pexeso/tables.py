"""Names, schemas and state of the PEXESO index in the lake (docs/algorithms/pexeso.md).

* `pexeso_vectors(table_id, bucket, column_id, header, n_values, values, vectors)`: one row per
  embedded (textual) column: its distinct tokens and their unit vectors, packed little-endian
  float32 (`n_values` rows of `dimension` floats), as the catalog stores them; partitioned by the
  table's bucket like silver `column_tokens`, so a batch rewrites the partitions of its tables only;
* `pexeso_state`: one row: the index version and the version it was derived from, the embedder
  (name, version, dimension; checked on every read), the index shape, the pivots (packed float32)
  and how many vectors changed since they were selected (a rebuild re-selects them).

Both are one unit (`PEXESO`) with one commit point.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from catalog.search.pexeso.index import EmbeddingSpec, IndexShape
from spark_jobs.lake.commit_point import UnitSpec

PEXESO_VECTORS = "pexeso_vectors"
PEXESO_STATE = "pexeso_state"
PEXESO = UnitSpec("pexeso", (PEXESO_VECTORS, PEXESO_STATE))

VECTORS_SCHEMA = pa.schema(
    [
        ("table_id", pa.string()),
        ("bucket", pa.int32()),
        ("column_id", pa.string()),
        ("header", pa.string()),
        ("n_values", pa.int64()),
        ("values", pa.list_(pa.string())),
        ("vectors", pa.binary()),
    ]
)

STATE_SCHEMA = pa.schema(
    [
        ("index_version", pa.int64()),
        ("base_version", pa.int64()),
        ("full", pa.bool_()),
        ("spec", pa.string()),
        ("shape", pa.string()),
        ("pivots", pa.binary()),
        ("n_columns", pa.int64()),
        ("n_vectors", pa.int64()),
        ("n_vectors_at_pivots", pa.int64()),
        ("n_changed", pa.int64()),
    ]
)


@dataclass(frozen=True)
class PexesoState:
    """The one row of `pexeso_state`."""

    index_version: int
    base_version: int
    full: bool  # this version embedded every column (a build, or after an embedder change)
    spec: EmbeddingSpec
    shape: IndexShape
    pivots: np.ndarray  # (n_pivots, dimension) float32
    n_columns: int
    n_vectors: int
    n_vectors_at_pivots: int  # vectors held when the pivots were selected
    n_changed: int  # vectors added or deleted since

    def table(self) -> pa.Table:
        row = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        row["spec"] = spec_json(self.spec)
        row["shape"] = shape_json(self.shape)
        row["pivots"] = self.pivots.astype("<f4").tobytes()
        return pa.Table.from_pylist([row], schema=STATE_SCHEMA)

    @staticmethod
    def from_row(row: Mapping[str, Any]) -> PexesoState:
        values = {f.name: row[f.name] for f in dataclasses.fields(PexesoState)}
        values["spec"] = EmbeddingSpec(**json.loads(row["spec"]))
        values["shape"] = IndexShape(**json.loads(row["shape"]))
        values["pivots"] = np.frombuffer(row["pivots"], "<f4").reshape(-1, values["spec"].dimension)
        return PexesoState(**values)

    def summary(self) -> dict[str, Any]:
        return {"index_version": self.index_version, "n_columns": self.n_columns, "n_vectors": self.n_vectors}


def spec_json(spec: EmbeddingSpec) -> str:
    return json.dumps(dataclasses.asdict(spec), sort_keys=True)


def shape_json(shape: IndexShape) -> str:
    return json.dumps(dataclasses.asdict(shape), sort_keys=True)
