"""The lake's vectors as blocks of whole columns, each within half a memory budget, for the
precomputed semantic lists' range join (`lists`): one block joined with another at a time, so a
refresh never holds more than a budget's worth of lake vectors; two blocks whose boxes in pivot
space are more than 2τ apart on some pivot are never joined (no pair of their vectors can match).

A block's vectors come in its columns' order, each column's in its stored order, so a vector's
number (block offset + row) is the same whenever the block is read again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection, select

from catalog.search.pexeso.index import ColumnRef, PexesoIndex
from catalog.search.pexeso.models import PexesoColumn
from catalog.search.pexeso.partitioning import boxes_apart
from catalog.search.pexeso.source import Load, partitions, range_condition


@dataclass(frozen=True)
class LakeBlocks:
    """Every column (`columns`, numbered by position), its vectors (`sizes`), and the blocks: each
    block's column numbers in its vectors' order, its box, and how to read its vectors."""

    columns: Sequence[ColumnRef]
    sizes: np.ndarray
    block_columns: list[np.ndarray]
    low: np.ndarray  # (blocks, |P|)
    high: np.ndarray
    read: Callable[[int], np.ndarray]

    def owners(self, block: int) -> np.ndarray:
        """The column number of each of the block's vectors."""
        cols = self.block_columns[block]
        return np.repeat(cols, self.sizes[cols])

    def offsets(self) -> np.ndarray:
        """Where each block's vector numbers begin."""
        totals = [int(self.sizes[c].sum()) for c in self.block_columns]
        return np.concatenate([[0], np.cumsum(totals)]).astype(np.int64)

    def apart(self, a: int, b: int, radius: float) -> bool:
        return boxes_apart(self.low[a], self.high[a], self.low[b], self.high[b], radius)

    @classmethod
    def of_index(cls, index: PexesoIndex) -> LakeBlocks:
        """An index in memory as one block."""
        order, starts = index.column_rows
        vectors = index.vectors[order]
        p = index.pivots.shape[0]
        return cls(
            index.columns,
            np.diff(starts).astype(np.int64),
            [np.arange(len(index.columns), dtype=np.int64)],
            np.full((1, p), -np.inf),
            np.full((1, p), np.inf),
            lambda _: vectors,
        )


def catalog_blocks(conn: Connection, memory_budget_mb: float) -> LakeBlocks:
    """The published columns as blocks of whole columns of at most half `memory_budget_mb` each,
    cut along the partitions (so a block's box is that of few, similar columns)."""
    parts = partitions(conn, memory_budget_mb)
    half = parts.capacity // 2
    loads = parts.with_capacity(max(1, half))
    rows = conn.execute(
        select(PexesoColumn.column_ref, PexesoColumn.column_id, PexesoColumn.table_id, PexesoColumn.header)
        .add_columns(PexesoColumn.n_values)
        .order_by(PexesoColumn.column_ref)
    ).all()
    position = {r[0]: i for i, r in enumerate(rows)}
    columns = [ColumnRef(r[1], r[2], r[3]) for r in rows]
    sizes = np.array([r[4] for r in rows], np.int64)
    block_refs = [_refs(parts.refs, parts.partition_of, load) for load in loads]
    block_columns = [np.array([position[r] for r in refs.tolist()], np.int64) for refs in block_refs]
    low, high = _load_boxes(parts.low, parts.high, loads)
    dimension = parts.frame.spec.dimension

    def read(block: int) -> np.ndarray:
        statement = select(PexesoColumn.column_ref, PexesoColumn.vectors)
        blobs = {
            ref: blob
            for r in loads[block].ranges  # one SELECT a range (as `source` loads)
            for ref, blob in conn.execute(statement.where(range_condition(*r))).tuples()
        }
        arrays = [np.frombuffer(blobs[r], "<f4").reshape(-1, dimension) for r in block_refs[block].tolist()]
        return np.concatenate(arrays) if arrays else np.zeros((0, dimension), np.float32)

    return LakeBlocks(columns, sizes, block_columns, low, high, read)


def _refs(refs: np.ndarray, partition_of: np.ndarray, load: Load) -> np.ndarray:
    """The column_refs of a load, in (partition, column_ref) order."""
    out = []
    for partition, first, last in load.ranges:
        p = -1 if partition is None else partition
        out.append(refs[(partition_of == p) & (refs >= first) & (refs <= last)])
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def _load_boxes(low: np.ndarray, high: np.ndarray, loads: list[Load]) -> tuple[np.ndarray, np.ndarray]:
    """Each load's box: the union of its partitions' (unbounded for columns with no partition)."""
    p = low.shape[1]
    out_low, out_high = np.full((len(loads), p), np.inf), np.full((len(loads), p), -np.inf)
    for i, load in enumerate(loads):
        for partition, _, _ in load.ranges:
            if partition is None or partition >= len(low):
                out_low[i], out_high[i] = -np.inf, np.inf
            else:
                out_low[i] = np.minimum(out_low[i], low[partition])
                out_high[i] = np.maximum(out_high[i], high[partition])
    return out_low, out_high
