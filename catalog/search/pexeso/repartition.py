"""The published columns' partitions kept in the catalog (`pexeso_columns.partition`,
`pexeso_partitions`), by the PEXESO publisher inside its transaction (docs/algorithms/pexeso.md,
"Lakes larger than memory").

* `repartition`: every column summarised (histogram over the coarse grid cells, box, size) from
  its vectors under the published pivots, a budget's worth of columns at a time, so no more than
  that is ever in memory; then clustered (`partitioning.cluster`) and written. Done when the index
  is built or rewritten, when the pivots change (a rebuild), when the budget or the histogram level
  changed, or when the catalog has no partitions yet;
* `assign_added`: a batch's added columns go to the nearest centre (by JSD) whose partition keeps
  room for them, else into new partitions; a partition's box grows to hold them. Deleted columns
  just leave (boxes are not shrunk: a box too large skips less, never wrongly);
* the quality, 1 − mean JSD of each column to its centre / ln 2, recorded when partitioned and
  after every batch (fact `partitions`); a rebuild is due when it fell by `repartition_share`
  (`spark_jobs.pexeso.update.rebuild_due`), and the rebuild re-partitions.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection, bindparam, delete, func, insert, select, update

from catalog.search.pexeso.models import PexesoColumn, PexesoMeta, PexesoPartition
from catalog.search.pexeso.partitioning import (
    HISTOGRAM_LEVEL,
    ColumnSummaries,
    Partitioning,
    assign_with_capacity,
    boxes,
    cluster,
    jsd,
    mean_histograms,
    pack_in_order,
    quality,
    summarise,
)
from catalog.search.pexeso.pivots import map_to_pivots
from catalog.search.pexeso.source import IndexFrame, budget_vectors, partition_boxes

PARTITIONS_FACT = "partitions"  # pexeso_meta key: how the partitions were made, and their quality
_SCAN_VECTORS = 1 << 18  # at most this many vectors summarised at once (and never over the budget)
_CHUNK = 5_000  # rows per executemany UPDATE


@dataclass(frozen=True)
class _Summarised:
    refs: np.ndarray
    summaries: ColumnSummaries


def pivots_digest(pivots: np.ndarray) -> str:
    return hashlib.sha256(pivots.astype("<f4").tobytes()).hexdigest()[:16]


def partitioning_current(conn: Connection, frame: IndexFrame, *, before: int | None = None) -> bool:
    """Whether the catalog's partitions were made under these pivots, budget and histogram level,
    and every column (with column_ref below `before`, when given: those added since are placed
    next) has one."""
    fact = partition_fact(conn)
    if fact.get("pivots") != pivots_digest(frame.pivots) or fact.get("level") != _level(frame):
        return False
    if fact.get("memory_budget_mb") != frame.shape.memory_budget_mb:
        return False
    where = [PexesoColumn.partition.is_(None)] + ([] if before is None else [PexesoColumn.column_ref < before])
    missing = select(PexesoColumn.column_ref).where(*where).limit(1)
    return conn.execute(missing).first() is None


def partition_fact(conn: Connection) -> dict[str, Any]:
    text = conn.execute(select(PexesoMeta.value).where(PexesoMeta.key == PARTITIONS_FACT)).scalar()
    out: dict[str, Any] = json.loads(text) if text else {}
    return out


def repartition(conn: Connection, frame: IndexFrame) -> dict[str, int]:
    """Cluster every published column afresh (see the module docstring)."""
    capacity = budget_vectors(frame.shape.memory_budget_mb, frame.spec, frame.shape)
    done = _summarise(conn, frame, capacity, None)
    conn.execute(delete(PexesoPartition))
    if not len(done.refs):
        _write_fact(conn, frame, capacity, 1.0, 1.0, 0)
        return {"pexeso_partitions": 0}
    parts = cluster(done.summaries, capacity, seed=frame.shape.seed)
    _write_columns(conn, done.refs, parts.labels, parts.divergence)
    _write_partitions(conn, parts, range(len(parts.centres)))
    _write_fact(conn, frame, capacity, parts.quality, parts.quality, len(parts.centres))
    return {"pexeso_partitions": len(parts.centres)}


def assign_added(conn: Connection, frame: IndexFrame, first_ref: int) -> dict[str, int]:
    """Place the columns with column_ref >= `first_ref` (a batch's added ones) in the existing
    partitions, or new ones; record the quality after the batch."""
    fact = partition_fact(conn)
    capacity = int(fact["capacity"])
    done = _summarise(conn, frame, capacity, first_ref)
    n_new = 0
    if len(done.refs):
        n_new = _place(conn, frame, done, capacity)
    divergence = conn.execute(select(func.avg(PexesoColumn.divergence))).scalar()
    now = quality(np.array([float(divergence)])) if divergence is not None else 1.0
    n_partitions = conn.execute(select(func.count()).select_from(PexesoPartition)).scalar_one()
    _write_fact(conn, frame, capacity, float(fact["quality_at_partitioning"]), now, n_partitions)
    return {"pexeso_partitions": n_partitions, "pexeso_partitions_opened": n_new}


def _place(conn: Connection, frame: IndexFrame, done: _Summarised, capacity: int) -> int:
    """Assign summarised added columns; returns how many partitions were opened for them."""
    ids, centres, vocabulary = _centres(conn)
    h, sizes = done.summaries.histograms, done.summaries.sizes
    vocabulary = np.union1d(vocabulary, h.bins)
    labels = np.full(h.n_rows, -1, np.int64)
    divergence = np.zeros(h.n_rows)
    if len(ids):
        d = jsd(h, _densify(centres, vocabulary), vocabulary)
        at = assign_with_capacity(d, sizes, capacity, _loads(conn, ids))
        placed = np.flatnonzero(at >= 0)
        labels[placed] = ids[at[placed]]
        divergence[placed] = d[placed, at[placed]]
    rest = np.flatnonzero(labels < 0)
    opened = int(pack_in_order(sizes[rest], capacity).max()) + 1 if len(rest) else 0
    first_id = int(ids.max()) + 1 if len(ids) else 0
    if opened:  # columns no partition has room for: new partitions, filled in order
        groups = pack_in_order(sizes[rest], capacity)
        labels[rest] = first_id + groups
        new_centres = mean_histograms(h.take(rest), groups, opened, vocabulary)
        divergence[rest] = jsd(h.take(rest), new_centres, vocabulary)[np.arange(len(rest)), groups]
    _write_columns(conn, done.refs, labels, divergence)
    _grow_boxes(conn, frame, done.summaries, labels)
    if opened:
        low, high = boxes(_subset(done.summaries, rest), groups, opened)
        rows = [_partition_row(first_id + g, low[g], high[g], new_centres[g], vocabulary) for g in range(opened)]
        conn.execute(insert(PexesoPartition), rows)
    return opened


def _grow_boxes(conn: Connection, frame: IndexFrame, summaries: ColumnSummaries, labels: np.ndarray) -> None:
    """Widen the existing partitions' boxes to hold their added columns."""
    low, high = partition_boxes(conn, frame.shape.n_pivots)
    k = len(low)
    inside = labels < k
    if not inside.any():
        return
    add_low, add_high = boxes(_subset(summaries, np.flatnonzero(inside)), labels[inside], k)
    for p in np.unique(labels[inside]).tolist():
        conn.execute(
            update(PexesoPartition)
            .where(PexesoPartition.partition == p)
            .values(
                low=np.minimum(low[p], add_low[p]).astype("<f8").tobytes(),
                high=np.maximum(high[p], add_high[p]).astype("<f8").tobytes(),
            )
        )


def _subset(summaries: ColumnSummaries, rows: np.ndarray) -> ColumnSummaries:
    return ColumnSummaries(
        summaries.histograms.take(rows), summaries.low[rows], summaries.high[rows], summaries.sizes[rows]
    )


def _centres(conn: Connection) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """(partition ids, each centre's (bins, probabilities), every centre bin) of the catalog."""
    rows = conn.execute(
        select(PexesoPartition.partition, PexesoPartition.centre_bins, PexesoPartition.centre_probs).order_by(
            PexesoPartition.partition
        )
    ).all()
    centres = [(np.frombuffer(b, "<i8"), np.frombuffer(p, "<f8")) for _, b, p in rows]
    bins = np.unique(np.concatenate([b for b, _ in centres])) if centres else np.zeros(0, np.int64)
    return np.array([r[0] for r in rows], np.int64), centres, bins


def _densify(centres: list[tuple[np.ndarray, np.ndarray]], vocabulary: np.ndarray) -> np.ndarray:
    out = np.zeros((len(centres), len(vocabulary)))
    for i, (bins, probs) in enumerate(centres):
        out[i, np.searchsorted(vocabulary, bins)] = probs
    return out


def _loads(conn: Connection, ids: np.ndarray) -> np.ndarray:
    """The vectors each partition of `ids` holds now (the batch's added columns not yet placed)."""
    statement = (
        select(PexesoColumn.partition, func.sum(PexesoColumn.n_values))
        .where(PexesoColumn.partition.is_not(None))
        .group_by(PexesoColumn.partition)
    )
    held = dict(conn.execute(statement).tuples().all())
    return np.array([int(held.get(p, 0)) for p in ids.tolist()], np.int64)


def _level(frame: IndexFrame) -> int:
    return min(HISTOGRAM_LEVEL, frame.shape.levels)


def _summarise(conn: Connection, frame: IndexFrame, capacity: int, first_ref: int | None) -> _Summarised:
    """Summaries of the columns (from `first_ref` on, when given), read and mapped a chunk of at
    most min(capacity, _SCAN_VECTORS) vectors at a time."""
    where = [] if first_ref is None else [PexesoColumn.column_ref >= first_ref]
    sizes = conn.execute(
        select(PexesoColumn.column_ref, PexesoColumn.n_values).where(*where).order_by(PexesoColumn.column_ref)
    ).all()
    refs = np.array([r[0] for r in sizes], np.int64)
    groups = pack_in_order(np.array([r[1] for r in sizes], np.int64), min(capacity, _SCAN_VECTORS))
    parts: list[ColumnSummaries] = []
    dimension = frame.spec.dimension
    for g in np.unique(groups).tolist():
        chunk = refs[groups == g]
        blobs = conn.execute(
            select(PexesoColumn.vectors)
            .where(PexesoColumn.column_ref.between(int(chunk[0]), int(chunk[-1])))
            .order_by(PexesoColumn.column_ref)
        ).scalars()
        arrays = [np.frombuffer(b, "<f4").reshape(-1, dimension) for b in blobs]
        column_of = np.repeat(np.arange(len(arrays)), [len(a) for a in arrays])
        mapped = map_to_pivots(np.concatenate(arrays), frame.pivots)
        parts.append(summarise(mapped, column_of, len(arrays), _level(frame)))
    return _Summarised(refs, ColumnSummaries.concat(parts, frame.shape.n_pivots))


def _write_columns(conn: Connection, refs: np.ndarray, labels: np.ndarray, divergence: np.ndarray) -> None:
    """Record each column's partition and divergence (one executemany UPDATE by primary key)."""
    statement = (
        update(PexesoColumn)
        .where(PexesoColumn.column_ref == bindparam("ref"))
        .values(partition=bindparam("label"), divergence=bindparam("value"))
    )
    rows = [
        {"ref": r, "label": p, "value": v}
        for r, p, v in zip(refs.tolist(), labels.tolist(), divergence.tolist(), strict=True)
    ]
    for i in range(0, len(rows), _CHUNK):
        conn.execute(statement, rows[i : i + _CHUNK])


def _partition_row(
    partition: int, low: np.ndarray, high: np.ndarray, centre: np.ndarray, vocabulary: np.ndarray
) -> dict[str, Any]:
    nonzero = np.flatnonzero(centre > 0)
    return {
        "partition": partition,
        "low": low.astype("<f8").tobytes(),
        "high": high.astype("<f8").tobytes(),
        "centre_bins": vocabulary[nonzero].astype("<i8").tobytes(),
        "centre_probs": centre[nonzero].astype("<f8").tobytes(),
    }


def _write_partitions(conn: Connection, parts: Partitioning, ids: range) -> None:
    rows = [_partition_row(p, parts.low[p], parts.high[p], parts.centres[p], parts.vocabulary) for p in ids]
    if rows:
        conn.execute(insert(PexesoPartition), rows)


def _write_fact(conn: Connection, frame: IndexFrame, capacity: int, at: float, now: float, n: int) -> None:
    fact = {
        "level": _level(frame),
        "memory_budget_mb": frame.shape.memory_budget_mb,
        "capacity": capacity,
        "pivots": pivots_digest(frame.pivots),
        "n_partitions": n,
        "quality_at_partitioning": at,
        "quality": now,
    }
    conn.execute(delete(PexesoMeta).where(PexesoMeta.key == PARTITIONS_FACT))
    conn.execute(insert(PexesoMeta), [{"key": PARTITIONS_FACT, "value": json.dumps(fact)}])


def repartition_due(fact: dict[str, Any], share: float) -> bool:
    """Whether the recorded quality fell by `share` of what it was when partitioned."""
    if "quality" not in fact:
        return False
    return float(fact["quality"]) < (1.0 - share) * float(fact["quality_at_partitioning"])
