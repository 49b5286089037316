"""JOSIE index, incremental ADD/DELETE computed on the driver with Arrow and numpy: the same update
as `update_josie`'s Spark plan, for batches that are small against the index.

Why a second engine: a 1% batch of the 100,000-set bench lake changes about 8,000 of 560,000
posting lists, yet the Spark plan runs a dozen jobs and shuffles over the whole index, and costs a
third of a full build. Here the batch's own work is a few numpy sorts and each index table is
rewritten once from Arrow, in about a second. The outcome is the same tables (same set and token
ids, positions, groups, change log and state; a test applies random batches both ways and compares
them), so nothing downstream can tell which engine ran. `update_josie.run` picks this one while the
index fits comfortably in the driver's memory (`index.josie.driver_max_lists`).

The algorithm is `update_josie`'s (its docstring lists the cases): every *affected* set is
recomputed as a whole, and each posting list that holds one of its tokens, before or after, is
rebuilt from its other entries plus the set's new entries.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from catalog.core.identity import table_bucket
from spark_jobs.josie.build import COLUMN_TOKENS, commit_update, conform_any, read_state
from spark_jobs.josie.tables import (
    CHANGE_SET,
    CHANGE_TOKEN,
    CHANGES_SCHEMA,
    DIRTY_GROUP_BASE,
    JOSIE,
    JOSIE_POSTINGS,
    JOSIE_SETS,
    JOSIE_STATE,
    JOSIE_TOKENS,
    POSTINGS_SCHEMA,
    SETS_SCHEMA,
    TOKENS_SCHEMA,
    JosieResult,
)
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.commit_point import begin
from spark_jobs.lake.store import LakeStore

_KEY_SHIFT = 32  # (set_id, token_id) pair -> one int64 key; both ids fit in 31 bits (int32 columns)


def update(store: LakeStore, batch: ChangeBatch, *, n_buckets: int) -> JosieResult:
    """Apply `batch` to an existing index; commits tokens, sets, postings, changes, then state."""
    base = begin(store, JOSIE)
    versions = {n: store.version(n) for n in (JOSIE_TOKENS, JOSIE_SETS, JOSIE_POSTINGS, JOSIE_STATE)}
    state = read_state(store, versions[JOSIE_STATE])
    old_sets = conform_any(store.read_arrow(JOSIE_SETS, version=versions[JOSIE_SETS]), JOSIE_SETS)
    touched = pc.fill_null(pc.is_in(old_sets["table_id"], pa.array(list(batch.touched), pa.string())), False)
    aff_old = old_sets.filter(touched)
    aff_ids = aff_old["set_id"].to_numpy()

    # Set ids: surviving columns keep theirs; new columns get fresh ones in column_id order.
    new_ct = _batch_column_tokens(store, list(batch.added), n_buckets)
    col_map, next_set_id = _set_ids(new_ct, aff_old, state.next_set_id)
    pair_sets = np.asarray(col_map["set_id"])[
        pc.index_in(new_ct["column_id"], value_set=col_map["column_id"]).to_numpy(zero_copy_only=False)
    ]

    # Token ids: known tokens keep theirs; new ones go to the end of the order, (batch frequency, token).
    old_tokens = conform_any(store.read_arrow(JOSIE_TOKENS, version=versions[JOSIE_TOKENS]), JOSIE_TOKENS)
    pair_tokens, fresh = _token_ids(new_ct["token"], old_tokens, state.next_token_id)

    new_sid, new_tok, new_pos, new_size = _integer_sets(pair_sets, pair_tokens)
    old_tok = pc.list_flatten(aff_old["tokens"]).to_numpy().astype(np.int64)
    old_sid = aff_ids[pc.list_parent_indices(aff_old["tokens"]).to_numpy()]
    old_keys = (old_sid << _KEY_SHIFT) | old_tok
    new_keys = (new_sid << _KEY_SHIFT) | new_tok
    dirty = np.unique(np.setxor1d(old_keys, new_keys) & ((1 << _KEY_SHIFT) - 1))  # membership changed
    rewrite = np.union1d(old_tok, new_tok)  # lists with an entry of an affected set, before or after

    old_post = conform_any(store.read_arrow(JOSIE_POSTINGS, version=versions[JOSIE_POSTINGS]), JOSIE_POSTINGS)
    in_rewrite = pc.is_in(old_post["token_id"], pa.array(rewrite, pa.int64()))
    lists_upd = _rebuilt_lists(old_post.filter(in_rewrite), aff_ids, (new_tok, new_sid, new_pos, new_size))
    postings_new = pa.concat_tables([old_post.filter(pc.invert(in_rewrite)), lists_upd])

    tokens_new = _dictionary(old_tokens, fresh, lists_upd, dirty)
    sets_new = pa.concat_tables(
        [
            old_sets.filter(pc.invert(pc.is_in(old_sets["set_id"], pa.array(aff_ids)))),
            _sets_table(new_sid, new_tok, col_map),
        ]
    )
    version = state.index_version + 1
    changed_sets = np.union1d(aff_ids, np.asarray(col_map["set_id"], dtype=np.int64))
    n_changes = len(rewrite) + len(changed_sets)
    changes = pa.table(
        {
            "index_version": pa.array([version] * n_changes, pa.int64()),
            "base_version": pa.array([version - 1] * n_changes, pa.int64()),
            "kind": pa.array([CHANGE_TOKEN] * len(rewrite) + [CHANGE_SET] * len(changed_sets), pa.string()),
            "key": pa.array(np.concatenate([rewrite, changed_sets]), pa.int64()),
        },
        schema=CHANGES_SCHEMA,
    )
    return commit_update(
        store,
        base,
        batch.batch_id,
        tokens=tokens_new,
        sets=sets_new,
        postings=postings_new,
        changes=changes,
        state=state,
        version=version,
        next_set_id=next_set_id,
    )


def _batch_column_tokens(store: LakeStore, added: list[str], n_buckets: int) -> pa.Table:
    columns = ["table_id", "column_id", "token"]
    if not added:
        return pa.table({c: pa.array([], pa.string()) for c in columns})
    buckets = sorted({table_bucket(t, n_buckets) for t in added})
    return store.read_arrow(COLUMN_TOKENS, columns=columns, where={"bucket": buckets, "table_id": added})


def _set_ids(new_ct: pa.Table, aff_old: pa.Table, next_set_id: int) -> tuple[pa.Table, int]:
    """(set_id, table_id, column_id) of the batch's columns, and the next unused set id."""
    cols = new_ct.select(["table_id", "column_id"]).group_by(["table_id", "column_id"]).aggregate([])
    cols = cols.sort_by("column_id")
    known = dict(zip(aff_old["column_id"].to_pylist(), aff_old["set_id"].to_pylist(), strict=True))
    set_ids = []
    for column_id in cols["column_id"].to_pylist():
        sid = known.get(column_id)
        if sid is None:
            sid, next_set_id = next_set_id, next_set_id + 1
        set_ids.append(sid)
    col_map = pa.table(
        {"set_id": pa.array(set_ids, pa.int64()), "table_id": cols["table_id"], "column_id": cols["column_id"]}
    )
    return col_map, next_set_id


def _token_ids(tokens: pa.ChunkedArray, old_tokens: pa.Table, next_token_id: int) -> tuple[np.ndarray, pa.Table]:
    """Each pair's token id, and the batch's new tokens as (token, token_id)."""
    at = pc.index_in(tokens, value_set=old_tokens["token"])
    known = pc.is_valid(at).to_numpy(zero_copy_only=False)
    ids = np.full(len(tokens), -1, dtype=np.int64)
    ids[known] = old_tokens["token_id"].to_numpy()[pc.fill_null(at, 0).to_numpy()[known]]
    unknown = tokens.filter(pc.invert(pc.is_valid(at)))
    fresh = (
        pa.table({"token": unknown})
        .group_by("token")
        .aggregate([([], "count_all")])
        .sort_by([("count_all", "ascending"), ("token", "ascending")])
    )
    fresh = pa.table(
        {
            "token": fresh["token"],
            "token_id": pa.array(np.arange(next_token_id, next_token_id + fresh.num_rows), pa.int64()),
        }
    )
    if fresh.num_rows:
        where = pc.index_in(unknown, value_set=fresh["token"]).to_numpy(zero_copy_only=False)
        ids[~known] = fresh["token_id"].to_numpy()[where]
    return ids, fresh


def _run_starts(keys: np.ndarray) -> np.ndarray:
    """Where each run of equal values of the sorted array `keys` starts."""
    if not len(keys):
        return np.empty(0, np.int64)
    return np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])


def _integer_sets(set_ids: np.ndarray, token_ids: np.ndarray) -> tuple[np.ndarray, ...]:
    """Pairs sorted by (set id, token id) with each token's 0-based position in its set and the
    set's size: (set_id, token_id, position, size), one entry per pair."""
    order = np.lexsort((token_ids, set_ids))
    sid, tok = set_ids[order].astype(np.int64), token_ids[order].astype(np.int64)
    starts = _run_starts(sid)
    sizes = np.diff(np.r_[starts, len(sid)])
    pos = np.arange(len(sid)) - np.repeat(starts, sizes)
    return sid, tok, pos, np.repeat(sizes, sizes)


def _rebuilt_lists(rewritten: pa.Table, aff_ids: np.ndarray, new_entries: tuple[np.ndarray, ...]) -> pa.Table:
    """The lists to rewrite: their entries of unaffected sets plus the affected sets' new entries,
    grouped by token id and sorted by set id. A list left without entries disappears."""
    parents = pc.list_parent_indices(rewritten["set_ids"]).to_numpy()
    tok = rewritten["token_id"].to_numpy()[parents]
    sid = pc.list_flatten(rewritten["set_ids"]).to_numpy().astype(np.int64)
    pos = pc.list_flatten(rewritten["positions"]).to_numpy()
    size = pc.list_flatten(rewritten["sizes"]).to_numpy()
    keep = ~np.isin(sid, aff_ids)
    new_tok, new_sid, new_pos, new_size = new_entries
    tok, sid = np.r_[tok[keep], new_tok], np.r_[sid[keep], new_sid]
    pos, size = np.r_[pos[keep], new_pos], np.r_[size[keep], new_size]
    order = np.lexsort((sid, tok))
    tok, sid, pos, size = tok[order], sid[order], pos[order], size[order]
    starts = _run_starts(tok)
    offsets = pa.array(np.r_[starts, len(tok)], pa.int32())
    return pa.table(
        {
            "token_id": pa.array(tok[starts], pa.int64()),
            "set_ids": pa.ListArray.from_arrays(offsets, pa.array(sid, pa.int32())),
            "positions": pa.ListArray.from_arrays(offsets, pa.array(pos, pa.int32())),
            "sizes": pa.ListArray.from_arrays(offsets, pa.array(size, pa.int32())),
        },
        schema=POSTINGS_SCHEMA,
    )


def _dictionary(old_tokens: pa.Table, fresh: pa.Table, lists_upd: pa.Table, dirty: np.ndarray) -> pa.Table:
    """The dictionary after the batch: clean tokens as they were; a dirty token that still has a
    list gets its new frequency and a singleton group; one whose list vanished is dropped."""
    is_dirty = pc.is_in(old_tokens["token_id"], pa.array(dirty, pa.int64()))
    names = pa.concat_tables(
        [old_tokens.filter(is_dirty).select(["token", "token_id"]), fresh.select(["token", "token_id"])]
    )
    listed = lists_upd.filter(pc.is_in(lists_upd["token_id"], pa.array(dirty, pa.int64())))
    name_at = pc.index_in(listed["token_id"], value_set=names["token_id"])
    dirty_ids = listed["token_id"].to_numpy()
    updated = pa.table(
        {
            "token": pc.take(names["token"], name_at),
            "token_id": listed["token_id"],
            "frequency": pa.array(pc.list_value_length(listed["set_ids"]).to_numpy(zero_copy_only=False), pa.int32()),
            "group_id": pa.array(DIRTY_GROUP_BASE + dirty_ids, pa.int64()),
        },
        schema=TOKENS_SCHEMA,
    )
    return pa.concat_tables([old_tokens.filter(pc.invert(is_dirty)), updated])


def _sets_table(sid: np.ndarray, tok: np.ndarray, col_map: pa.Table) -> pa.Table:
    """The affected sets' new rows (sid/tok sorted by set id, then token id)."""
    starts = _run_starts(sid)
    set_ids = sid[starts]
    at = pc.index_in(pa.array(set_ids, pa.int64()), value_set=col_map["set_id"])
    return pa.table(
        {
            "set_id": pa.array(set_ids, pa.int64()),
            "table_id": pc.take(col_map["table_id"], at),
            "column_id": pc.take(col_map["column_id"], at),
            "size": pa.array(np.diff(np.r_[starts, len(sid)]), pa.int32()),
            "tokens": pa.ListArray.from_arrays(
                pa.array(np.r_[starts, len(sid)], pa.int32()), pa.array(tok, pa.int32())
            ),
        },
        schema=SETS_SCHEMA,
    )
