"""A unit's manifest: the one row that says which version of each of its Delta tables is committed.

See `spark_jobs.lake.commit_point` for how writers use it. This module is only the record and its
Arrow form, so the store can pin readers to committed versions without importing the writers.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

MANIFEST_SUFFIX = "_manifest"
ABSENT = -1  # a table the unit owns but has never committed: readers see no table

MANIFEST_SCHEMA = pa.schema(
    [
        ("unit", pa.string()),
        ("version", pa.int64()),
        ("batch_id", pa.int64()),
        ("kind", pa.string()),
        ("tables", pa.string()),  # JSON {table name: Delta version, or -1 while never committed}
        ("state", pa.string()),  # JSON, the unit's own small state
        ("created_at", pa.timestamp("us", tz="UTC")),
    ]
)


def manifest_table(unit: str) -> str:
    return f"{unit}{MANIFEST_SUFFIX}"


@dataclass(frozen=True)
class Manifest:
    """One committed state of a unit. `version` counts the unit's commits (0: created, nothing
    committed yet); `batch_id` is the last change batch the state includes (0: none); `kind` says
    what produced it (land, update, build, rebuild, relate, ...)."""

    unit: str
    version: int
    batch_id: int
    kind: str
    tables: Mapping[str, int]
    state: Mapping[str, Any] = field(default_factory=dict)
    created_at: dt.datetime | None = None

    def pins(self) -> dict[str, int]:
        """Table name -> the version readers use (ABSENT: not committed, the table does not exist)."""
        return dict(self.tables)

    def to_arrow(self) -> pa.Table:
        row = {
            "unit": self.unit,
            "version": self.version,
            "batch_id": self.batch_id,
            "kind": self.kind,
            "tables": json.dumps(dict(self.tables), sort_keys=True),
            "state": json.dumps(dict(self.state), sort_keys=True, default=_json_default),
            "created_at": self.created_at or dt.datetime.now(dt.UTC),
        }
        return pa.Table.from_pylist([row], schema=MANIFEST_SCHEMA)

    @staticmethod
    def from_row(row: Mapping[str, Any]) -> Manifest:
        return Manifest(
            unit=row["unit"],
            version=int(row["version"]),
            batch_id=int(row["batch_id"]),
            kind=row["kind"],
            tables={k: int(v) for k, v in json.loads(row["tables"]).items()},
            state=json.loads(row["state"] or "{}"),
            created_at=row["created_at"],
        )


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
