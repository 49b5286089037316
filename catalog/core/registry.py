"""The index families: one list that every part of Juncture derives its family-specific parts from.

An index family is a way to answer a search from precomputed lake state: JOSIE today; LSH
Ensemble, MATE, PEXESO and Auto-Join are added the same way. A family is two halves that never
import each other, named here by "module:attribute" so that this core module imports nothing:

* `pipeline`: its `spark_jobs.family.IndexFamily` (lake tables as one commit-point unit, the
  pipeline stage that applies a change batch, the rebuild, the dirty share, the catalog publisher);
  None for a family with no index of its own (it searches over other families' state);
* `search`: its `catalog.search.family.SearchFamily` (catalog models, search methods and kinds);
* `settings`: its settings dataclass, read from `[index.<name>]` in juncture.toml;
* `migrations`: the folder of its Alembic revisions and the newest one (`migration_head`), when its
  catalog tables are not in the core migrations.

Adding a family = a folder under `spark_jobs/`, a folder under `catalog/search/`, one migration,
and one line in `BUILTIN` (or, outside this repository, an entry point in the `juncture.families`
group whose value is a `FamilyEntry`, or `register()` at run time, as the tests' toy family does).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

ENTRY_POINT_GROUP = "juncture.families"


@dataclass(frozen=True)
class FamilyEntry:
    name: str
    search: str
    pipeline: str | None = None
    settings: str | None = None
    migrations: str | None = None
    migration_head: str | None = None


BUILTIN: tuple[FamilyEntry, ...] = (
    FamilyEntry(
        "josie",
        search="catalog.search.josie.family:FAMILY",
        pipeline="spark_jobs.josie.family:FAMILY",
        settings="catalog.search.josie.settings:JosieSettings",
    ),
    FamilyEntry(
        "lshensemble",
        search="catalog.search.lshensemble.family:FAMILY",
        pipeline="spark_jobs.lshensemble.family:FAMILY",
        settings="catalog.search.lshensemble.settings:LshEnsembleSettings",
    ),
    FamilyEntry(
        "mate",
        search="catalog.search.mate.family:FAMILY",
        pipeline="spark_jobs.mate.family:FAMILY",
        settings="catalog.search.mate.settings:MateSettings",
    ),
    FamilyEntry(
        "pexeso",
        search="catalog.search.pexeso.family:FAMILY",
        pipeline="spark_jobs.pexeso.family:FAMILY",
        settings="catalog.search.pexeso.settings:PexesoSettings",
    ),
    FamilyEntry(
        "autojoin",
        search="catalog.search.autojoin.family:FAMILY",
        pipeline=None,  # no index of its own: it joins tables the lake (or the user) already has
        settings="catalog.search.autojoin.settings:AutojoinSettings",
    ),
)

_registered: dict[str, FamilyEntry] = {}
_plugins: tuple[FamilyEntry, ...] | None = None


def families() -> tuple[FamilyEntry, ...]:
    """Every family, built-in first, then installed plugins, then ones registered at run time."""
    global _plugins
    if _plugins is None:
        _plugins = tuple(ep.load() for ep in entry_points(group=ENTRY_POINT_GROUP))
    out: dict[str, FamilyEntry] = {}
    for entry in (*BUILTIN, *_plugins, *_registered.values()):
        out.setdefault(entry.name, entry)
    return tuple(out.values())


def family(name: str) -> FamilyEntry:
    for entry in families():
        if entry.name == name:
            return entry
    raise KeyError(name)


def register(entry: FamilyEntry) -> None:
    """Add a family for this process (a plugin not installed as a package, or a test's)."""
    if entry.name in {e.name for e in families()}:
        raise ValueError(f"an index family named {entry.name!r} is already registered")
    _registered[entry.name] = entry


def unregister(name: str) -> None:
    _registered.pop(name, None)


def load(ref: str) -> Any:
    """The object a "module:attribute" reference names."""
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)
