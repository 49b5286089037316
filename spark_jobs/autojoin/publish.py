"""Publish the precomputed transformation lists (`catalog.search.autojoin.lists`) inside a batch's
publish transaction, after the tables and columns: a kill leaves the previous lists whole, and the
rerun of the publish makes them.

Reads the lake as the batch left it (`store`): the token samples of every column (the candidates
are ranked again from each column's first tokens, which a batch may change for any list through
the rare q-grams' counts) and, for the pairs to learn, the bronze cells of their tables
only (one read per bucket holding them). Auto-Join has no lake tables of its own.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Connection, select

from catalog.core.identity import table_bucket
from catalog.core.settings import Settings
from catalog.db.models import CatalogColumn, CatalogTable
from catalog.db.models.base import text_key
from catalog.search.autojoin.candidates import eligible, transform_candidates
from catalog.search.autojoin.lists import refresh_transform_lists
from catalog.search.autojoin.settings import autojoin_settings
from catalog.search.autojoin.tables import cells_columns
from catalog.search.autojoin.transform import sampled_tokens
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.bronze import CELLS
from spark_jobs.lake.store import LakeStore

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from spark_jobs.family import FamilyPublisher

_CHUNK = 500  # column keys per SELECT ... IN (...)


def transform_lists_publisher(settings: Settings) -> FamilyPublisher:
    """The publisher of the transformation lists with these settings (`[index.autojoin]`, and
    the cells' buckets to read a table from)."""

    def publish_transform_lists(session: Session, store: LakeStore, batch: ChangeBatch | None) -> dict[str, int]:
        """A batch's lists (`batch` None after a rebuild or for the backlog: no table changed,
        pending lists are learned)."""
        touched = () if batch is None else batch.touched
        return refresh_lists(session.connection(), store, settings, touched, backlog=batch is None)

    return publish_transform_lists


def refresh_lists(
    conn: Connection, store: LakeStore, settings: Settings, touched: Collection[str] | None, *, backlog: bool = True
) -> dict[str, int]:
    """Bring the lists to the lake `store` reads, the programs of pairs of tables not `touched`
    kept (`touched` None: every pair learned again, a full build); without `backlog`, the lists
    an earlier publish left pending wait (`refresh_transform_lists`)."""
    cfg = autojoin_settings(settings)
    tokens = sampled_tokens(store, cfg.list_tokens, ["column_id", "table_id", "token"])
    if tokens is None:
        return {}
    n_rows = {t: n or 0 for t, n in conn.execute(select(CatalogTable.table_id, CatalogTable.n_rows)).tuples()}
    candidates = transform_candidates(eligible(tokens, n_rows, cfg.list_max_rows), cfg)
    buckets = settings.index.cells_buckets
    return refresh_transform_lists(
        conn, candidates, lambda ids: _read_columns(conn, store, ids, buckets), touched, cfg, backlog=backlog
    )


def _read_columns(
    conn: Connection, store: LakeStore, column_ids: Collection[str], n_buckets: int
) -> Mapping[str, tuple[str, pa.Array]]:
    """(header, values as landed) of each column, read from bronze cells, one read per bucket."""
    statement = select(CatalogColumn.column_id, CatalogColumn.table_id, CatalogColumn.position, CatalogColumn.header)
    keys = sorted(text_key(c) for c in column_ids)
    wanted: dict[str, list[tuple[str, int, str]]] = {}
    for i in range(0, len(keys), _CHUNK):
        where = CatalogColumn.column_key.in_(keys[i : i + _CHUNK])
        for column_id, table_id, position, header in conn.execute(statement.where(where)).tuples():
            wanted.setdefault(table_id, []).append((column_id, position, header))
    by_bucket: dict[int, list[str]] = {}
    for table_id in sorted(wanted):
        by_bucket.setdefault(table_bucket(table_id, n_buckets), []).append(table_id)
    out: dict[str, tuple[str, pa.Array]] = {}
    for bucket, table_ids in sorted(by_bucket.items()):
        where_cells: dict[str, list[Any]] = {"bucket": [bucket], "table_id": table_ids}
        cells = store.read_arrow(CELLS, columns=["table_id", "row", "col", "value"], where=where_cells)
        for table_id in table_ids:
            mine = cells.filter(pc.equal(cells["table_id"], table_id))
            columns = cells_columns(mine, [p for _, p, _ in wanted[table_id]])
            out.update({c: (header, columns[p]) for c, p, header in wanted[table_id]})
    return out
