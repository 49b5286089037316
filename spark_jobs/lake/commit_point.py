"""The one commit point of every unit of lake state (bronze, each pipeline stage, each index family).

A *unit* owns a few Delta tables that only make sense together: JOSIE's dictionary, sets, posting
lists, change log and state; the relate stage's joinable and unionable lists with their change
logs; bronze's datasets, cells and change batches. Updating a unit writes a new version of each
table it changes, one Delta commit per table, and then commits one *manifest*: a one-row Delta
table (`<unit>_manifest`) naming the version of every table of the unit, the last change batch
the state includes, and a small JSON state. The manifest commit is the unit's only commit point:

* **Readers** never read a unit's tables at their latest version: a `LakeStore` pins each table to
  the version the current manifest names (or, with `at_batch`, the manifest in force after a given
  batch: the catalog publish reads exactly that state, never whatever the lake holds at the
  moment). A table version written after the manifest is invisible.
* **The next writer** starts with `begin`, which rolls back every table whose latest version is
  newer than the manifest's (a writer killed between two table commits left it there) with Delta's
  RESTORE, and drops a table no manifest ever committed (a first build killed half-way), so its
  appends and partial rewrites build on the committed state.

So a kill at any point leaves the previous manifest in force, whatever runs next: the same
operation again, another batch, or a rebuild. Manifests are never deleted: the Delta history of
`<unit>_manifest` is the unit's history.

Writers must hold the lake lock (`spark_jobs.lake.lock`): the commit point makes a unit crash-safe,
the lock makes it single-writer.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_jobs.lake import faults
from spark_jobs.lake.manifest import ABSENT, Manifest, manifest_table
from spark_jobs.lake.store import LakeStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UnitSpec:
    """A unit of lake state: its name and the Delta tables it owns."""

    name: str
    tables: tuple[str, ...]


def current(store: LakeStore, spec: UnitSpec) -> Manifest | None:
    """The unit's committed state (None before it was ever begun)."""
    return store.manifest(spec.name)


def applied_batch(store: LakeStore, spec: UnitSpec) -> int:
    """The last change batch the unit's committed state includes (0: none)."""
    manifest = current(store, spec)
    return 0 if manifest is None else manifest.batch_id


def history(store: LakeStore, unit: str) -> list[Manifest]:
    """Every manifest of `unit`, oldest first."""
    name = manifest_table(unit)
    if not store.physically_exists(name):
        return []
    out = []
    for version in range(store.latest_version(name) + 1):
        manifest = store.manifest(unit, version)
        if manifest is not None:
            out.append(manifest)
    return out


def manifest_at_batch(store: LakeStore, unit: str, batch_id: int) -> Manifest | None:
    """The newest manifest of `unit` whose state includes no batch after `batch_id`."""
    name = manifest_table(unit)
    if not store.physically_exists(name):
        return None
    for version in range(store.latest_version(name), -1, -1):
        manifest = store.manifest(unit, version)
        if manifest is not None and manifest.batch_id <= batch_id:
            return manifest
    return None


def at_batch(store: LakeStore, batch_id: int) -> LakeStore:
    """A store whose readers see every unit as it was right after `batch_id` was applied."""
    pins: dict[str, int] = {}
    for unit in store.unit_names():
        manifest = manifest_at_batch(store, unit, batch_id)
        if manifest is not None:
            pins.update(manifest.pins())
        else:  # the unit did not exist yet at that batch: none of its tables either
            first = store.manifest(unit)
            pins.update(dict.fromkeys(first.tables if first else {}, ABSENT))
    return store.with_pins(pins)


def begin(store: LakeStore, spec: UnitSpec) -> Manifest:
    """Start an update of the unit from its committed state and return that state's manifest.

    Rolls back table versions written after the manifest; a unit seen for the first time gets an
    empty manifest (version 0) first, so readers know its tables are not committed yet."""
    base = store.manifest(spec.name)
    if base is None:
        base = Manifest(
            unit=spec.name, version=0, batch_id=0, kind="created", tables=dict.fromkeys(spec.tables, ABSENT)
        )
        _write_manifest(store, base)
    elif set(spec.tables) - set(base.tables):  # a table added to the unit since its last commit
        base = dataclasses.replace(base, tables={**dict.fromkeys(spec.tables, ABSENT), **base.tables})
    for name in spec.tables:
        store.pin(name, base.tables[name])
        if not store.physically_exists(name):
            continue
        committed = base.tables[name]
        if committed == ABSENT:
            log.warning("dropping a lake table no commit point names", extra={"table": name, "unit": spec.name})
            store.drop(name)
        elif store.latest_version(name) != committed:
            log.warning(
                "rolling back uncommitted table versions",
                extra={
                    "table": name,
                    "unit": spec.name,
                    "from_version": store.latest_version(name),
                    "to_version": committed,
                },
            )
            store.restore(name, committed)
    return base


def commit(
    store: LakeStore,
    spec: UnitSpec,
    base: Manifest,
    *,
    batch_id: int,
    kind: str,
    state: Mapping[str, Any] | None = None,
) -> Manifest:
    """Commit the unit's manifest: the one step that makes the update visible. Table versions are
    the store's pins (its own writes advanced them)."""
    tables = {name: _pin(store, name) for name in spec.tables}
    manifest = Manifest(
        unit=spec.name,
        version=base.version + 1,
        batch_id=batch_id,
        kind=kind,
        tables=tables,
        state=dict(base.state if state is None else state),
        created_at=dt.datetime.now(dt.UTC),
    )
    faults.checkpoint(f"manifest:{spec.name}")
    _write_manifest(store, manifest)
    store.settle(spec.tables)
    log.info(
        "unit committed", extra={"unit": spec.name, "version": manifest.version, "batch_id": batch_id, "kind": kind}
    )
    return manifest


def _pin(store: LakeStore, name: str) -> int:
    pin = store.pinned_version(name)
    return ABSENT if pin is None else pin


def _write_manifest(store: LakeStore, manifest: Manifest) -> None:
    store.overwrite(manifest_table(manifest.unit), manifest.to_arrow())


def batch_store(root: str, spark: object | None, batch_id: int) -> LakeStore:
    """The store a stage uses for `batch_id`: every unit as it was right after that batch (so a
    stage never sees a later batch's bronze or silver), its own unit re-pinned by `begin`."""
    return at_batch(LakeStore(root, spark), batch_id)  # type: ignore[arg-type]
