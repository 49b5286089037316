"""The serving half of an index family (see `catalog.core.registry`): what the CLI (and any other
surface) needs to answer searches from the family's catalog tables. It imports no Spark, Airflow
or pipeline code. Every `juncture` process imports every family's module to build its parser, so a
family module imports its models and little else: a method or kind imports its search code (LSH
Ensemble's pulls in pyarrow) when it runs.

* `models`: the family's SQLAlchemy models (importing them registers its tables in the metadata);
* `join_methods`: ways to answer `search join` (top-k lake columns by distinct-value overlap with
  a query column), each a `--method` choice;
* `kinds`: further `juncture search <kind>` subcommands (containment, n-ary keys, semantic joins).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import inspect, select

from catalog.core.errors import UserError
from catalog.core.registry import families, load

if TYPE_CHECKING:
    from sqlalchemy import Connection

T = TypeVar("T", "JoinMethod", "SearchKind")


@dataclass(frozen=True)
class JoinRequest:
    values: Sequence[str | None]  # the query column's raw cell values
    k: int = 10
    exclude_column_id: str | None = None  # the query column itself, when it is in the lake
    # a long-running process (the API) asks: keep the index's in-memory parts between requests,
    # reloaded when a new index version is published (a CLI process answers once and exits)
    hold_index: bool = False


@dataclass(frozen=True)
class JoinMethod:
    name: str
    help: str
    # rows of (overlap, column_id, table_id, column), best first
    run: Callable[[Connection, JoinRequest], list[dict[str, Any]]]
    # fit the method's cost constants on this catalog and store them (None: it has none)
    refit: Callable[[Connection], dict[str, Any]] | None = None
    # whether its answers are always the exact top k (an approximate method's may miss columns)
    exact: bool = True


@dataclass(frozen=True)
class SearchKind:
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Connection], Any]  # rows (or one mapping) to print
    columns: Sequence[str] | None = None


@dataclass(frozen=True)
class SearchFamily:
    name: str
    models: tuple[type, ...] = ()
    join_methods: tuple[JoinMethod, ...] = ()
    kinds: tuple[SearchKind, ...] = field(default_factory=tuple)


def search_families() -> list[SearchFamily]:
    """The serving half of every registered family, in registry order."""
    return [load(entry.search) for entry in families()]


def join_methods() -> dict[str, JoinMethod]:
    """Every `search join --method`, by name (the first family registering a name wins)."""
    return _by_name(m for family in search_families() for m in family.join_methods)


def search_kinds() -> dict[str, SearchKind]:
    """Every further `search <kind>`, by name (the first family registering a name wins)."""
    return _by_name(k for family in search_families() for k in family.kinds)


def _by_name(items: Iterable[T]) -> dict[str, T]:
    out: dict[str, T] = {}
    for item in items:
        out.setdefault(item.name, item)
    return out


def read_values(path: str) -> list[str]:
    """One value per line from a file or standard input ('-')."""
    if path == "-":
        return sys.stdin.read().splitlines()
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        raise UserError(f"--values: no such file {path!r}") from None
    except OSError as e:
        raise UserError(f"--values: cannot read {path!r}: {e.strerror or e}") from None


def published_facts(conn: Connection, meta: Any, label: str) -> dict[str, str]:
    """A family's published key/value facts (its `<family>_meta` model `meta`, with `key` and
    `value` columns), refused with the user's next step when the catalog has no such table or no
    index version in it yet. `label` names the family in the message ("LSH Ensemble")."""
    if not inspect(conn).has_table(meta.__tablename__):
        raise UserError(f"the catalog has no {label} tables (run `juncture index`)")
    facts: dict[str, str] = dict(conn.execute(select(meta.key, meta.value)).tuples().all())
    if "index_version" not in facts:
        raise UserError(f"the catalog holds no {label} index yet (run `juncture index`)")
    return facts
