"""Plain-Python oracles for the JOSIE index tests: read the lake tables, check every invariant
directly, and generate random lakes and change batches (Zipf set sizes, duplicate columns,
one-token and emptied columns)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import mmh3
import numpy as np
import pyarrow as pa

from catalog.core.identity import table_bucket
from spark_jobs.josie.tables import DIRTY_GROUP_BASE, HASH_SEED
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.store import LakeStore
from spark_jobs.profile.tokens import TOKENS_SCHEMA

Lake = dict[str, dict[str, frozenset[str]]]  # table_id -> column_id -> tokens


@dataclass
class Index:
    tokens: dict[int, tuple[str, int, int]]  # token_id -> (token, frequency, group_id)
    sets: dict[int, dict[str, Any]]  # set_id -> {column_id, table_id, size, tokens}
    postings: dict[int, tuple[list[int], list[int], list[int]]]
    state: dict[str, Any] = field(default_factory=dict)

    def column_sets(self) -> dict[str, frozenset[str]]:
        """column_id -> tokens as strings (comparable across builds, whose ids differ)."""
        return {s["column_id"]: frozenset(self.tokens[t][0] for t in s["tokens"]) for s in self.sets.values()}

    def set_ids(self) -> dict[str, int]:
        return {s["column_id"]: sid for sid, s in self.sets.items()}

    def token_ids(self) -> dict[str, int]:
        return {tok: tid for tid, (tok, _, _) in self.tokens.items()}


def read_index(store: LakeStore) -> Index:
    tokens = {
        r["token_id"]: (r["token"], r["frequency"], r["group_id"]) for r in store.read_arrow("josie_tokens").to_pylist()
    }
    sets = {r["set_id"]: r for r in store.read_arrow("josie_sets").to_pylist()}
    postings = {
        r["token_id"]: (r["set_ids"], r["positions"], r["sizes"])
        for r in store.read_arrow("josie_postings").to_pylist()
    }
    state = store.read_arrow("josie_state").to_pylist()
    assert len(state) == 1
    return Index(tokens, sets, postings, state[0])


def list_hash(set_ids: list[int], modulus: int = 0) -> int:
    h = mmh3.hash(np.asarray(set_ids, dtype="<i8").tobytes(), HASH_SEED)
    return h % modulus if modulus else h


def check_invariants(idx: Index, *, fresh: bool, hash_modulus: int = 0) -> None:
    """Every structural invariant of the index; `fresh` adds those of a build or rebuild."""
    names = [v[0] for v in idx.tokens.values()]
    assert len(set(names)) == len(names), "token strings must be unique"
    assert set(idx.postings) == set(idx.tokens), "one posting list per token"
    n_entries = 0
    for tid, (sids, pos, sizes) in idx.postings.items():
        assert len(sids) == len(pos) == len(sizes) > 0
        assert all(a < b for a, b in pairwise(sids)), f"list {tid} not sorted by set id"
        assert idx.tokens[tid][1] == len(sids), f"frequency of {tid}"
        for s, p, z in zip(sids, pos, sizes, strict=True):
            st = idx.sets[s]
            assert st["tokens"][p] == tid, f"position of token {tid} in set {s}"
            assert z == st["size"] == len(st["tokens"]), f"size of set {s}"
        n_entries += len(sids)
    for sid, st in idx.sets.items():
        toks = st["tokens"]
        assert toks and all(a < b for a, b in pairwise(toks)), f"set {sid} sorted, non-empty"
        assert all(t in idx.tokens for t in toks)
        assert st["column_id"].startswith(st["table_id"] + "#")
    assert n_entries == sum(len(st["tokens"]) for st in idx.sets.values())
    assert len({st["column_id"] for st in idx.sets.values()}) == len(idx.sets)

    groups: dict[int, list[int]] = {}
    for tid, (_, _, gid) in idx.tokens.items():
        groups.setdefault(gid, []).append(tid)
        if gid >= DIRTY_GROUP_BASE:
            assert gid == DIRTY_GROUP_BASE + tid, "a dirty list is alone in its group"
    for gid, members in groups.items():
        lists = {tuple(idx.postings[t][0]) for t in members}
        assert len(lists) == 1, f"group {gid} joins different posting lists"
    n_dirty = sum(1 for v in idx.tokens.values() if v[2] >= DIRTY_GROUP_BASE)
    st = idx.state
    assert st["n_lists"] == len(idx.tokens) and st["n_dirty_lists"] == n_dirty
    assert abs(st["dirty_share"] - (n_dirty / len(idx.tokens) if idx.tokens else 0.0)) < 1e-12
    assert st["next_token_id"] > max(idx.tokens, default=-1)
    assert st["next_set_id"] > max(idx.sets, default=-1)

    if not fresh:
        return
    n = len(idx.tokens)
    assert sorted(idx.tokens) == list(range(n)), "token ids dense 0..N-1"
    assert n_dirty == 0
    keys = [(idx.tokens[t][1], list_hash(idx.postings[t][0], hash_modulus), idx.postings[t][0]) for t in range(n)]
    assert all(a <= b for a, b in pairwise(keys)), "global order (frequency, hash, list)"
    gids = [idx.tokens[t][2] for t in range(n)]
    assert sorted(set(gids)) == list(range(len(set(gids)))), "group ids dense"
    assert all(a <= b for a, b in pairwise(gids)), "groups are contiguous id ranges"
    for t in range(1, n):  # maximal: a new group starts exactly where the list changes
        assert (gids[t] != gids[t - 1]) == (idx.postings[t][0] != idx.postings[t - 1][0])
    assert len(groups) == len({tuple(p[0]) for p in idx.postings.values()}), "one group per distinct list"


def overlaps(sets: dict[str, frozenset[str]], query: frozenset[str]) -> dict[str, int]:
    return {cid: len(query & s) for cid, s in sets.items() if query & s}


# ---------------------------------------------------------------------- random lakes and batches
def _zipf_size(rng: random.Random, cap: int) -> int:
    return min(cap, int(rng.paretovariate(1.1)))


def _token(rng: random.Random, vocab: int) -> str:
    i = min(vocab - 1, int(rng.paretovariate(0.8)) - 1)
    return f"v{i}" if i % 7 else f"é{i}"


def random_column(rng: random.Random, vocab: int, cap: int = 30) -> frozenset[str]:
    size = _zipf_size(rng, cap)
    return frozenset(_token(rng, vocab) for _ in range(size)) | ({f"u{rng.randrange(10**9)}"} if size > 3 else set())


def random_table(rng: random.Random, table_id: str, vocab: int, lake: Lake) -> dict[str, frozenset[str]]:
    cols: dict[str, frozenset[str]] = {}
    for c in range(rng.randint(1, 4)):
        cid = f"{table_id}#c{c}"
        roll = rng.random()
        others = [s for t in lake.values() for s in t.values()]
        if roll < 0.2 and others:
            cols[cid] = rng.choice(others)  # a duplicate column
        elif roll < 0.3:
            cols[cid] = frozenset({_token(rng, vocab)})  # one token
        elif roll < 0.35:
            continue  # an empty column: no tokens, not indexed
        else:
            cols[cid] = random_column(rng, vocab)
    return cols


def mutate_table(
    rng: random.Random, table_id: str, cols: dict[str, frozenset[str]], vocab: int, serial: int
) -> dict[str, frozenset[str]]:
    """A changed version of a table: token removals, existing tokens inserted mid-set, brand-new
    tokens, a dropped column, a new column, an emptied column."""
    out: dict[str, frozenset[str]] = {}
    for cid, toks in cols.items():
        roll = rng.random()
        if roll < 0.1:
            continue  # column dropped or emptied
        new = set(toks)
        for t in list(new):
            if rng.random() < 0.3:
                new.discard(t)
        if len(new) >= 3:
            new.discard(rng.choice(sorted(new)))  # a deletion that shifts later positions (mostly)
        for _ in range(rng.randint(0, 3)):
            new.add(_token(rng, vocab))  # mostly existing tokens: lands mid-set
        if rng.random() < 0.4:
            new.add(f"n{serial}-{rng.randrange(10**6)}")  # a new token: lands at the end
        if new:
            out[cid] = frozenset(new)
    if rng.random() < 0.4:
        out[f"{table_id}#x{serial}"] = random_column(rng, vocab)
    return out


def write_column_tokens(store: LakeStore, lake: Lake, touched: list[str], n_buckets: int) -> None:
    """What the tokens stage commits for `touched` tables (rows of the tables still in `lake`)."""
    rows = [
        {"table_id": t, "bucket": table_bucket(t, n_buckets), "column_id": cid, "token": tok, "n": 1}
        for t in touched
        if t in lake
        for cid, toks in lake[t].items()
        for tok in sorted(toks)
    ]
    data = pa.Table.from_pylist(rows, schema=TOKENS_SCHEMA)
    buckets = sorted({table_bucket(t, n_buckets) for t in touched})
    store.overwrite_where(
        "column_tokens",
        data,
        column="table_id",
        values=touched,
        partitions={"bucket": buckets},
        partition_by=["bucket"],
    )


def model_sets(lake: Lake) -> dict[str, frozenset[str]]:
    return {cid: toks for cols in lake.values() for cid, toks in cols.items() if toks}


def random_batch(rng: random.Random, lake: Lake, batch_id: int, vocab: int, *, n_ops: int) -> ChangeBatch:
    """Mutate `lake` in place: new tables, changed tables, deleted tables."""
    added, deleted = [], []
    existing = sorted(lake)
    for _ in range(n_ops):
        roll = rng.random()
        if roll < 0.35 or not existing:
            tid = f"file:t{batch_id}_{rng.randrange(10**6)}.csv"
            lake[tid] = random_table(rng, tid, vocab, lake)
            added.append(tid)
        elif roll < 0.75:
            tid = rng.choice(existing)
            if tid in deleted or tid in added:
                continue
            lake[tid] = mutate_table(rng, tid, lake[tid], vocab, batch_id)
            added.append(tid)
        else:
            tid = rng.choice(existing)
            if tid in deleted or tid in added:
                continue
            del lake[tid]
            deleted.append(tid)
    return ChangeBatch(batch_id, tuple(sorted(added)), tuple(sorted(deleted)))
