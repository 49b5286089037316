"""Containment search: the lake columns holding at least a share t of a query's distinct values.

The query's distinct normalized tokens are signed with the index's MinHash spec; every partition
is probed with the (b, r) its bound, the query's size and t call for; the candidates' containment
is estimated from the signatures and, with verification (the default), computed exactly from
JOSIE's stored sets (published in the same transaction as the signatures), keeping only columns
that reach t: precision is then 1 by construction, and recall is the LSH's.

A long-running process (the API) keeps the loaded index between requests (`hold_index`) and loads
it again when the catalog holds a new index version.
"""

from __future__ import annotations

import functools
import json
import math
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, select

from catalog.core.errors import SignatureMismatchError, UserError
from catalog.core.identity import split_column_id
from catalog.core.minhash import MinHashSpec, containment_estimate, from_bytes, jaccard_estimate, signature
from catalog.db.models.base import unpack_int32
from catalog.search.family import JoinRequest, published_facts
from catalog.search.josie import normalize_values
from catalog.search.josie.models import JosieSet
from catalog.search.josie.reader import DbIndexReader
from catalog.search.lshensemble.index import EnsembleIndex, prefix_length, required_overlap
from catalog.search.lshensemble.index import rarest as rarest_of
from catalog.search.lshensemble.models import LsheColumn, LsheMeta
from catalog.search.lshensemble.partitions import partition_of

_CHUNK = 500  # column ids per SELECT ... IN (...)


@dataclass(frozen=True)
class ContainRequest:
    values: Sequence[str | None]  # the query column's raw cell values
    threshold: float
    k: int | None = None  # at most this many answers (None: all)
    verify: bool = True
    hold_index: bool = False


@dataclass
class LoadedIndex:
    """The published index in memory, with the column and table id of each row."""

    version: str
    index: EnsembleIndex
    column_ids: list[str]
    table_ids: list[str]
    _rows: dict[str, int] | None = None

    def rows_of(self, column_ids: Iterable[str]) -> np.ndarray:
        """The index rows of these columns (a column the index lacks is left out)."""
        if self._rows is None:
            self._rows = {c: i for i, c in enumerate(self.column_ids)}
        rows = self._rows
        return np.array([rows[c] for c in column_ids if c in rows], dtype=np.int64)


_HELD: weakref.WeakKeyDictionary[Engine, LoadedIndex] = weakref.WeakKeyDictionary()


def load_index(conn: Connection, *, hold: bool = False) -> LoadedIndex:
    """The catalog's LSH Ensemble (from the process's copy when `hold` and still current)."""
    meta = published_facts(conn, LsheMeta, "LSH Ensemble")
    held = _HELD.get(conn.engine) if hold else None
    if held is not None and held.version == meta["index_version"]:
        return held
    spec = MinHashSpec.from_dict(json.loads(meta["spec"]))
    tuning = json.loads(meta.get("tuning") or "{}")
    rows = conn.execute(
        select(LsheColumn.column_id, LsheColumn.table_id, LsheColumn.size, LsheColumn.signature).order_by(
            LsheColumn.row_id
        )
    ).all()
    sigs = from_bytes([r[3] for r in rows], spec.num_perm) if rows else np.empty((0, spec.num_perm), np.uint32)
    index = EnsembleIndex(
        spec,
        np.asarray(json.loads(meta["uppers"]), np.int64),
        sigs,
        np.asarray([r[2] for r in rows], np.int64),
        max_r=int(tuning.get("max_r", 4)),
        fp_weight=float(tuning.get("fp_weight", 0.5)),
        fn_weight=float(tuning.get("fn_weight", 0.5)),
    )
    loaded = LoadedIndex(meta["index_version"], index, [r[0] for r in rows], [r[1] for r in rows])
    if hold:
        _HELD[conn.engine] = loaded
    return loaded


def check_threshold(threshold: float) -> None:
    if not (0.0 < threshold <= 1.0) or math.isnan(threshold):
        raise UserError(f"--threshold must be in (0, 1], got {threshold}")


def signed_candidates(
    loaded: LoadedIndex,
    spec: MinHashSpec,
    query: np.ndarray,
    size: int,
    threshold: float,
    *,
    exact: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """Candidate rows for a signed query: refused unless signed as the index was."""
    loaded.index.spec.check(spec, what="query")
    check_threshold(threshold)
    return loaded.index.candidates(query, size, threshold, exact=exact)


def _prefix_path(query: _Query, size: int, threshold: float) -> Callable[[np.ndarray], np.ndarray]:
    """The exact path, for a query some partition of which LSH cannot serve (a small query against
    huge columns; `EnsembleIndex.plan` then leaves it every partition): the columns of
    those partitions on the posting lists (JOSIE's) of the query's rarest tokens, as many as a
    column must share one of to reach the threshold (`prefix_length`)."""

    def rows(parts: np.ndarray) -> np.ndarray:
        reader, loaded = query.reader, query.loaded
        token_ids, frequency = query.known
        n = prefix_length(len(token_ids), size, threshold)
        if n == 0:
            return np.empty(0, np.int64)
        rarest = token_ids[rarest_of(frequency, n)]
        lists = reader.read_lists_packed(sorted(int(t) for t in rarest))
        inside = np.isin(partition_of(lists.sizes.astype(np.int64), loaded.index.uppers), parts)
        inside &= lists.sizes >= required_overlap(size, threshold)  # a smaller set cannot hold t of the query
        set_ids = np.unique(lists.set_ids[inside])
        refs = reader.describe_sets(set_ids.tolist())
        return loaded.rows_of(ref.column_id for ref in refs.values())

    return rows


def search_contain(conn: Connection, request: ContainRequest) -> list[dict[str, Any]]:
    """Columns whose containment of the query is at least the threshold, best first (exact
    containment when verified, else the signature's estimate; then column_id)."""
    check_threshold(request.threshold)
    if request.k is not None and request.k < 1:
        raise UserError("--k must be at least 1")
    query = _Query.of(conn, request.values, hold=request.hold_index)
    found = query.answers(request.threshold, verify=request.verify) if query else []
    return found if request.k is None else found[: request.k]


# Thresholds the top-k search descends through (the thesis's top-k variant, step 0.05).
DESCENT = tuple(round(1.0 - 0.05 * i, 2) for i in range(20))


def search_join(conn: Connection, request: JoinRequest) -> list[dict[str, Any]]:
    """`search join --method lshe`: top-k columns by overlap, by containment searches at falling
    thresholds until k columns (other than the excluded one) reach one, the last step at a single
    shared value. Each step verifies only candidates it has not verified before. Approximate
    (`exact: false`): a column LSH misses is not listed; the overlaps listed are exact."""
    query = _Query.of(conn, request.values, hold=request.hold_index)
    if query is None:
        return []
    found: list[dict[str, Any]] = []
    last = 1.0 / len(query.tokens)  # the containment of a single shared value
    for threshold in (*(t for t in DESCENT if t > last), last):
        found = [r for r in query.answers(threshold, verify=True) if r["column_id"] != request.exclude_column_id]
        if len(found) >= request.k:
            break
    found.sort(key=lambda r: (-r["overlap"], r["column_id"]))
    keys = ("overlap", "column_id", "table_id", "column")
    return [{**{key: r[key] for key in keys}, "exact": False} for r in found[: request.k]]


@dataclass
class _Query:
    """A query signed once, its tokens looked up in the lake's dictionary at most once, with the
    overlaps verified so far (a top-k search asks again at lower thresholds)."""

    conn: Connection
    loaded: LoadedIndex
    tokens: set[str]
    signature: np.ndarray
    hold: bool
    overlaps: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def of(conn: Connection, values: Iterable[str | None], *, hold: bool) -> _Query | None:
        tokens = normalize_values(values)
        if not tokens:
            return None
        loaded = load_index(conn, hold=hold)
        return _Query(conn, loaded, tokens, signature(loaded.index.spec, tokens), hold)

    @functools.cached_property
    def reader(self) -> DbIndexReader:
        return DbIndexReader(self.conn, cache_dictionary=self.hold)

    @functools.cached_property
    def known(self) -> tuple[np.ndarray, np.ndarray]:
        """The query's token ids in the lake and their frequencies."""
        token_ids, frequency, _ = self.reader.lookup_arrays(self.tokens)
        return token_ids, frequency

    def answers(self, threshold: float, *, verify: bool) -> list[dict[str, Any]]:
        q, index, loaded = len(self.tokens), self.loaded.index, self.loaded
        exact = _prefix_path(self, q, threshold)
        rows = signed_candidates(loaded, index.spec, self.signature, q, threshold, exact=exact)
        estimate = np.atleast_1d(
            containment_estimate(jaccard_estimate(index.signatures[rows], self.signature), index.sizes[rows], q)
        )
        found = [
            {
                "column_id": loaded.column_ids[row],
                "table_id": loaded.table_ids[row],
                "column": split_column_id(loaded.column_ids[row])[1],
                "size": int(index.sizes[row]),
                "estimate": round(float(est), 4),
                "overlap": None,
                "containment": round(float(est), 4),
                "exact": verify,
            }
            for row, est in zip(rows.tolist(), estimate.tolist(), strict=True)
        ]
        if verify:
            unseen = [f["column_id"] for f in found if f["column_id"] not in self.overlaps]
            self.overlaps.update(_overlaps(self.conn, self.known[0].astype(np.int32), unseen))
            need = required_overlap(q, threshold)
            found = [f for f in found if self.overlaps.get(f["column_id"], 0) >= need]
            for f in found:
                f["overlap"] = self.overlaps[f["column_id"]]
                f["containment"] = round(f["overlap"] / q, 4)
        found.sort(key=lambda f: (-f["containment"], f["column_id"]))
        return found


def _overlaps(conn: Connection, token_ids: np.ndarray, column_ids: list[str]) -> dict[str, int]:
    """|Q ∩ X| for each candidate from JOSIE's sets (token ids; a query token the lake lacks is in no set)."""
    if not column_ids:
        return {}
    out = dict.fromkeys(column_ids, 0)  # a candidate JOSIE does not hold shares nothing
    for i in range(0, len(column_ids), _CHUNK):
        chunk = column_ids[i : i + _CHUNK]
        for column_id, blob in conn.execute(
            select(JosieSet.column_id, JosieSet.tokens).where(JosieSet.column_id.in_(chunk))
        ):
            tokens_of = blob if isinstance(blob, np.ndarray) else unpack_int32(blob)
            out[column_id] = int(np.isin(tokens_of, token_ids, assume_unique=True).sum())
    return out


__all__ = ["ContainRequest", "LoadedIndex", "SignatureMismatchError", "load_index", "search_contain"]
