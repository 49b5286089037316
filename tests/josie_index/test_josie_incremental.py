"""Incremental ADD/DELETE: after random batches (new, changed and deleted tables; Zipf sizes,
duplicate, one-token and emptied columns), with and without a rebuild in between, the index holds
exactly the raw Python sets and the sets of a fresh build, overlaps equal brute force, invariants
hold, set ids are stable and never reused, and existing token ids never change between rebuilds.
Both update engines (Spark, and Arrow on the driver) run every sequence, and on the same batches
they write identical index tables."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pyarrow as pa
import pytest

from spark_jobs.josie import build as josie_index
from spark_jobs.josie import rebuild as rebuild_josie
from spark_jobs.josie import update as update_josie
from spark_jobs.josie.tables import JOSIE_CHANGES, JOSIE_POSTINGS, JOSIE_SETS, JOSIE_STATE, JOSIE_TOKENS
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.store import LakeStore
from tests.conftest import make_settings
from tests.josie_index.josie_oracle import (
    Index,
    Lake,
    check_invariants,
    model_sets,
    overlaps,
    random_batch,
    random_table,
    read_index,
    write_column_tokens,
)

VOCAB = 80


class History:
    """What the index promised so far: set id <-> column for good, token ids until a rebuild."""

    def __init__(self) -> None:
        self.column_of: dict[int, str] = {}
        self.n_mid_inserts = 0
        self.n_shifting_deletes = 0

    def check(self, before: Index | None, after: Index, *, rebuilt: bool) -> None:
        for sid, st in after.sets.items():
            assert self.column_of.setdefault(sid, st["column_id"]) == st["column_id"], "set ids are never reused"
        if before is None:
            return
        old_sids, new_sids = before.set_ids(), after.set_ids()
        for cid, sid in new_sids.items():
            if cid in old_sids:
                assert sid == old_sids[cid], f"{cid} kept its set id"
        if rebuilt:
            return
        old_tids, new_tids = before.token_ids(), after.token_ids()
        for tok, tid in new_tids.items():
            if tok in old_tids:
                assert tid == old_tids[tok], f"token {tok!r} kept its id"
            else:
                assert tid >= before.state["next_token_id"], "new tokens go to the end of the order"
        for cid, sid in new_sids.items():  # which update cases did this batch exercise?
            if cid not in old_sids:
                continue
            old_toks, new_toks = before.sets[sid]["tokens"], after.sets[sid]["tokens"]
            self.n_mid_inserts += sum(1 for t in set(new_toks) - set(old_toks) if t < max(old_toks))
            self.n_shifting_deletes += sum(1 for t in set(old_toks) - set(new_toks) if t < max(old_toks))


def _initial(rng: random.Random, n: int) -> Lake:
    lake: Lake = {}
    for i in range(n):
        tid = f"file:t0_{i}.csv"
        lake[tid] = random_table(rng, tid, VOCAB, lake)
    return lake


def _apply(spark, settings, store, lake, batch):  # type: ignore[no-untyped-def]
    write_column_tokens(store, lake, list(batch.touched), settings.index.cells_buckets)
    return update_josie.run(spark, settings, batch)


def _compare_with_fresh_build(spark, tmp_path: Path, idx: Index, lake: Lake, rng: random.Random) -> None:
    fresh_settings = make_settings(tmp_path / "fresh")
    fresh_store = LakeStore(fresh_settings.lake, spark)
    write_column_tokens(fresh_store, lake, sorted(lake), fresh_settings.index.cells_buckets)
    josie_index.build(spark, fresh_store)
    fresh = read_index(fresh_store)
    check_invariants(fresh, fresh=True)
    assert idx.column_sets() == fresh.column_sets() == model_sets(lake)
    raw = model_sets(lake)
    vocabulary = sorted({t for s in raw.values() for t in s})
    for _ in range(20):
        query = frozenset(rng.sample(vocabulary, min(len(vocabulary), rng.randint(1, 25))))
        assert overlaps(idx.column_sets(), query) == overlaps(fresh.column_sets(), query) == overlaps(raw, query)


def _run_sequence(spark, settings, tmp_path, *, seed: int, rebuild_after: int | None) -> History:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    store = LakeStore(settings.lake, spark)
    lake = _initial(rng, 14)
    history = History()
    first = ChangeBatch(1, tuple(sorted(lake)), ())
    assert _apply(spark, settings, store, lake, first)["mode"] == "build"
    before = read_index(store)
    check_invariants(before, fresh=True)
    history.check(None, before, rebuilt=True)
    for batch_id in range(2, 5):
        batch = random_batch(rng, lake, batch_id, VOCAB, n_ops=6)
        result = _apply(spark, settings, store, lake, batch)
        assert result["mode"] == "update"
        after = read_index(store)
        check_invariants(after, fresh=False)
        assert after.column_sets() == model_sets(lake)
        assert result["rebuild_due"] == (after.state["dirty_share"] > settings.index.josie_dirty_threshold)
        history.check(before, after, rebuilt=False)
        before = after
        if batch_id == rebuild_after:
            assert rebuild_josie.rebuild(spark, store)["mode"] == "rebuild"
            after = read_index(store)
            check_invariants(after, fresh=True)
            assert after.column_sets() == model_sets(lake)
            assert after.state["next_set_id"] == before.state["next_set_id"]
            history.check(before, after, rebuilt=True)
            before = after
    assert update_josie.run(spark, settings, batch)["mode"] == "skipped"  # a rerun of the last batch
    _compare_with_fresh_build(spark, tmp_path, before, lake, rng)
    return history


def _with_engine(settings, engine: str):  # type: ignore[no-untyped-def]
    return dataclasses.replace(settings, index=dataclasses.replace(settings.index, josie_update_engine=engine))


@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_random_batches_without_rebuild_equal_fresh_build(spark, settings, tmp_path, engine):  # type: ignore[no-untyped-def]
    history = _run_sequence(spark, _with_engine(settings, engine), tmp_path, seed=11, rebuild_after=None)
    assert history.n_mid_inserts > 0 and history.n_shifting_deletes > 0  # the cases were exercised


@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_random_batches_with_rebuild_equal_fresh_build(spark, settings, tmp_path, engine):  # type: ignore[no-untyped-def]
    history = _run_sequence(spark, _with_engine(settings, engine), tmp_path, seed=23, rebuild_after=3)
    assert history.n_mid_inserts > 0


def _sorted_rows(store: LakeStore, name: str) -> list[dict]:
    table: pa.Table = store.read_arrow(name)
    return sorted(table.to_pylist(), key=repr)


def test_both_engines_write_identical_tables(spark, tmp_path):  # type: ignore[no-untyped-def]
    """The same build and batches through the Spark update and the driver update leave byte-for-byte
    equal rows in every index table, including ids, positions, groups, the change log and state."""
    rng = random.Random(5)
    lake = _initial(rng, 12)
    batches = []
    model = {t: dict(cols) for t, cols in lake.items()}
    for batch_id in range(2, 6):
        batches.append((random_batch(rng, model, batch_id, VOCAB, n_ops=6), {t: dict(c) for t, c in model.items()}))
    stores = {}
    for engine in ("spark", "arrow"):
        settings = _with_engine(make_settings(tmp_path / engine), engine)
        store = LakeStore(settings.lake, spark)
        _apply(spark, settings, store, lake, ChangeBatch(1, tuple(sorted(lake)), ()))
        for batch, state in batches:
            assert _apply(spark, settings, store, state, batch)["mode"] == "update"
        stores[engine] = store
    for name in (JOSIE_TOKENS, JOSIE_SETS, JOSIE_POSTINGS, JOSIE_STATE, JOSIE_CHANGES):
        assert _sorted_rows(stores["spark"], name) == _sorted_rows(stores["arrow"], name), name
