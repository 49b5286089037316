"""MATE's precomputed n-ary lists, computed in the lake by set-based Spark plans (the lookup that
reads them is `catalog.search.mate.lists`; docs/algorithms/mate.md, "Precomputed lists").

Which lists: each table's detected keys (the keys stage's `keys`) of 2 to `MAX_LIST_KEY` columns,
the best `KEYS_PER_TABLE` by score; a list holds the top `LIST_K` other tables by n-ary
joinability, ranked and tie-broken exactly as `juncture search nary` ranks them. Its query is the
table's own key tuples: the tokens at the key's columns of every row whose key cells all hold one,
made per table in numpy by a task per bucket of the posting lists (`key_tuples`: no shuffle).

One plan computes many lists at once (a search per list, as the catalog did before, spent 3.8 s a
list on a 2,300-table lake, most of it reading posting lists one token at a time):
1. each list's initial position: the key position whose values pair with the fewest lake items
   (Σ over tuples of the value's item count), `search nary`'s choice and its budget: a list that
   would pair more than `MAX_LIST_PAIRS` is not computed (its marker says so);
2. pairs: every tuple with every row of another table holding its initial value, the posting
   lists regrouped by row in Arrow (`cells_by_row`: a row's columns holding the token, one array);
3. verification: an equi-join on (table, row, token) per other key position. A row may hold a
   value in many columns and every choice of them is a mapping, so the matches each list would
   enumerate (the product of the arrays' sizes, summed) are counted first: a list of more than
   `MAX_LIST_MATCHES` (a key of small integers against a wide table of 0/1 columns gives billions)
   is not computed; the others' choices are enumerated, the injective ones kept;
4. J per (list, table, mapping) = the distinct tuples it matches; per table the best mapping
   (largest J, then smallest positions in key order); per list the top `LIST_K` tables.

A batch changes only what it can, exactly (the lists are exact top-k lists):
* lists of touched tables go; a list naming a touched table is computed again in full (its k+1-th
  table is unknown), as is every list of an added table and every list whose key is new;
* every other list can only gain added tables: its stored tuples are joined with the added tables'
  items alone and the answers merged in (a table outside a list was beaten by k tables that are
  all still there), unless the added tables take the list's pairs or matches over the per-list
  bounds: then it is marked over budget, as computing it again would mark it (the pairs per key
  position and the matches, the added tables' added to those the list's marker holds; where the
  pairs so bounded pass the bound, they are counted again over the lake, as a deleted table's
  cells may still be in them);
* a list an earlier run left pending stays pending (unless its table was touched): the backlog run
  after the batches computes it (`spark_jobs.orchestration.backlog`), with an empty batch.

Lake tables (part of the `mate` unit, so lists and index share one commit point):
`mate_lists` (small: every list's rows, rank 0 a marker, `version` the index version that last
changed the list, `matches` its verification's matches; the publish copies the lists whose marker
differs from the catalog's) and `mate_list_tuples` (each list's key tuples, partitioned by bucket,
read again only by batches that merge).
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import Window
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.pandas.types import from_arrow_schema

from catalog.core.identity import table_bucket
from catalog.core.settings import Settings
from catalog.search.mate.lists import (
    LIST_K,
    MAX_BATCH_PAIRS,
    MAX_LIST_MATCHES,
    MAX_LIST_PAIRS,
    MAX_RUN_PAIRS,
    OVER_BUDGET,
    PENDING,
    choose_listed,
)
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.bronze import DATASETS
from spark_jobs.lake.frames import local_frame, task_frame
from spark_jobs.lake.partition_tasks import partition_tables
from spark_jobs.lake.store import LakeStore
from spark_jobs.mate.tables import LISTS_SCHEMA, MATE_LIST_TUPLES, MATE_LISTS, MATE_POSTINGS, TUPLES_SCHEMA
from spark_jobs.profile.keys import KEYS
from spark_jobs.timing import PartTimes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

Listed = tuple[str, str]  # (table_id, key as JSON text)
ROW_CELLS_SCHEMA = pa.schema(
    [("table_id", pa.string()), ("token", pa.string()), ("row", pa.int32()), ("cols", pa.list_(pa.int32()))]
)
ROW_CELLS_CHUNK = 65_536  # rows per Arrow batch handed back to Spark
KEY_TUPLES_SCHEMA = pa.schema([("lid", pa.int32()), ("tokens", pa.list_(pa.string()))])
TASK_POSTINGS = 2_000_000  # posting lists a task reads at once: a bucket's tables in chunks of about this many


@dataclass(frozen=True)
class _Answer:
    table_id: str
    joinability: int
    mapping: str  # JSON: key column -> the table's column


# ---------------------------------------------------------------------- the stage's step
def update_lists(
    spark: SparkSession,
    store: LakeStore,
    settings: Settings,
    batch: ChangeBatch | None,
    version: int,
    *,
    backlog_run: bool = False,
    times: PartTimes | None = None,
) -> dict[str, int]:
    """Bring `mate_lists` to the index just written: every list (`batch` None, or no lists yet), else
    the batch's share; lists that change are stamped with the index `version`. An empty `batch`
    works on the backlog: the lists earlier runs left pending. A batch with changes computes only
    the lists its changes call for and leaves the backlog pending, so that its own publish is not
    held up by a first build's leftovers. A batch with changes, and a `backlog_run` after the
    batches, spend a batch's budget; the others a run's. Called by the MATE stage before its
    commit; `times` gets the seconds of its parts (list tuples, fresh lists, merged lists)."""
    times = times or PartTimes()
    headers = _headers(store)
    wanted = _wanted(store, headers)
    ids = {listed: i for i, listed in enumerate(sorted(wanted))}
    full = batch is None or not store.exists(MATE_LISTS)
    backlog = batch is None or full or batch.empty
    budget = MAX_BATCH_PAIRS if backlog_run or not backlog else MAX_RUN_PAIRS
    old = {} if full else _read_lists(store)
    touched = set() if batch is None else set(batch.touched)
    kept = {
        listed: rows
        for listed, rows in old.items()
        if listed in wanted
        and (rows[0]["joinability"] != PENDING or not backlog)
        and listed[0] not in touched
        and not any(r["candidate_table_id"] in touched for r in rows)  # names a touched table
    }
    fresh = sorted(set(wanted) - set(kept))
    # tables whose stored tuples change: those of fresh lists, of lists gone, and the touched
    changing = {t for t, _ in fresh} | {t for t, _ in set(old) - set(kept)} | touched
    which = [w for w in sorted(wanted) if w[0] in changing]  # holds every fresh list
    computed: list[dict[str, Any]] = []
    if full or which or changing & {t for t, _ in old}:  # else no stored tuple changes (a batch of unlisted tables)
        tuples = _tuples(spark, store, settings, ids, wanted, which).persist()
        try:
            with times.part("list tuples"):
                _write_tuples(store, settings, tuples, ids, sorted(changing), full=full)
            with times.part("fresh lists"):
                computed = _compute_fresh(spark, store, settings, wanted, ids, fresh, tuples, headers, version, budget)
        finally:
            tuples.unpersist()
    merged = 0
    mergeable = [listed for listed, rows in kept.items() if rows[0]["joinability"] >= 0]
    if batch is not None and batch.added and mergeable and not full:
        with times.part("merged lists"):
            merged = _merge_added(spark, store, settings, ids, mergeable, kept, sorted(batch.added), headers, version)
    rows = [r for listed in sorted(kept) for r in kept[listed]] + computed
    # new_schema: the lists of a lake written by an earlier release lack `matches`
    store.overwrite(MATE_LISTS, pa.Table.from_pylist(rows, schema=LISTS_SCHEMA), new_schema=True)
    markers = [r["joinability"] for r in rows if r["rank"] == 0]
    counts = {
        "mate_lists": len(wanted),
        "mate_lists_computed": sum(1 for r in computed if r["rank"] == 0 and r["joinability"] >= 0),
        "mate_lists_merged": merged,
        "mate_lists_over_budget": markers.count(OVER_BUDGET),
        "mate_lists_pending": markers.count(PENDING),
    }
    log.info("mate lists", extra=counts)
    return counts


def pending_lists(store: LakeStore) -> bool:
    """Whether some lists wait for a later run (a run's budget was spent before them)."""
    markers = store.read_arrow(MATE_LISTS, columns=["rank", "joinability"]).to_pylist()
    return any(r["rank"] == 0 and r["joinability"] == PENDING for r in markers)


# ---------------------------------------------------------------------- which lists
def _headers(store: LakeStore) -> dict[str, list[str]]:
    if not store.exists(DATASETS):
        return {}
    data = store.read_arrow(DATASETS, columns=["table_id", "headers"])
    return dict(zip(data.column("table_id").to_pylist(), data.column("headers").to_pylist(), strict=True))


def _wanted(store: LakeStore, headers: Mapping[str, list[str]]) -> dict[Listed, list[int]]:
    """(table_id, key JSON) -> the key's 1-based column positions ([] when a key column is not a
    header of the table: the list is empty) for every list the lake's keys call for."""
    if not store.exists(KEYS):
        return {}
    keys = store.read_arrow(KEYS, columns=["table_id", "columns", "score"]).to_pylist()
    keys.sort(key=lambda r: (r["table_id"], -r["score"], r["columns"]))
    out: dict[Listed, list[int]] = {}
    for table_id, listed in choose_listed((r["table_id"], r["columns"]) for r in keys).items():
        if table_id not in headers:
            continue
        for key in listed:
            names = headers[table_id]
            positions = [names.index(c) + 1 for c in key] if all(c in names for c in key) else []
            out[(table_id, json.dumps(list(key)))] = positions
    return out


def _read_lists(store: LakeStore) -> dict[Listed, list[dict[str, Any]]]:
    out: dict[Listed, list[dict[str, Any]]] = defaultdict(list)
    for r in (
        store.read_arrow(MATE_LISTS)
        .sort_by([("table_id", "ascending"), ("key", "ascending"), ("rank", "ascending")])
        .to_pylist()
    ):
        out[(r["table_id"], r["key"])].append(r)
    return dict(out)


# ---------------------------------------------------------------------- tuples
def cells_by_row(postings: pa.RecordBatch) -> pa.Table:
    """Posting lists (table_id, token, rows, cols; each list's cells in (row, column) order, as the
    index writes them) -> one row per (table_id, token, row): the row's columns holding the token.

    Arrow, not a Spark generate: Spark's code-generated explode hands on no row of a posting list
    before it has buffered them all, and one posting list can hold millions of cells (`0` in a wide
    table of 0/1 columns: 12 M cells, which ran a 4 GB driver out of heap). Grouped by row, that
    list is 8,190 rows."""
    lists = postings.column("rows")
    owner = pc.list_parent_indices(lists).to_numpy()
    rows = pc.list_flatten(lists).to_numpy()
    cols = pc.list_flatten(postings.column("cols"))
    new_row = np.r_[True, (owner[1:] != owner[:-1]) | (rows[1:] != rows[:-1])] if len(rows) else np.zeros(0, bool)
    starts = np.flatnonzero(new_row)
    first = pa.array(owner[starts])
    return pa.table(
        {
            "table_id": postings.column("table_id").take(first),
            "token": postings.column("token").take(first),
            "row": pa.array(rows[starts], pa.int32()),
            "cols": pa.ListArray.from_arrays(pa.array(np.r_[starts, len(rows)].astype(np.int32)), cols),
        },
        schema=ROW_CELLS_SCHEMA,
    )


def _by_row_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: `cells_by_row` of each batch, handed on in slices of bounded size."""
    for batch in batches:
        yield from cells_by_row(batch).to_batches(max_chunksize=ROW_CELLS_CHUNK)


def _row_cells(postings: DataFrame) -> DataFrame:
    """Posting lists -> (table_id, token, row, cols): `cells_by_row` on the executors."""
    frame = postings.select("table_id", "token", "rows", "cols")
    return frame.mapInArrow(_by_row_batches, from_arrow_schema(ROW_CELLS_SCHEMA))


def _postings(store: LakeStore, settings: Settings, table_ids: Sequence[str] | None) -> DataFrame:
    columns = ["table_id", "token", "rows", "cols"]
    if table_ids is None:
        return store.read(MATE_POSTINGS, columns=columns)
    buckets = sorted({table_bucket(t, settings.index.cells_buckets) for t in table_ids})
    return store.read(MATE_POSTINGS, columns=columns, where={"bucket": buckets, "table_id": list(table_ids)})


def _tuples(
    spark: SparkSession,
    store: LakeStore,
    settings: Settings,
    ids: Mapping[Listed, int],
    wanted: Mapping[Listed, list[int]],
    which: Sequence[Listed],
) -> DataFrame:
    """(lid, tokens) of the lists `which`: their tables' distinct complete key tuples. A task per
    bucket of `mate_postings` reads the posting lists of the bucket's listed tables itself (a
    table's are all in its bucket) and builds each list's tuples in numpy (`key_tuples`): no
    shuffle of the cells."""
    lists: dict[str, list[tuple[int, list[int]]]] = defaultdict(list)
    for listed in which:
        if wanted[listed]:
            lists[listed[0]].append((ids[listed], wanted[listed]))
    n = settings.index.cells_buckets
    tables = sorted(lists)
    where: dict[str, Sequence[Any]] = {"bucket": sorted({table_bucket(t, n) for t in tables}), "table_id": tables}
    files = store.files_by_partition(MATE_POSTINGS, "bucket", where=where) if tables else {}
    tasks = [
        (uris, [(t, lid, positions) for t in tables if table_bucket(t, n) == int(b) for lid, positions in lists[t]])
        for b, uris in sorted(files.items())
    ]
    schema = "files array<string>, lists array<struct<table_id: string, lid: int, positions: array<int>>>"
    return task_frame(spark, tasks, schema).mapInArrow(_tuple_batches, from_arrow_schema(KEY_TUPLES_SCHEMA))


def _tuple_batches(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: each task's (files, lists) -> `key_tuples` of every listed table in the
    files, read here a table at a time."""
    for batch in tasks:
        for task in batch.to_pylist():
            by_table: dict[str, list[tuple[int, list[int]]]] = defaultdict(list)
            for listed in task["lists"]:
                by_table[listed["table_id"]].append((listed["lid"], listed["positions"]))
            columns = ["table_id", "token", "rows", "cols"]
            for postings in partition_tables(task["files"], columns, tables=sorted(by_table), max_rows=TASK_POSTINGS):
                table_id = postings.column("table_id")[0].as_py()
                yield from key_tuples(postings, by_table[table_id]).to_batches(max_chunksize=ROW_CELLS_CHUNK)


def key_tuples(postings: pa.Table, lists: Sequence[tuple[int, Sequence[int]]]) -> pa.Table:
    """One table's posting lists (token, rows, cols) -> (lid, tokens) for each of its `lists` (lid,
    the key's 1-based column positions): the distinct tuples of the tokens at those columns, in key
    order, of the rows whose key cells all hold one."""
    owner = pc.list_parent_indices(postings.column("rows")).to_numpy()
    rows = pc.list_flatten(postings.column("rows")).to_numpy()
    cols = pc.list_flatten(postings.column("cols")).to_numpy()
    n_rows = int(rows.max()) + 1 if len(rows) else 0
    tokens = postings.column("token").combine_chunks()
    lids, widths, tuples = [np.empty(0, np.int32)], [np.empty(0, np.int32)], [np.empty(0, np.int64)]
    for lid, positions in lists:
        grid = np.full((n_rows, len(positions)), -1, np.int64)
        for j, position in enumerate(positions):
            at = cols == position
            grid[rows[at], j] = owner[at]  # a cell holds one value: one token
        complete = np.unique(grid[(grid >= 0).all(axis=1)], axis=0)
        lids.append(np.full(len(complete), lid, np.int32))
        widths.append(np.full(len(complete), len(positions), np.int32))
        tuples.append(complete.ravel())
    offsets = np.r_[0, np.cumsum(np.concatenate(widths))].astype(np.int32)
    values = tokens.take(pa.array(np.concatenate(tuples)))
    return pa.table(
        {"lid": pa.array(np.concatenate(lids)), "tokens": pa.ListArray.from_arrays(pa.array(offsets), values)},
        schema=KEY_TUPLES_SCHEMA,
    )


def _write_tuples(
    store: LakeStore,
    settings: Settings,
    tuples: DataFrame,
    ids: Mapping[Listed, int],
    tables: Sequence[str],
    *,
    full: bool,
) -> None:
    """Keep the tuples of `tables`' lists (all lists after a full computation) for later merges."""
    names = local_frame(
        tuples.sparkSession,
        [(i, t, k, table_bucket(t, settings.index.cells_buckets)) for (t, k), i in ids.items()],
        "lid int, table_id string, key string, bucket int",
    )
    frame = tuples.join(F.broadcast(names), "lid").select(*TUPLES_SCHEMA.names)
    if full:
        store.overwrite(MATE_LIST_TUPLES, frame, partition_by=["bucket"])
        return
    buckets = sorted({table_bucket(t, settings.index.cells_buckets) for t in tables})
    store.overwrite_where(
        MATE_LIST_TUPLES,
        frame,
        column="table_id",
        values=list(tables),
        partitions={"bucket": buckets},
        partition_by=["bucket"],
    )


# ---------------------------------------------------------------------- fresh lists
def _compute_fresh(
    spark: SparkSession,
    store: LakeStore,
    settings: Settings,
    wanted: Mapping[Listed, list[int]],
    ids: Mapping[Listed, int],
    fresh: Sequence[Listed],
    tuples: DataFrame,
    headers: Mapping[str, list[str]],
    version: int,
    budget: int,
) -> list[dict[str, Any]]:
    """The rows of the lists `fresh`, each searched against the whole lake, the cheapest first while
    their pairs fit `budget`."""
    if not fresh:
        return []
    by_id = {ids[listed]: listed for listed in fresh}
    mine = tuples.join(F.broadcast(local_frame(spark, [(i,) for i in by_id], "lid int")), "lid")
    postings = store.read(MATE_POSTINGS, columns=["table_id", "token", "rows"])
    positions = _pair_costs(mine, postings, {i: len(wanted[listed]) for i, listed in by_id.items()})
    init, costs = _cheapest(positions)
    over = {lid for lid, cost in costs.items() if cost > MAX_LIST_PAIRS}
    waiting = _beyond_budget({lid: cost for lid, cost in costs.items() if lid not in over}, by_id, budget)
    chosen = {lid: p for lid, p in init.items() if lid not in over | waiting}
    searched = mine.join(F.broadcast(local_frame(spark, sorted(chosen.items()), "lid int, init int")), "lid")
    owners = _owners(spark, by_id)
    found = _top_tables(searched, _postings(store, settings, None), owners, {}) if chosen else _NOTHING
    over |= found.over
    rows: list[dict[str, Any]] = []
    for lid, listed in sorted(by_id.items(), key=lambda x: x[1]):
        marker = OVER_BUDGET if lid in over else PENDING if lid in waiting else None
        answers = _named(found.tops.get(lid, []), listed, headers)
        pairs = positions.get(lid, [0] * len(wanted[listed]))
        rows += _list_rows(listed, answers, version, marker, found.matches.get(lid, 0), pairs)
    return rows


def _owners(spark: SparkSession, by_id: Mapping[int, Listed]) -> DataFrame:
    """(lid, owner): each list's own table, which is never one of its candidates."""
    return local_frame(spark, [(lid, listed[0]) for lid, listed in by_id.items()], "lid int, owner string")


def _beyond_budget(costs: Mapping[int, int], by_id: Mapping[int, Listed], budget: int) -> set[int]:
    """The lists left for a later run: after the cheapest (by pairs, then table and key) whose pairs
    fit `budget` together; the cheapest list is always computed, so every run makes progress."""
    spent, out = 0, set()
    for i, lid in enumerate(sorted(costs, key=lambda lid: (costs[lid], by_id[lid]))):
        spent += costs[lid]
        if i > 0 and spent > budget:
            out.add(lid)
    return out


def _pair_costs(tuples: DataFrame, postings: DataFrame, sizes: Mapping[int, int]) -> dict[int, list[int]]:
    """Per list (`sizes`: its key's length), the (tuple, item) pairs each key position gives against
    `postings`: the sum over its tuples of the item count of their value there. Lists with no tuple
    are left out."""
    spread = tuples.select("lid", F.posexplode("tokens").alias("pos", "token"))
    tokens = spread.select("token").distinct()
    counts = postings.join(tokens, "token", "left_semi").groupBy("token").agg(F.sum(F.size("rows")).alias("n"))
    summed = spread.join(counts, "token", "left").groupBy("lid", "pos")
    by_list: dict[int, dict[int, int]] = defaultdict(dict)
    for lid, pos, cost in summed.agg(F.sum(F.coalesce("n", F.lit(0))).alias("cost")).collect():
        by_list[lid][pos] = int(cost)
    return {lid: [by_list[lid].get(p, 0) for p in range(m)] for lid, m in sizes.items() if lid in by_list}


def _cheapest(costs: Mapping[int, Sequence[int]]) -> tuple[dict[int, int], dict[int, int]]:
    """Each list's initial key position and the pairs it gives: the fewest, the first such position
    on a tie, as `search nary` chooses."""
    init = {lid: list(cost).index(min(cost)) for lid, cost in costs.items()}
    return init, {lid: min(cost) for lid, cost in costs.items()}


@dataclass(frozen=True)
class _Found:
    """`_top_tables`' answer: per list its top tables (table_id, J, positions in key order), best
    first; the lists over MAX_LIST_MATCHES; every list's matches so far."""

    tops: dict[int, list[tuple[str, int, list[int]]]]
    over: set[int]
    matches: dict[int, int]


_NOTHING = _Found({}, set(), {})


def _top_tables(tuples: DataFrame, postings: DataFrame, owners: DataFrame, earlier: Mapping[int, int]) -> _Found:
    """(lid, tokens, init) tuples against the `postings` (table_id, token, rows, cols) of the
    candidate tables -> per list its top LIST_K tables; the list's own table (`owners`: lid, owner)
    is never a candidate.

    Pairs are verified row by row (a row's columns holding each value as one array), so the matches
    each list would enumerate (a choice of one such column per key position, with the pair's row
    and tuple) are counted before any is: a list whose matches, with the `earlier` ones of tables
    merged before, pass MAX_LIST_MATCHES is left out."""
    size = F.size("tokens")
    others = F.filter(F.sequence(F.lit(0), size - 1), lambda p: p != F.col("init"))
    t = tuples.withColumns({"o1": F.get(others, 0), "o2": F.get(others, 1)}).join(F.broadcast(owners), "lid")
    t = t.withColumns({f"v{i}": F.get("tokens", F.col(p)) for i, p in enumerate(("init", "o1", "o2"))})
    # a tuple travels through the joins as a number, not its tokens (rows half as wide to shuffle)
    t = t.withColumns({"tid": F.monotonically_increasing_id(), "m": size}).drop("tokens")
    needed = tuples.select(F.explode("tokens").alias("token")).distinct()
    # read by five joins (the first value's and the second's on both branches below, the third's):
    # kept once, or the lake's posting lists are scanned and regrouped in Python five times
    cells = _row_cells(postings.join(needed, "token", "left_semi")).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        return _verified_top(t, cells, earlier)
    finally:
        cells.unpersist()


def _verified_top(t: DataFrame, cells: DataFrame, earlier: Mapping[int, int]) -> _Found:
    """`_top_tables` on the tuples `t` (lid, tid, m, init, o1, owner, v0-v2) and the candidate
    tables' `cells` (table_id, token, row, cols)."""
    first = cells.select(F.col("token").alias("v0"), "table_id", "row", F.col("cols").alias("c0"))
    pairs = t.join(first, "v0").where(F.col("table_id") != F.col("owner"))

    def verified(pairs: DataFrame, i: int) -> DataFrame:
        other = cells.select(F.col("token").alias(f"v{i}"), "table_id", "row", F.col("cols").alias(f"c{i}"))
        return pairs.join(other, [f"v{i}", "table_id", "row"])

    pairs = verified(pairs, 1)
    # a key of two columns has no third value: joined on a null v2, its pairs would all hash to one task
    two = pairs.where(F.col("v2").isNull()).withColumn("c2", F.array(F.lit(None).cast("int")))
    pairs = two.unionByName(verified(pairs.where(F.col("v2").isNotNull()), 2))
    pairs = pairs.select("lid", "table_id", "tid", "init", "o1", "m", "c0", "c1", "c2").persist()
    try:
        summed = F.sum(F.size("c0").cast("long") * F.size("c1") * F.size("c2")).alias("n")
        matches = dict(earlier)
        for r in pairs.groupBy("lid").agg(summed).collect():
            matches[r["lid"]] = matches.get(r["lid"], 0) + int(r["n"])
        over = {lid for lid, n in matches.items() if n > MAX_LIST_MATCHES}
        tops = _best_mappings(pairs.where(~F.col("lid").isin(sorted(over))) if over else pairs)
    finally:
        pairs.unpersist()
    return _Found(tops, over, matches)


def _best_mappings(pairs: DataFrame) -> dict[int, list[tuple[str, int, list[int]]]]:
    """Verified pairs (lid, table_id, tid, init, o1, m, and the row's columns c0, c1, c2 holding the
    tuple's initial, second and third value) -> per list its top LIST_K (table_id, J, positions in
    key order): J the distinct tuples a mapping matches, per table its best mapping (largest J, then
    smallest positions)."""
    for i in range(3):  # every choice of the row's columns (one generator per projection)
        pairs = pairs.withColumn(f"c{i}", F.explode(f"c{i}"))
    in_key_order = [
        F.when(F.col("init") == k, F.col("c0")).when(F.col("o1") == k, F.col("c1")).otherwise(F.col("c2"))
        for k in range(3)
    ]
    combos = pairs.select("lid", "table_id", "tid", F.slice(F.array(*in_key_order), 1, F.col("m")).alias("combo"))
    combos = combos.where(F.size(F.array_distinct("combo")) == F.size("combo"))
    # one shuffle by (list, table) serves the de-duplication, the count and the first window alike
    combos = combos.repartition("lid", "table_id")
    joined = combos.distinct().groupBy("lid", "table_id", "combo").agg(F.count("*").alias("j"))
    best = Window.partitionBy("lid", "table_id").orderBy(F.col("j").desc(), F.col("combo"))
    ranked = Window.partitionBy("lid").orderBy(F.col("j").desc(), F.col("table_id"))
    top = joined.withColumn("n", F.row_number().over(best)).where("n = 1")
    top = top.withColumn("rank", F.row_number().over(ranked)).where(F.col("rank") <= LIST_K)
    out: dict[int, list[tuple[str, int, list[int]]]] = defaultdict(list)
    for r in top.orderBy("lid", "rank").collect():
        out[r["lid"]].append((r["table_id"], int(r["j"]), list(r["combo"])))
    return out


def _named(
    found: Sequence[tuple[str, int, list[int]]], listed: Listed, headers: Mapping[str, list[str]]
) -> list[_Answer]:
    key = json.loads(listed[1])
    return [
        _Answer(t, j, json.dumps({name: headers[t][p - 1] for name, p in zip(key, combo, strict=True)}))
        for t, j, combo in found
    ]


def _list_rows(
    listed: Listed,
    answers: Sequence[_Answer],
    version: int,
    state: int | None = None,
    matches: int = 0,
    pairs: Sequence[int] | None = None,
) -> list[dict[str, Any]]:
    """A list's rows: its rank-0 marker (joinability 0, or `state`: OVER_BUDGET, PENDING, when it was
    not computed; the `matches` its verification enumerated and the lake `pairs` of each key
    position, at most), then its answers."""
    table_id, key = listed
    head = {"table_id": table_id, "key": key, "rank": 0, "candidate_table_id": None, "version": version}
    marker = {"joinability": 0 if state is None else state, "mapping": None, "matches": matches, "pairs": pairs}
    rows = [{**head, **marker}]
    rows += [
        {**head, "rank": rank, "candidate_table_id": a.table_id, "joinability": a.joinability, "mapping": a.mapping}
        for rank, a in enumerate(answers if state is None else (), start=1)
    ]
    return rows


# ---------------------------------------------------------------------- merging added tables
def _merge_added(
    spark: SparkSession,
    store: LakeStore,
    settings: Settings,
    ids: Mapping[Listed, int],
    mergeable: Sequence[Listed],
    kept: dict[Listed, list[dict[str, Any]]],
    added: Sequence[str],
    headers: Mapping[str, list[str]],
    version: int,
) -> int:
    """Merge the added tables into the lists `mergeable` of `kept` (in place): their stored tuples
    against the added tables' items alone, each from the key position that pairs with the fewest
    of them. A list the added tables take past the per-list bounds becomes over budget, as it would
    if it were computed again (the bounds are on the whole lake's pairs, `_lake_pairs`, and matches,
    the added tables' added to those its marker holds). Returns how many lists changed."""
    by_id = {ids[listed]: listed for listed in mergeable}
    sizes = {lid: len(json.loads(listed[1])) for lid, listed in by_id.items()}
    lids = local_frame(spark, [(i, *listed) for i, listed in by_id.items()], "lid int, table_id string, key string")
    stored = store.read(MATE_LIST_TUPLES, columns=["table_id", "key", "tokens"])
    tuples = stored.join(F.broadcast(lids), ["table_id", "key"]).select("lid", "tokens").persist()
    try:
        added_postings = _postings(store, settings, added)
        gained = _pair_costs(tuples, added_postings, sizes)
        lake = _lake_pairs(tuples, store, {lid: kept[listed][0] for lid, listed in by_id.items()}, gained, sizes)
        over = {lid for lid, cost in lake.items() if min(cost) > MAX_LIST_PAIRS}
        init, pairs = _cheapest(gained)
        start = {lid: p for lid, p in init.items() if lid not in over and pairs[lid] > 0}
        searched = tuples.join(F.broadcast(local_frame(spark, sorted(start.items()), "lid int, init int")), "lid")
        owners = _owners(spark, by_id)
        earlier = {lid: kept[by_id[lid]][0].get("matches") or 0 for lid in start}  # none in an older lake
        found = _top_tables(searched, added_postings, owners, earlier) if start else _NOTHING
    finally:
        tuples.unpersist()
    over |= found.over
    for lid in over:
        kept[by_id[lid]] = _list_rows(by_id[lid], [], version, OVER_BUDGET)
    changed = len(over)
    for lid, cost in lake.items():
        if lid not in over:
            kept[by_id[lid]][0]["pairs"] = cost  # lake-only, as `matches` below
    for lid, matches in found.matches.items():
        if lid in over:
            continue
        listed = by_id[lid]
        kept[listed][0]["matches"] = matches  # lake-only: the catalog's copy needs no new version
        old = [_Answer(r["candidate_table_id"], r["joinability"], r["mapping"]) for r in kept[listed][1:]]
        new = _named(found.tops.get(lid, []), listed, headers)
        merged = sorted([*old, *new], key=lambda a: (-a.joinability, a.table_id))[:LIST_K]
        if merged != old:
            kept[listed] = _list_rows(listed, merged, version, matches=matches, pairs=lake[lid])
            changed += 1
    return changed


def _lake_pairs(
    tuples: DataFrame,
    store: LakeStore,
    markers: Mapping[int, Mapping[str, Any]],
    gained: Mapping[int, Sequence[int]],
    sizes: Mapping[int, int],
) -> dict[int, list[int]]:
    """Each merged list's lake pairs per key position after the batch, at most: its marker's (which
    may still count the items of deleted tables, so never too few) plus those the added tables
    `gained`. Where that bound passes MAX_LIST_PAIRS, or a marker has none (an older lake), the
    whole lake's pairs are counted again, for those lists only: so a batch does not scan every
    posting list of the lake to learn that its lists stay within their bound."""
    out: dict[int, list[int]] = {}
    for lid, m in sizes.items():
        before = markers[lid].get("pairs")
        added = gained.get(lid, [0] * m)
        if before is not None and len(before) == m:
            out[lid] = [a + b for a, b in zip(before, added, strict=True)]
    recount = sorted(lid for lid in sizes if lid not in out or min(out[lid]) > MAX_LIST_PAIRS)
    if recount:
        some = tuples.join(F.broadcast(local_frame(tuples.sparkSession, [(i,) for i in recount], "lid int")), "lid")
        postings = store.read(MATE_POSTINGS, columns=["table_id", "token", "rows"])
        exact = _pair_costs(some, postings, {lid: sizes[lid] for lid in recount})
        out.update({lid: exact.get(lid, [0] * sizes[lid]) for lid in recount})
    return out
