"""The one commit point of every unit of lake state (bronze, each pipeline stage, each index family).

A *unit* owns a few Delta tables that only make sense together: JOSIE's dictionary, sets, posting
lists and change log; the relate stage's joinable and unionable lists with their change logs;
bronze's datasets, cells and change batches. Updating a unit writes a new version of each table it
changes, one Delta commit per table, and then commits one *manifest*: a one-row Delta table
(`<unit>_manifest`) naming the version of every table of the unit, the last change batch the state
includes, and a small JSON state. The manifest commit is the unit's only commit point:

* **Readers** never read a unit's tables at their latest version. They take a manifest (the
  current one, or the one in force after a given batch) and read each table at the version it
  names. A table version written after the manifest is invisible.
* **The next writer** starts from the current manifest. Before writing, it rolls back every table
  whose latest version is newer than the manifest's (a writer killed between two table commits left
  it there), with Delta's RESTORE, so appends and partial rewrites build on the committed state.
  A table that exists without any manifest (a first build killed half-way) is emptied.

So a kill at any point leaves the previous manifest in force, whatever runs next: the same
operation again, another batch, or a rebuild. Manifests are never deleted: the Delta history of
`<unit>_manifest` is the unit's history, and `at_batch` finds the state a given batch produced
(the catalog publish reads exactly that state, never whatever the lake holds at that moment).

Writers must hold the lake lock (`spark_jobs.lake.lock`): the commit point makes a unit crash-safe,
the lock makes it single-writer.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from catalog.core.errors import LakeError
from spark_jobs.lake.store import CommitResult, LakeStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

MANIFEST_SCHEMA = pa.schema([
    ("unit", pa.string()),
    ("version", pa.int64()),
    ("batch_id", pa.int64()),
    ("kind", pa.string()),
    ("tables", pa.string()),  # JSON {table name: Delta version}
    ("state", pa.string()),  # JSON, the unit's own small state
    ("created_at", pa.timestamp("us", tz="UTC")),
])


@dataclass(frozen=True)
class UnitSpec:
    """A unit of lake state: its name and the Delta tables it owns."""

    name: str
    tables: tuple[str, ...]

    @property
    def manifest_table(self) -> str:
        return f"{self.name}_manifest"


@dataclass(frozen=True)
class Manifest:
    """One committed state of a unit. `version` counts the unit's commits from 1; `batch_id` is the
    last change batch the state includes (0: none yet); `kind` says what produced it (build,
    update, rebuild, ...)."""

    unit: str
    version: int
    batch_id: int
    kind: str
    tables: Mapping[str, int]
    state: Mapping[str, Any] = field(default_factory=dict)
    created_at: dt.datetime | None = None


class Snapshot:
    """A unit's tables as one manifest names them (an empty view when there is no manifest yet)."""

    def __init__(self, store: LakeStore, spec: UnitSpec, manifest: Manifest | None) -> None:
        self.store, self.spec, self.manifest = store, spec, manifest

    def has(self, name: str) -> bool:
        self._check(name)
        return self.manifest is not None and name in self.manifest.tables

    def version(self, name: str) -> int:
        if not self.has(name):
            raise LakeError(name, f"no committed version in unit {self.spec.name!r}")
        assert self.manifest is not None
        return int(self.manifest.tables[name])

    def read(self, name: str, *, columns: Sequence[str] | None = None,
             where: Mapping[str, Sequence[Any]] | None = None) -> DataFrame:
        return self.store.read(name, columns=columns, where=where, version=self.version(name))

    def read_arrow(self, name: str, *, columns: Sequence[str] | None = None,
                   where: Mapping[str, Sequence[Any]] | None = None) -> pa.Table:
        return self.store.read_arrow(name, columns=columns, where=where, version=self.version(name))

    def _check(self, name: str) -> None:
        if name not in self.spec.tables:
            raise LakeError(name, f"not a table of unit {self.spec.name!r} ({', '.join(self.spec.tables)})")


class CommitPoint:
    """Reads and commits the manifests of one unit."""

    def __init__(self, store: LakeStore, spec: UnitSpec) -> None:
        self.store, self.spec = store, spec
        self._cache: dict[int, Manifest | None] = {}

    # ------------------------------------------------------------------ reading
    def current(self) -> Manifest | None:
        """The unit's committed state, or None before its first commit."""
        if not self.store.exists(self.spec.manifest_table):
            return None
        return self._manifest_at(self.store.version(self.spec.manifest_table))

    def at_batch(self, batch_id: int) -> Manifest | None:
        """The newest manifest whose state includes no batch after `batch_id` (None if none)."""
        if not self.store.exists(self.spec.manifest_table):
            return None
        for version in range(self.store.version(self.spec.manifest_table), -1, -1):
            manifest = self._manifest_at(version)
            if manifest is not None and manifest.batch_id <= batch_id:
                return manifest
        return None

    def history(self) -> list[Manifest]:
        """Every manifest, oldest first."""
        if not self.store.exists(self.spec.manifest_table):
            return []
        versions = range(self.store.version(self.spec.manifest_table) + 1)
        return [m for m in map(self._manifest_at, versions) if m is not None]

    def applied(self, batch_id: int) -> bool:
        """Whether the committed state already includes `batch_id`."""
        current = self.current()
        return current is not None and current.batch_id >= batch_id

    def snapshot(self, manifest: Manifest | None) -> Snapshot:
        return Snapshot(self.store, self.spec, manifest)

    def _manifest_at(self, table_version: int) -> Manifest | None:
        if table_version not in self._cache:
            rows = self.store.read_arrow(self.spec.manifest_table, version=table_version).to_pylist()
            self._cache[table_version] = _manifest(rows[0]) if rows else None
        return self._cache[table_version]

    # ------------------------------------------------------------------ writing
    def begin(self) -> UnitWriter:
        """Start an update from the current manifest, rolling back table versions written after it."""
        base = self.current()
        for name in self.spec.tables:
            if not self.store.exists(name):
                continue
            latest = self.store.version(name)
            committed = None if base is None else base.tables.get(name)
            if committed is None:
                log.warning("lake table without a committed version: emptied", extra={"table": name,
                                                                                     "unit": self.spec.name})
                self.store.empty(name)
            elif latest > committed:
                log.warning("rolling back uncommitted table versions", extra={
                    "table": name, "unit": self.spec.name, "from_version": latest, "to_version": committed})
                self.store.restore(name, committed)
        return UnitWriter(self, base)


class UnitWriter:
    """Writes of one update of a unit; nothing is visible until `commit`."""

    def __init__(self, point: CommitPoint, base: Manifest | None) -> None:
        self.point, self.base = point, base
        self.store = point.store
        self.written: dict[str, int] = {}

    @property
    def snapshot(self) -> Snapshot:
        """The committed state this update starts from."""
        return self.point.snapshot(self.base)

    def version(self, name: str) -> int | None:
        """The version of `name` this update will commit (written now, or carried over)."""
        self.point.snapshot(self.base)._check(name)
        if name in self.written:
            return self.written[name]
        return None if self.base is None else self.base.tables.get(name)

    def read_arrow(self, name: str, **kwargs: Any) -> pa.Table:
        """`name` as this update has left it so far."""
        version = self.version(name)
        if version is None:
            raise LakeError(name, "not written yet")
        return self.store.read_arrow(name, version=version, **kwargs)

    def record(self, result: CommitResult) -> CommitResult:
        self.point.snapshot(self.base)._check(result.table)
        self.written[result.table] = result.version
        return result

    def overwrite(self, name: str, data: Any, **kwargs: Any) -> CommitResult:
        return self.record(self.store.overwrite(name, data, **kwargs))

    def append(self, name: str, data: Any, **kwargs: Any) -> CommitResult:
        return self.record(self.store.append(name, data, **kwargs))

    def overwrite_where(self, name: str, data: Any, **kwargs: Any) -> CommitResult:
        return self.record(self.store.overwrite_where(name, data, **kwargs))

    def delete_where(self, name: str, **kwargs: Any) -> CommitResult:
        result = self.store.delete_where(name, **kwargs)
        return self.record(result) if result.version >= 0 else result

    def commit(self, *, batch_id: int, kind: str, state: Mapping[str, Any] | None = None) -> Manifest:
        """Commit the manifest: the one step that makes this update visible."""
        tables = {n: v for n in self.point.spec.tables if (v := self.version(n)) is not None}
        manifest = Manifest(unit=self.point.spec.name, version=(self.base.version if self.base else 0) + 1,
                            batch_id=batch_id, kind=kind, tables=tables, state=dict(state or {}),
                            created_at=dt.datetime.now(dt.UTC))
        row = {"unit": manifest.unit, "version": manifest.version, "batch_id": manifest.batch_id,
               "kind": manifest.kind, "tables": json.dumps(tables, sort_keys=True),
               "state": json.dumps(manifest.state, sort_keys=True, default=_json_default),
               "created_at": manifest.created_at}
        self.store.overwrite(self.point.spec.manifest_table, pa.Table.from_pylist([row], schema=MANIFEST_SCHEMA))
        log.info("unit committed", extra={"unit": manifest.unit, "version": manifest.version,
                                          "batch_id": batch_id, "kind": kind})
        self.point._cache.clear()
        return manifest


def _manifest(row: Mapping[str, Any]) -> Manifest:
    return Manifest(unit=row["unit"], version=int(row["version"]), batch_id=int(row["batch_id"]), kind=row["kind"],
                    tables={k: int(v) for k, v in json.loads(row["tables"]).items()},
                    state=json.loads(row["state"] or "{}"), created_at=row["created_at"])


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
