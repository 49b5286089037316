"""Silver `keys` and `key_searches`: each table's unique and near-unique columns and its minimal
unique column combinations of up to three columns.

Candidate columns are *complete* (no null or null-like value, as a primary key would be) and not
float measures or empty (`inferred_type` not decimal/empty in silver `column_profiles`). Values
are compared as raw text.

* A single column is an exact key when all its values differ, and a near-unique (approximate,
  `exact=False`) key when distinct / rows >= `NEAR_UNIQUE_MIN` (0.99).
* A pair or triple is reported only when it is unique and none of its subsets is (a *minimal*
  unique column combination). The search goes level by level over the non-unique columns (Apriori
  pruning: a triple is tried only if its three pairs are not unique), skips combinations whose
  distinct-count product is below the row count (they cannot be unique), and checks a pair only on
  the rows whose first column repeats and a triple only on the rows whose pair repeats (stripped
  partitions, as in TANE/HyUCC). Work is bounded by `MAX_WORK` row visits per table, each check
  counting `CHECK_OVERHEAD` more, and at most `MAX_KEYS` keys are kept; when a bound is reached the
  search stops, keeps the keys found so far (still minimal) and records
  `search_complete = false` in `key_searches` (published as `tables.keys_search_complete`).
* `score` ranks likely real keys: uniqueness × (0.4 identifier-like names + 0.3 type weight +
  0.2 / number of columns + 0.1 leftmost position). Names with an id/key/code/number word score 1,
  time words (year, month, date, hour…) 0.7 inside composite keys; identifier columns weigh 1,
  integers 0.8, dates 0.7, categorical 0.5, text 0.3, booleans 0.2.

The search itself is `catalog.core.keys` (numpy, shared with the n-ary search's query tables);
it runs per table on the executors (`applyInArrow` grouped by table_id): each table's
candidate columns are dictionary-encoded to integer codes and checked with numpy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F  # noqa: N812

from catalog.core.identity import table_bucket
from catalog.core.keys import MAX_WORK, KeyColumn, minimal_keys
from catalog.core.settings import Settings
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.bronze import CELLS
from spark_jobs.lake.commit_point import UnitSpec, applied_batch, batch_store, begin, commit
from spark_jobs.lake.frames import local_frame
from spark_jobs.lake.job_main import batch_job_main
from spark_jobs.lake.store import CommitResult, LakeStore
from spark_jobs.profile.profiles import COLUMN_PROFILES, DRIVER_MAX_CELLS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

KEYS = "keys"
KEY_SEARCHES = "key_searches"
KEYS_UNIT = UnitSpec("keys", (KEYS, KEY_SEARCHES))
EXCLUDED_TYPES = frozenset({"decimal", "empty"})

KEYS_SCHEMA = pa.schema(
    [
        ("table_id", pa.string()),
        ("bucket", pa.int32()),
        ("columns", pa.list_(pa.string())),
        ("exact", pa.bool_()),
        ("uniqueness", pa.float64()),
        ("score", pa.float64()),
        ("batch_id", pa.int64()),
    ]
)
SEARCHES_SCHEMA = pa.schema(
    [
        ("table_id", pa.string()),
        ("bucket", pa.int32()),
        ("search_complete", pa.bool_()),
        ("n_candidates", pa.int32()),
        ("n_checked", pa.int64()),
        ("work", pa.int64()),
        ("batch_id", pa.int64()),
    ]
)
_UDF_SCHEMA = (
    "table_id string, columns array<string>, exact boolean, uniqueness double, score double, "
    "search_complete boolean, n_candidates int, n_checked long, work long"
)


# ---------------------------------------------------------------------------------------------- Spark side
def _keys_of_table(table: pa.Table, *, meta: dict[str, Any], max_work: int) -> pa.Table:
    """applyInArrow body: one table's cells (row, col, value) of its candidate columns -> key rows
    and one search row (columns = null)."""
    table_id = table.column("table_id")[0].as_py()
    info = meta[table_id]
    n_rows = info["n_rows"]
    table = table.sort_by([("col", "ascending"), ("row", "ascending")])
    cols = table.column("col").to_numpy()
    starts = np.flatnonzero(np.r_[True, cols[1:] != cols[:-1]])
    ends = np.r_[starts[1:], cols.size]
    candidates = []
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        pos = int(cols[s])
        if e - s != n_rows:  # a ragged column cannot be compared row by row
            continue
        encoded = pc.dictionary_encode(table.column("value").slice(s, e - s)).combine_chunks()
        header, inferred_type = info["columns"][pos]
        candidates.append(
            KeyColumn(header, pos, inferred_type, encoded.indices.to_numpy().astype(np.int64), len(encoded.dictionary))
        )
    search = minimal_keys(candidates, n_rows, n_columns=info["n_columns"], max_work=max_work)
    rows = [
        {
            "table_id": table_id,
            "columns": list(k.columns),
            "exact": k.exact,
            "uniqueness": k.uniqueness,
            "score": k.score,
        }
        for k in search.keys
    ]
    rows.append(
        {
            "table_id": table_id,
            "search_complete": search.complete,
            "n_candidates": len(candidates),
            "n_checked": search.n_checked,
            "work": search.work,
        }
    )
    schema = pa.schema(
        [
            ("table_id", pa.string()),
            ("columns", pa.list_(pa.string())),
            ("exact", pa.bool_()),
            ("uniqueness", pa.float64()),
            ("score", pa.float64()),
            ("search_complete", pa.bool_()),
            ("n_candidates", pa.int32()),
            ("n_checked", pa.int64()),
            ("work", pa.int64()),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)


def _table_udf(meta: dict[str, Any], max_work: int) -> Callable[[pa.Table], pa.Table]:
    """`_keys_of_table` bound to this batch's metadata, with the type hints applyInArrow reads."""

    def keys_of_table(table: pa.Table) -> pa.Table:
        return _keys_of_table(table, meta=meta, max_work=max_work)

    return keys_of_table


def detect(
    spark: SparkSession,
    store: LakeStore,
    settings: Settings,
    batch: ChangeBatch,
    *,
    max_work: int = MAX_WORK,
    driver_max_cells: int = DRIVER_MAX_CELLS,
) -> tuple[pa.Table, pa.Table]:
    """(keys, key_searches) of the batch's added tables, from silver profiles and bronze cells.
    A batch of at most `driver_max_cells` candidate cells is searched in this process from an
    Arrow read (same per-table function, no Spark job: small incremental batches skip its fixed
    cost); larger ones on the executors."""

    if not batch.added:
        return KEYS_SCHEMA.empty_table(), SEARCHES_SCHEMA.empty_table()
    n_buckets = settings.index.cells_buckets
    buckets = sorted({table_bucket(t, n_buckets) for t in batch.added})
    profiles = store.read_arrow(COLUMN_PROFILES, where={"bucket": buckets, "table_id": list(batch.added)})
    meta: dict[str, Any] = {}
    eligible: list[tuple[str, int]] = []
    for p in profiles.to_pylist():
        info = meta.setdefault(p["table_id"], {"n_rows": p["row_count"], "n_columns": 0, "columns": {}})
        info["n_columns"] = max(info["n_columns"], p["position"])
        if p["inferred_type"] not in EXCLUDED_TYPES and p["null_count"] + p["empty_count"] == 0:
            info["columns"][p["position"]] = (p["header"], p["inferred_type"])
            eligible.append((p["table_id"], p["position"]))
    found: list[dict[str, Any]] = []
    n_cells = sum(meta[t]["n_rows"] for t, _ in eligible)
    if eligible and n_cells <= driver_max_cells:
        cells_arrow = store.read_arrow(
            CELLS, columns=["table_id", "row", "col", "value"], where={"bucket": buckets, "table_id": list(batch.added)}
        )
        for table_id in sorted({t for t, _ in eligible}):
            cols = [c for t, c in eligible if t == table_id]
            mask = pc.and_(
                pc.equal(cells_arrow["table_id"], table_id), pc.is_in(cells_arrow["col"], pa.array(cols, pa.int32()))
            )
            part = cells_arrow.filter(mask)
            if part.num_rows:
                found.extend(_keys_of_table(part, meta=meta, max_work=max_work).to_pylist())
    elif eligible:
        wanted = local_frame(spark, eligible, "table_id string, col int")
        cells = (
            store.read(CELLS, where={"bucket": buckets, "table_id": list(batch.added)})
            .select("table_id", "row", "col", "value")
            .join(F.broadcast(wanted), ["table_id", "col"])
        )
        found = [
            r.asDict()
            for r in cells.groupBy("table_id").applyInArrow(_table_udf(meta, max_work), _UDF_SCHEMA).collect()
        ]
    searched = {r["table_id"]: r for r in found if r["columns"] is None}
    keys = [
        {**r, "bucket": table_bucket(r["table_id"], n_buckets), "batch_id": batch.batch_id}
        for r in found
        if r["columns"] is not None
    ]
    keys.sort(key=lambda r: (r["table_id"], -r["score"], r["columns"]))
    searches = []
    for table_id in sorted(meta):
        r = searched.get(table_id) or {"search_complete": True, "n_candidates": 0, "n_checked": 0, "work": 0}
        searches.append(
            {
                "table_id": table_id,
                "bucket": table_bucket(table_id, n_buckets),
                "search_complete": r["search_complete"],
                "n_candidates": r["n_candidates"],
                "n_checked": r["n_checked"],
                "work": r["work"],
                "batch_id": batch.batch_id,
            }
        )
    return (pa.Table.from_pylist(keys, schema=KEYS_SCHEMA), pa.Table.from_pylist(searches, schema=SEARCHES_SCHEMA))


def run(spark: SparkSession, settings: Settings, batch: ChangeBatch) -> dict[str, CommitResult]:
    """Replace the keys (and key searches) of the batch's touched tables by those of its added tables."""
    store = batch_store(settings.lake, spark, batch.batch_id)
    if applied_batch(store, KEYS_UNIT) >= batch.batch_id:  # an idempotent rerun
        return {name: CommitResult(name, store.version(name), skipped=True) for name in (KEYS, KEY_SEARCHES)}
    base = begin(store, KEYS_UNIT)
    buckets = sorted({table_bucket(t, settings.index.cells_buckets) for t in batch.touched})
    keys, searches = detect(spark, store, settings, batch)
    log.info(
        "keys detected",
        extra={
            "n_tables": searches.num_rows,
            "n_keys": keys.num_rows,
            "n_cut_short": searches.num_rows - sum(searches["search_complete"].to_pylist()),
        },
    )
    out = {}
    for name, data in ((KEYS, keys), (KEY_SEARCHES, searches)):
        out[name] = store.overwrite_where(
            name,
            data,
            column="table_id",
            values=list(batch.touched),
            partitions={"bucket": buckets},
            partition_by=["bucket"],
        )
    commit(store, KEYS_UNIT, base, batch_id=batch.batch_id, kind="update")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    return batch_job_main("detect_keys", run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
