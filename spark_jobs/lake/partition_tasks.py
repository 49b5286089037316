"""A partition's rows read, and its new files written, with Arrow where the work runs.

A job that needs every row of a table together (MATE indexes a table's rows in one pass) could read
the lake through Spark and group the rows by table, but that shuffles every cell of the lake: on the
full seed (65 M cells) the shuffle was most of MATE's index build. The lake already keeps each
table's rows in one partition (`cells` by `bucket`), so a task given one partition's files (`LakeStore
.files_by_partition`) can read them itself and hand each table's rows on whole, with no shuffle.

A partition is read in chunks of whole tables of at most `max_rows` rows each (a table of more rows
is a chunk on its own), so a task's memory is bounded by its largest table, not by its partition.
A task that made its partition's rows of a lake table writes them as a file of a staged write
(`write_staged_file`, `LakeStore.staged_write`) and the driver commits them, rather than handing
them back to Spark, which would shuffle them by partition to write them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from catalog.core.filesystems import filesystem_of
from spark_jobs.lake.store import GROUP_ROWS

TABLE_ID = "table_id"


def partition_tables(
    uris: Sequence[str],
    columns: Sequence[str],
    *,
    tables: Sequence[str] | None = None,
    where: pc.Expression | None = None,
    max_rows: int,
) -> Iterator[pa.Table]:
    """Each table's rows (`columns`, `table_id` among them) in the files `uris`, one Arrow table
    per table id: all of them, or those in `tables`; only the rows `where` keeps."""
    dataset = _dataset(uris)
    chosen = pc.field(TABLE_ID).isin(list(tables)) if tables is not None else None
    counts = pc.value_counts(dataset.to_table(columns=[TABLE_ID], filter=_and(chosen, where)).column(0))
    sizes = sorted(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True))
    chunks = _chunks(sizes, max_rows)
    for chunk in chunks:
        only = chosen if len(chunks) == 1 else pc.field(TABLE_ID).isin(chunk)
        yield from by_table(dataset.to_table(columns=list(columns), filter=_and(only, where)))


def by_table(rows: pa.Table) -> Iterator[pa.Table]:
    """`rows` split into one table per `table_id` (in the order of first appearance)."""
    if rows.num_rows == 0:
        return
    ids = pc.dictionary_encode(rows.column(TABLE_ID).combine_chunks())
    codes = ids.indices.to_numpy()
    order = np.argsort(codes, kind="stable")
    grouped = rows.take(pa.array(order))
    ends = np.flatnonzero(np.diff(codes[order])) + 1
    for start, end in zip(np.r_[0, ends], np.r_[ends, len(order)], strict=True):
        yield grouped.slice(int(start), int(end - start))


def _chunks(sizes: Sequence[tuple[str, int]], max_rows: int) -> list[list[str]]:
    """Table ids in groups of at most `max_rows` rows together (a larger table alone)."""
    out: list[list[str]] = []
    held = max_rows
    for table_id, n in sizes:
        if held + n > max_rows:
            out.append([])
            held = 0
        out[-1].append(table_id)
        held += n
    return out


def _and(a: pc.Expression | None, b: pc.Expression | None) -> pc.Expression | None:
    return b if a is None else a if b is None else a & b


def _dataset(uris: Sequence[str]) -> pads.Dataset:
    """The parquet files `uris` (local paths, or URIs of one filesystem) as one dataset."""
    fs = filesystem_of(uris[0])[0] if uris else pafs.LocalFileSystem()
    return pads.dataset([filesystem_of(u)[1] for u in uris], format="parquet", filesystem=fs)


def write_staged_file(folder: str, partition: Mapping[str, Any], rows: pa.Table) -> None:
    """`rows` (without the partition columns) as one Parquet file under `folder` (a
    `LakeStore.staged_write`) in the partition's hive folder, for the driver to commit."""
    fs, root = filesystem_of(folder)
    where = "/".join([root.rstrip("/"), *(f"{column}={value}" for column, value in partition.items())])
    fs.create_dir(where, recursive=True)
    pq.write_table(rows, f"{where}/part-{uuid.uuid4().hex}.parquet", filesystem=fs, row_group_size=GROUP_ROWS)
