"""PEXESO's serving half as an index family: its catalog tables and `juncture search semantic`.
The search code (numpy, pyarrow) loads when a search runs, not when a command builds its parser."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from catalog.search.family import SearchFamily, SearchKind, read_values
from catalog.search.pexeso import METHODS
from catalog.search.pexeso.models import PexesoColumn, PexesoList, PexesoMeta, PexesoPartition

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from catalog.search.pexeso.settings import PexesoSettings

COLUMNS = ("joinability", "n_matched", "table_id", "column", "column_id")
DEFAULT_TAU = 0.06
DEFAULT_T = 0.6


@dataclass(frozen=True)
class SemanticRequest:
    """A query column's raw values (normalised as the lake's tokens were) and the thresholds: `tau`
    a fraction of the largest distance (2), `threshold` (T) a fraction of the query's values."""

    values: Sequence[str | None]
    tau: float = DEFAULT_TAU
    threshold: float = DEFAULT_T
    k: int | None = 10
    method: str = "pexeso"
    hold_index: bool = False
    # load the index at most this many MB of lake vectors at a time, partition by partition,
    # skipping the partitions out of the query's reach (`[index.pexeso] memory_budget_mb`; None: all
    # of it at once). A process holding the index (`hold_index`) holds it whole when it fits.
    memory_budget_mb: float | None = None


def search_rows(conn: Connection, request: SemanticRequest, conf: PexesoSettings) -> list[dict[str, Any]]:
    """The answers as rows, best first, from the whole index or, with a memory budget, from its
    partitions one at a time (the same answers). The query is embedded as `conf` says
    (`[index.pexeso] model_path`), refused when that is not how the published index was embedded."""
    from catalog.core.identity import normalize_token  # deferred: the search loads when it runs
    from catalog.search.pexeso.search import Query, search, search_partitions  # deferred: as above
    from catalog.search.pexeso.source import embedder_for, fits, load_index, partitions  # deferred: as above

    values = [normalize_token(v) for v in request.values]
    budget = request.memory_budget_mb
    options: dict[str, Any] = {"tau": request.tau, "threshold": request.threshold, "k": request.k}
    options["method"] = request.method
    if budget is None or (request.hold_index and fits(conn, budget)):
        loaded = load_index(conn, hold=request.hold_index)
        found = search(loaded.index, Query.embed(values, embedder_for(loaded.index.spec, conf)), **options)
    else:
        parts = partitions(conn, budget)
        query = Query.embed(values, embedder_for(parts.spec, conf))
        loads = (parts.load(load) for load in parts.plan(query.vectors, request.tau).loads)
        found = search_partitions(loads, query, **options)
    return [m.as_dict() for m in found]


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--values", required=True, metavar="FILE", help="the query column, one value a line ('-': stdin)"
    )
    parser.add_argument(
        "--tau",
        type=float,
        default=DEFAULT_TAU,
        help=f"distance threshold as a fraction of the largest distance, 2 (default {DEFAULT_TAU})",
    )
    parser.add_argument(
        "--T",
        dest="threshold",
        type=float,
        default=DEFAULT_T,
        help=f"share of the query's values (duplicates counted) a column must match (default {DEFAULT_T})",
    )
    parser.add_argument("--k", type=int, default=10, help="answers wanted (default 10)")
    parser.add_argument(
        "--method",
        choices=METHODS,
        default="pexeso",
        help="pexeso: pivot grid, block and verify (default); brute: every distance (the same answers)",
    )
    parser.add_argument(
        "--memory-budget",
        type=float,
        default=None,
        metavar="MB",
        help="load the lake's vectors at most this many MB at a time, partition by partition, for a lake "
        "that does not fit in memory (default: [index.pexeso] memory_budget_mb; the same answers)",
    )


def _run(args: argparse.Namespace, conn: Connection) -> list[dict[str, Any]]:
    from catalog.core.settings import load_settings  # deferred: the search loads when it runs
    from catalog.search.pexeso.settings import pexeso_settings  # deferred: as above

    conf = pexeso_settings(load_settings())
    budget = args.memory_budget if args.memory_budget is not None else conf.memory_budget_mb
    request = SemanticRequest(
        read_values(args.values), args.tau, args.threshold, args.k, args.method, memory_budget_mb=budget
    )
    return search_rows(conn, request, conf)


FAMILY = SearchFamily(
    name="pexeso",
    models=(PexesoColumn, PexesoList, PexesoMeta, PexesoPartition),
    kinds=(
        SearchKind(
            "semantic",
            "columns joining with yours despite typos, case, punctuation and format (PEXESO; exact)",
            _arguments,
            _run,
            COLUMNS,
        ),
    ),
)
