"""The only module that touches Delta tables: read, append, overwrite, overwrite-where, merge,
delete-where, version and history.

Two engines:

* **delta-rs** (default here): the data is written as Parquet files by Spark (or pyarrow for small
  Arrow inputs) into a staging folder, moved into the table folder, and then committed by delta-rs
  in *one* transaction (`create_write_transaction` with add and remove actions). Until that commit
  the new files are invisible, so a writer killed at any point leaves readers on the previous
  version; a rerun writes fresh files and commits. Replacing rows (overwrite-where, merge) rewrites
  only the files that can hold affected rows — in the matching partitions, and among those the
  files whose min/max statistics can hold the replaced values — and removes the old files in the
  same commit. Overwrite-where writes Arrow data in the order of the replaced column, at most
  `FILE_ROWS` rows a file, so that those ranges stay narrow: a batch that replaces 1% of the
  tables in `cells` rewrites (and its readers read) a few files, not whole partitions.
* **delta-spark**, when the session has the Delta jars: Spark's own Delta writer and `DeltaTable`.

Readers never go through delta-rs's pyarrow dataset: with deltalake 1.1.4 to 1.6.6 and pyarrow 22
and 26, a process that read through it aborted at exit ("terminate called without an active
exception", status 134) in about a third of runs. Spark reads the snapshot's files with `basePath`
so Hive-style partition folders come back as columns, and `read_arrow` uses pyarrow's own dataset
over the same file list.

Committed versions: the tables of a unit (bronze, a stage, an index family) are only meaningful
together, so readers never read them at their latest version. A store *pins* every table a unit's
manifest names (`spark_jobs.lake.commit_point`) to the version the manifest commits; reads,
`exists` and `version` see that version, and a table version written after the manifest (by a
writer killed before its commit point) is invisible. A write through this store advances the pin
of the table it writes, so a writer reads its own writes before it commits them.
"""

from __future__ import annotations

import bisect
import datetime as dt
import itertools
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Union
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import TableNotFoundError
from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions

from catalog.core.errors import LakeError
from catalog.core.filesystems import filesystem_of
from spark_jobs.lake import faults
from spark_jobs.lake.frames import local_frame
from spark_jobs.lake.manifest import ABSENT, MANIFEST_SUFFIX, Manifest, manifest_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

Engine = Literal["auto", "delta-rs", "delta-spark"]
# What a write takes: a Spark DataFrame (written by the executors), or an Arrow table or a stream of
# Arrow batches (written by pyarrow; a stream is never held in memory whole).
Data = Union["DataFrame", pa.Table, pa.RecordBatchReader]
_STAGING = "_staging"
_IN_CHUNK = 5000  # values per IN (...) list in one predicate
# Rows per Parquet file and per row group in Arrow writes. Files stay small enough that a batch
# rewrites or reads only the few files whose value ranges hold its rows (see `_in_ranges`).
FILE_ROWS = 262_144
GROUP_ROWS = 65_536
STREAM_ROWS = 4 * FILE_ROWS  # rows of a stream held at once by an Arrow write


@dataclass(frozen=True)
class CommitResult:
    """What one write did. `skipped`: nothing to do (e.g. a delete on a table that does not exist)."""

    table: str
    version: int
    n_files_added: int = 0
    n_files_removed: int = 0
    n_rows_written: int = 0
    skipped: bool = False


def delta_file_paths(table: DeltaTable, filters: Any = None) -> list[str]:
    """The snapshot's data files as paths Spark and pyarrow open: delta-rs percent-encodes local
    paths (`/data/my%20lake/…`) without a scheme, so those are decoded; remote URIs are kept."""
    return [uri if "://" in uri else unquote(uri) for uri in table.file_uris(filters)]


def sql_literal(value: Any) -> str:
    """A value as a literal in a delta-rs (DataFusion SQL) predicate. The one quoting helper."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def sql_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def in_predicate(column: str, values: Sequence[Any]) -> str:
    """`"col" IN (...)`, split into OR-ed chunks so no single list grows unbounded."""
    if not values:
        return "FALSE"
    ident = sql_identifier(column)
    chunks = [values[i : i + _IN_CHUNK] for i in range(0, len(values), _IN_CHUNK)]
    return " OR ".join(f"{ident} IN ({', '.join(sql_literal(v) for v in chunk)})" for chunk in chunks)


@dataclass(frozen=True)
class StagedWrite:
    """Where tasks write a table's new files (`LakeStore.staged_write`): `uri` is a folder of the
    lake; a file goes under its hive partition folders (`bucket=3/…`)."""

    name: str
    write_id: str
    uri: str


class LakeStore:
    """Delta tables under one root (a local path or any URI pyarrow and delta-rs both understand).

    `spark` is needed to write or read Spark DataFrames; Arrow reads and writes work without it.
    `pins` fixes the versions readers see (default: the current manifests of every unit, loaded on
    first use); `pinned=False` reads every table at its latest version (maintenance and tests).
    """

    def __init__(
        self,
        root: str,
        spark: SparkSession | None = None,
        *,
        engine: Engine = "auto",
        pins: Mapping[str, int] | None = None,
        pinned: bool = True,
    ) -> None:
        self.root = root.rstrip("/")
        self.spark = spark
        # Fixed pins (an explicit snapshot, or none at all when unpinned); else the current manifests,
        # re-read whenever a manifest changed, plus this store's own begin() and writes on top.
        self._fixed: dict[str, int] | None = dict(pins) if pins is not None else (None if pinned else {})
        self._overrides: dict[str, int] = {}
        self._manifest_cache: dict[str, tuple[int, dict[str, int]]] = {}
        local = "://" not in self.root
        self._fs, self._fs_root = pafs.FileSystem.from_uri(os.path.abspath(self.root) if local else self.root)
        self.engine = self._pick_engine(engine)

    def _pick_engine(self, engine: Engine) -> str:
        if engine != "auto":
            if engine == "delta-spark" and self.spark is None:
                raise LakeError(self.root, "the delta-spark engine needs a Spark session")
            return engine
        if self.spark is not None:
            from spark_jobs.lake.session import has_delta_jars  # deferred: Arrow-only callers never load Spark

            if has_delta_jars(self.spark):
                return "delta-spark"
        return "delta-rs"

    # ------------------------------------------------------------------ locations and metadata
    def uri(self, name: str) -> str:
        if not name or "/" in name or name.startswith((".", "_")):
            raise LakeError(name, "lake table names are simple words")
        base = self.root if "://" in self.root else os.path.abspath(self.root)
        return f"{base}/{name}"

    def _fs_path(self, name: str, *rest: str) -> str:
        return "/".join([self._fs_root.rstrip("/"), name, *rest])

    def exists(self, name: str) -> bool:
        pin = self.pinned_version(name)
        if pin is not None:
            return pin != ABSENT
        return self.physically_exists(name)

    def physically_exists(self, name: str) -> bool:
        """Whether a Delta table is on disk, committed by a manifest or not."""
        return DeltaTable.is_deltatable(self.uri(name))

    def _table(self, name: str, version: int | None = None) -> DeltaTable:
        if version is None:
            pin = self.pinned_version(name)
            if pin == ABSENT:
                raise LakeError(name, "no committed version of this table yet")
            version = pin
        try:
            return DeltaTable(self.uri(name), version=version)
        except TableNotFoundError:
            raise LakeError(name, f"no Delta table at {self.uri(name)}") from None

    def _latest(self, name: str) -> DeltaTable:
        """The table at its latest version, for a write. A pinned table must be at its pin: a unit's
        writer rolls back uncommitted versions first (`commit_point.begin`), and this check makes a
        write that skipped that step fail instead of building on uncommitted data."""
        table = DeltaTable(self.uri(name))
        pin = self.pinned_version(name)
        if pin is not None and pin != table.version():
            raise LakeError(
                name,
                f"table is at version {table.version()} but version {pin} is committed: "
                "its unit's writer must begin() before writing",
            )
        return table

    def version(self, name: str) -> int:
        return self._table(name).version()

    def latest_version(self, name: str) -> int:
        return DeltaTable(self.uri(name)).version()

    # ------------------------------------------------------------------ pins and manifests
    def pinned_version(self, name: str) -> int | None:
        """The version readers of `name` see (ABSENT: none committed), or None for an unpinned table."""
        return self._load_pins().get(name)

    def pin(self, name: str, version: int) -> None:
        (self._fixed if self._fixed is not None else self._overrides)[name] = version

    def settle(self, names: Sequence[str]) -> None:
        """Drop this store's own pins of `names` once their manifest is committed: from then on it
        reads them at whatever the current manifest says, like any reader."""
        for name in names:
            self._overrides.pop(name, None)

    def _advance(self, name: str, version: int) -> None:
        if name in self._load_pins():
            self.pin(name, version)

    def _load_pins(self) -> dict[str, int]:
        if self._fixed is not None:
            return self._fixed
        pins: dict[str, int] = {}
        for unit, version in self._manifest_versions().items():
            cached = self._manifest_cache.get(unit)
            if cached is None or cached[0] != version:
                manifest = self.manifest(unit, version)
                cached = (version, manifest.pins() if manifest else {})
                self._manifest_cache[unit] = cached
            pins.update(cached[1])
        pins.update(self._overrides)
        return pins

    def _manifest_versions(self) -> dict[str, int]:
        """unit -> latest version of its manifest table, from file names alone (a directory listing
        per unit, no log replay), so a store can check before every read that its pins are current."""
        out = {}
        for unit in self.unit_names():
            log_dir = self._fs_path(manifest_table(unit), "_delta_log")
            names = [i.base_name for i in self._fs.get_file_info(pafs.FileSelector(log_dir, allow_not_found=True))]
            versions = [int(n[:20]) for n in names if n.endswith(".json") and n[:20].isdigit()]
            if versions:
                out[unit] = max(versions)
        return out

    def unit_names(self) -> list[str]:
        """Units with a manifest table in this lake."""
        try:
            infos = self._fs.get_file_info(pafs.FileSelector(self._fs_root, allow_not_found=True))
        except (FileNotFoundError, OSError):
            return []
        return sorted(
            i.base_name[: -len(MANIFEST_SUFFIX)]
            for i in infos
            if i.type == pafs.FileType.Directory and i.base_name.endswith(MANIFEST_SUFFIX)
        )

    def manifests(self) -> list[Manifest]:
        out = []
        for unit in self.unit_names():
            manifest = self.manifest(unit)
            if manifest is not None:
                out.append(manifest)
        return out

    def manifest(self, unit: str, version: int | None = None) -> Manifest | None:
        """A unit's manifest (current, or at a version of its manifest table); None if it has none."""
        name = manifest_table(unit)
        if not DeltaTable.is_deltatable(self.uri(name)):
            return None
        rows = self._read_table(DeltaTable(self.uri(name), version=version), name, None).to_pylist()
        return Manifest.from_row(rows[0]) if rows else None

    def one_row(self, name: str) -> dict[str, Any] | None:
        """The row of a one-row table (an index family's state), as readers see it; None when the
        table does not exist or is empty."""
        if not self.exists(name):
            return None
        rows = self.read_arrow(name).to_pylist()
        return rows[0] if rows else None

    def with_pins(self, pins: Mapping[str, int]) -> LakeStore:
        """Another store on the same lake whose readers see `pins` (e.g. the state after a batch)."""
        store = LakeStore(self.root, self.spark, pins=pins)
        store.engine = self.engine
        return store

    def restore(self, name: str, version: int) -> CommitResult:
        """Roll `name` back to `version` (a new commit whose content is that version's)."""
        faults.checkpoint(f"restore:{name}")
        table = DeltaTable(self.uri(name))
        table.restore(version)
        new_version = table.version()
        self._advance(name, new_version)
        log.info("lake rollback", extra={"table": name, "to_version": version, "version": new_version})
        return CommitResult(name, new_version)

    def drop(self, name: str) -> None:
        """Remove a table that no manifest ever committed. Log entries go newest first, so a drop
        killed half-way leaves an older, still valid table that the next drop removes."""
        faults.checkpoint(f"restore:{name}")
        log_dir = self._fs_path(name, "_delta_log")
        entries = [
            i
            for i in self._fs.get_file_info(pafs.FileSelector(log_dir, allow_not_found=True))
            if i.type == pafs.FileType.File
        ]
        for info in sorted(entries, key=lambda i: i.base_name, reverse=True):
            self._fs.delete_file(info.path)
        self._fs.delete_dir(self._fs_path(name))
        log.info("lake table dropped", extra={"table": name})

    def history(self, name: str, limit: int | None = None) -> list[dict[str, Any]]:
        return self._table(name).history(limit)

    def partition_columns(self, name: str) -> list[str]:
        return list(self._table(name).metadata().partition_columns)

    def arrow_schema(self, name: str) -> pa.Schema:
        return pa.schema(self._table(name).schema().to_arrow())

    # ------------------------------------------------------------------ reads
    def read(
        self,
        name: str,
        *,
        columns: Sequence[str] | None = None,
        where: Mapping[str, Sequence[Any]] | None = None,
        version: int | None = None,
    ) -> DataFrame:
        """A Spark DataFrame of the table's snapshot (latest, or `version`), optionally filtered."""
        spark = self._need_spark("read")
        if self.engine == "delta-spark":
            reader = spark.read.format("delta")
            if version is not None:
                reader = reader.option("versionAsOf", version)
            df = reader.load(self.uri(name))
        else:
            from pyspark.sql.pandas.types import from_arrow_schema  # deferred: Arrow-only callers never load Spark

            table = self._table(name, version)
            schema = from_arrow_schema(pa.schema(table.schema().to_arrow()))
            files = self._files(table, where)
            if files:
                df = spark.read.schema(schema).option("basePath", self.uri(name)).parquet(*files)
                df = df.select(*schema.fieldNames())
            else:
                df = local_frame(spark, [], schema)
        df = _spark_filter(df, where)
        return df.select(*columns) if columns else df

    def read_arrow(
        self,
        name: str,
        *,
        columns: Sequence[str] | None = None,
        where: Mapping[str, Sequence[Any]] | None = None,
        version: int | None = None,
    ) -> pa.Table:
        """The snapshot as an Arrow table, without Spark (for small tables and non-Spark callers)."""
        return self._read_table(self._table(name, version), name, where, columns)

    def _read_table(
        self,
        table: DeltaTable,
        name: str,
        where: Mapping[str, Sequence[Any]] | None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        schema = pa.schema(table.schema().to_arrow())
        files = self._files(table, where)
        if not files:
            out = schema.empty_table()
        else:
            parts = [f for f in schema if f.name in table.metadata().partition_columns]
            dataset = pads.dataset(
                [filesystem_of(f)[1] for f in files],
                schema=schema,
                format="parquet",
                filesystem=self._fs,
                partitioning=pads.partitioning(pa.schema(parts), flavor="hive") if parts else None,
                partition_base_dir=self._fs_path(name),
            )
            # only the columns asked for and those `where` filters on (a count of a table of packed
            # vectors reads two small columns, not the vectors)
            needed = list(dict.fromkeys([*columns, *(where or {})])) if columns else None
            out = dataset.to_table(columns=needed)
        out = _arrow_filter(out, where)
        return out.select(list(columns)) if columns else out

    def files_by_partition(
        self, name: str, column: str, *, where: Mapping[str, Sequence[Any]] | None = None
    ) -> dict[str, list[str]]:
        """The snapshot's data files (pruned as `read` prunes them) grouped by their value of the
        partition `column`, for work split by partition and read on the executors."""
        table = self._table(name)
        if column not in table.metadata().partition_columns:
            raise LakeError(name, f"{column!r} is not a partition column")
        out: dict[str, list[str]] = {}
        for uri in self._files(table, where):
            folders = unquote(uri).split("/")
            value = next(f.split("=", 1)[1] for f in folders if f.startswith(f"{column}="))
            out.setdefault(value, []).append(uri)
        return out

    def _files(self, table: DeltaTable, where: Mapping[str, Sequence[Any]] | None) -> list[str]:
        """Snapshot file URIs, pruned by partition values when `where` names a partition column, and
        by the files' min/max statistics when it names another column (e.g. a batch's table ids)."""
        parts = set(table.metadata().partition_columns)
        filters = [(c, "in", [str(v) for v in vals]) for c, vals in (where or {}).items() if c in parts]
        uris = delta_file_paths(table, filters or None)
        by_stats = {c: vals for c, vals in (where or {}).items() if c not in parts}
        if not by_stats:
            return uris
        actions = _add_actions(table)
        hits = _in_ranges(actions, by_stats)
        outside = {unquote(p) for p, hit in zip(actions["path"].to_pylist(), hits, strict=True) if not hit}
        depth = len(parts) + 1  # a file's path relative to the table: its partition folders and its name
        return [u for u in uris if "/".join(unquote(u).split("/")[-depth:]) not in outside]

    # ------------------------------------------------------------------ writes
    def append(self, name: str, data: Data, *, partition_by: Sequence[str] = ()) -> CommitResult:
        """Add rows; creates the table (with `partition_by`) if it does not exist."""
        return self._write(name, data, mode="append", partition_by=partition_by)

    def overwrite(
        self, name: str, data: Data, *, partition_by: Sequence[str] = (), new_schema: bool = False
    ) -> CommitResult:
        """Replace the whole table's content in one commit (its history is kept). `new_schema`: the
        data's schema replaces the table's (a derived table whose columns changed between releases,
        recomputed in full); otherwise a different schema is an error."""
        return self._write(name, data, mode="overwrite", partition_by=partition_by, new_schema=new_schema)

    def overwrite_where(
        self,
        name: str,
        data: Data,
        *,
        column: str,
        values: Sequence[Any],
        partitions: Mapping[str, Sequence[Any]] | None = None,
        partition_by: Sequence[str] = (),
    ) -> CommitResult:
        """Replace every row whose `column` is in `values` by `data`, atomically (e.g. the cells of
        the tables of one batch). Rows of `data` should themselves carry one of `values`.
        `partitions` names the partition values those rows can live in (e.g. their table buckets),
        so that only those partitions are rewritten. Arrow data is written in `column` order, so each
        file holds a narrow range of its values and the next replacement rewrites few of them
        (Spark data is not sorted: see `_stage_files`)."""
        if not self.exists(name):
            return self._write(name, data, mode="append", partition_by=partition_by, cluster_by=column)
        if self.engine == "delta-spark":
            return self._spark_replace(name, data, predicate=in_predicate(column, list(values)))
        return self._replace(
            name,
            data,
            keep=lambda old: _without_values(old, column, values),
            where={column: list(values), **(partitions or {})},
            cluster_by=column,
        )

    def merge(self, name: str, data: Data, *, keys: Sequence[str], partition_by: Sequence[str] = ()) -> CommitResult:
        """Upsert by `keys`: rows of `data` replace rows with equal keys, the rest are inserted."""
        if not keys:
            raise LakeError(name, "merge needs at least one key column")
        if isinstance(data, pa.RecordBatchReader):
            data = data.read_all()  # an upsert compares keys with the whole input
        if not self.exists(name):
            return self.append(name, data, partition_by=partition_by)
        if self.engine == "delta-spark":
            return self._spark_merge(name, data, keys)
        where = {keys[0]: _distinct_values(data, keys[0])} if len(keys) == 1 else None
        return self._replace(name, data, keep=lambda old: _without_keys(old, data, keys), where=where)

    def delete_where(
        self, name: str, *, column: str, values: Sequence[Any], partitions: Mapping[str, Sequence[Any]] | None = None
    ) -> CommitResult:
        """Delete every row whose `column` is in `values`, in one commit (`partitions` as in
        `overwrite_where`: where those rows can live, to skip reading the other files)."""
        if not self.exists(name):
            return CommitResult(name, -1, skipped=True)
        table = self._latest(name)
        predicate = f"({in_predicate(column, list(values))})"
        for part_col, part_values in (partitions or {}).items():
            predicate = f"({in_predicate(part_col, list(part_values))}) AND {predicate}"
        faults.checkpoint(f"commit:{name}")
        metrics = table.delete(predicate)
        self._advance(name, table.version())
        return CommitResult(
            name,
            table.version(),
            n_files_added=int(metrics.get("num_added_files", 0)),
            n_files_removed=int(metrics.get("num_removed_files", 0)),
        )

    def staged_write(self, name: str) -> StagedWrite:
        """A folder where tasks write a table's new content as Parquet files (`write_staged_file`)
        for `overwrite_staged` to commit: a job whose tasks already hold their partition's rows
        writes them where it made them, without handing them back to Spark to shuffle by partition."""
        write_id = uuid.uuid4().hex
        return StagedWrite(name, write_id, f"{self.uri(name)}/{_STAGING}/{write_id}")

    def overwrite_staged(self, staged: StagedWrite, schema: pa.Schema, *, partition_by: Sequence[str]) -> CommitResult:
        """Replace the table's content by the files staged in `staged` (rows of `schema`, the
        partition columns in the folder names), in one commit, as `overwrite` does."""
        name = staged.name
        if self.engine == "delta-spark":
            spark = self._need_spark("overwrite_staged")
            frame = spark.read.option("basePath", staged.uri).parquet(staged.uri).select(*schema.names)
            result = self._spark_write(name, frame, mode="overwrite", partition_by=partition_by, new_schema=False)
            self._fs.delete_dir_contents(self._fs_path(name, _STAGING, staged.write_id), missing_dir_ok=True)
            return result
        if not partition_by and self.exists(name) and self.partition_columns(name):
            # the tasks laid the files out in `partition_by`'s folders (none here), so the table's own
            # partitioning cannot be taken for it as `_commit_files` takes it for an empty one
            raise LakeError(name, f"table is partitioned by {self.partition_columns(name)}, not []")
        return self._commit_files(
            name,
            schema,
            partition_by=partition_by,
            overwrite=True,
            stage=lambda parts: self._adopt_staged(name, staged.write_id),
        )

    # ------------------------------------------------------------------ delta-rs machinery
    def _write(
        self,
        name: str,
        data: Data,
        *,
        mode: str,
        partition_by: Sequence[str],
        cluster_by: str | None = None,
        new_schema: bool = False,
    ) -> CommitResult:
        if self.engine == "delta-spark":
            return self._spark_write(name, data, mode=mode, partition_by=partition_by, new_schema=new_schema)
        return self._commit_files(
            name,
            _arrow_schema_of(data),
            partition_by=partition_by,
            overwrite=mode == "overwrite",
            new_schema=new_schema,
            stage=lambda parts: self._stage_files(name, data, parts, cluster_by),
        )

    def _commit_files(
        self,
        name: str,
        schema: pa.Schema,
        *,
        partition_by: Sequence[str],
        overwrite: bool,
        stage: Callable[[list[str]], tuple[list[AddAction], int]],
        new_schema: bool = False,
    ) -> CommitResult:
        """Check the table's partitioning (an empty `partition_by` takes the table's) and schema,
        `stage` the new files in its partition folders, and commit them, removing every old file
        for an overwrite; a table that does not exist yet is created."""
        exists = self.exists(name)
        parts = self.partition_columns(name) if exists else list(partition_by)
        if exists and partition_by and list(partition_by) != parts:
            raise LakeError(name, f"table is partitioned by {parts}, not {list(partition_by)}")
        if exists and not new_schema:
            self._check_schema(name, schema)
        adds, n_rows = stage(parts)
        removes = self._removes(_add_actions(self._latest(name))) if exists and overwrite else []
        return self._commit(name, adds, removes, schema, parts, n_rows, create=not exists, new_schema=new_schema)

    def _replace(
        self,
        name: str,
        data: Data,
        *,
        keep: Callable[[Any], Any],
        where: Mapping[str, Sequence[Any]] | None,
        cluster_by: str | None = None,
    ) -> CommitResult:
        """Rewrite the files that may hold rows to drop: keep their other rows, add `data`."""
        table = self._latest(name)
        parts = list(table.metadata().partition_columns)
        schema = _arrow_schema_of(data)
        self._check_schema(name, schema)
        affected = self._affected_actions(table, where)
        affected_uris = [f"{self.uri(name)}/{p}" for p in affected["path"]]
        if _is_spark(data):
            combined = keep(self._read_uris(name, affected_uris)).unionByName(data) if affected_uris else data
            adds, n_rows = self._stage_files(name, combined, parts, cluster_by)
        else:
            adds, n_rows = self._rewrite_arrow(name, data, keep, affected_uris, parts, schema, cluster_by)
        return self._commit(name, adds, self._removes(affected), schema, parts, n_rows, create=False)

    def _rewrite_arrow(
        self,
        name: str,
        data: pa.Table | pa.RecordBatchReader,
        keep: Callable[[Any], Any],
        affected_uris: list[str],
        parts: list[str],
        schema: pa.Schema,
        cluster_by: str | None,
    ) -> tuple[list[AddAction], int]:
        """Copy-on-write, one affected file at a time (memory holds one file, never the table): a
        large file less its dropped rows is rewritten on its own, so its value range stays as narrow
        as it was; small remainders are pooled with `data` into fresh files."""
        adds: list[AddAction] = []
        n_rows = 0
        pooled: list[pa.Table] = []

        def stage(rows: pa.Table | pa.RecordBatchReader) -> None:
            nonlocal n_rows
            staged, n = self._stage_files(name, rows, parts, cluster_by)
            adds.extend(staged)
            n_rows += n

        for uri in affected_uris:
            kept = keep(self._read_arrow_uris(name, [uri])).select(schema.names).cast(schema)
            if kept.num_rows >= FILE_ROWS // 4:
                stage(kept)
            elif kept.num_rows:
                pooled.append(kept)
                if sum(t.num_rows for t in pooled) >= FILE_ROWS:
                    stage(pa.concat_tables(pooled))
                    pooled = []
        new = data.to_batches() if isinstance(data, pa.Table) else data
        stage(pa.RecordBatchReader.from_batches(schema, itertools.chain(*(t.to_batches() for t in pooled), new)))
        return adds, n_rows

    def _affected_actions(self, table: DeltaTable, where: Mapping[str, Sequence[Any]] | None) -> Any:
        """Add actions of the files that may contain rows matching `where`: partition pruning, then
        the files' min/max statistics for the other columns."""
        actions = _add_actions(table)
        parts = set(table.metadata().partition_columns)
        mask = pa.array(_in_ranges(actions, {c: v for c, v in (where or {}).items() if c not in parts}), pa.bool_())
        for col, vals in (where or {}).items():
            if col in parts:
                hit = pc.is_in(
                    pc.cast(actions.column(f"partition.{col}"), pa.string()), pa.array([str(v) for v in vals])
                )
                mask = pc.and_(mask, hit)
        return actions.filter(mask)

    def _removes(self, actions: Any) -> list[RemoveAction]:
        now = int(time.time() * 1000)
        parts = [c for c in actions.column_names if c.startswith("partition.")]
        rows = actions.to_pylist()
        return [
            RemoveAction(
                path=r["path"],
                data_change=True,
                deletion_timestamp=now,
                size=r["size_bytes"],
                partition_values={c.split(".", 1)[1]: _partition_text(r[c]) for c in parts},
            )
            for r in rows
        ]

    def _read_uris(self, name: str, uris: list[str]) -> DataFrame:
        from pyspark.sql.pandas.types import from_arrow_schema  # deferred: Arrow-only callers never load Spark

        spark = self._need_spark("rewrite")
        schema = from_arrow_schema(self.arrow_schema(name))
        return spark.read.schema(schema).option("basePath", self.uri(name)).parquet(*uris).select(*schema.fieldNames())

    def _read_arrow_uris(self, name: str, uris: list[str]) -> pa.Table:
        schema = self.arrow_schema(name)
        parts = [f for f in schema if f.name in self.partition_columns(name)]
        dataset = pads.dataset(
            [filesystem_of(u)[1] for u in uris],
            schema=schema,
            format="parquet",
            filesystem=self._fs,
            partition_base_dir=self._fs_path(name),
            partitioning=pads.partitioning(pa.schema(parts), flavor="hive") if parts else None,
        )
        return dataset.to_table()

    def _stage_files(
        self, name: str, data: Data, parts: list[str], cluster_by: str | None = None
    ) -> tuple[list[AddAction], int]:
        """Write `data` as Parquet under the table folder; returns add actions and the row count.
        With `cluster_by`, an Arrow table is written in that column's order (a stream is taken in
        the order it comes). Spark writes are not sorted (sorting all of `column_tokens` by table
        id cost more on the seed lake than rewriting the partitions a batch touches)."""
        write_id = uuid.uuid4().hex
        staging = self._fs_path(name, _STAGING, write_id)
        if _is_spark(data):
            if parts:  # one file per partition value, not one per (task, partition value)
                writer = data.repartition(*parts).write.mode("errorifexists").partitionBy(*parts)
            else:
                writer = data.write.mode("errorifexists")
            writer.parquet(self.uri(name) + f"/{_STAGING}/{write_id}")
        else:
            if cluster_by and isinstance(data, pa.Table):
                data = data.sort_by(cluster_by)
            self._fs.create_dir(staging, recursive=True)
            self._write_arrow(staging, data, parts)
        return self._adopt_staged(name, write_id)

    def _adopt_staged(self, name: str, write_id: str) -> tuple[list[AddAction], int]:
        """Move the Parquet files staged under `write_id` into the table folder; returns their add
        actions and row count."""
        staging = self._fs_path(name, _STAGING, write_id)
        adds: list[AddAction] = []
        n_rows = 0
        for info in self._fs.get_file_info(pafs.FileSelector(staging, recursive=True, allow_not_found=True)):
            if info.type != pafs.FileType.File or not info.base_name.endswith(".parquet"):
                continue
            rel = info.path[len(staging) + 1 :]
            folder, _, base = rel.rpartition("/")
            final_rel = (folder + "/" if folder else "") + f"{write_id}-{base}"
            final = self._fs_path(name, final_rel)
            if folder:
                self._fs.create_dir(self._fs_path(name, folder), recursive=True)
            self._fs.move(info.path, final)
            meta = pq.read_metadata(final, filesystem=self._fs)
            n_rows += meta.num_rows
            adds.append(
                AddAction(
                    path=final_rel,
                    size=info.size,
                    partition_values=_partition_values(folder),
                    modification_time=int(time.time() * 1000),
                    data_change=True,
                    stats=json.dumps(_file_stats(meta)),
                )
            )
        self._fs.delete_dir_contents(staging, missing_dir_ok=True)
        if self._fs.get_file_info(staging).type != pafs.FileType.NotFound:
            self._fs.delete_dir(staging)
        return adds, n_rows

    def _write_arrow(self, staging: str, data: pa.Table | pa.RecordBatchReader, parts: list[str]) -> None:
        """Parquet files of `data` under `staging`, `FILE_ROWS` rows at most each. A stream is
        written `STREAM_ROWS` rows at a time: pyarrow's writer reads ahead of its writes without
        bound, which held a whole crawl's cells in memory."""
        schema = _arrow_schema_of(data)
        partitioning = pads.partitioning(pa.schema([schema.field(p) for p in parts]), flavor="hive") if parts else None
        chunks = [data] if isinstance(data, pa.Table) else _chunks(data, STREAM_ROWS)
        for n, chunk in enumerate(chunks):
            pads.write_dataset(
                chunk,
                staging,
                format="parquet",
                partitioning=partitioning,
                filesystem=self._fs,
                basename_template=f"part-{n}-{{i}}.parquet",
                existing_data_behavior="overwrite_or_ignore",  # names are unique per chunk
                max_rows_per_file=FILE_ROWS,
                min_rows_per_group=GROUP_ROWS,
                max_rows_per_group=GROUP_ROWS,
            )

    def _commit(
        self,
        name: str,
        adds: list[AddAction],
        removes: list[RemoveAction],
        schema: pa.Schema,
        parts: list[str],
        n_rows: int,
        *,
        create: bool,
        new_schema: bool = False,
    ) -> CommitResult:
        faults.checkpoint(f"commit:{name}")
        delta_schema = DeltaSchema.from_arrow(schema)
        if create:
            create_table_with_add_actions(self.uri(name), delta_schema, adds, mode="error", partition_by=parts or None)
        else:
            # "overwrite" is the mode in which delta-rs writes a new schema into the log; it removes
            # every old file itself (and refuses remove actions)
            actions: list[AddAction | RemoveAction] = [*adds] if new_schema else [*removes, *adds]
            self._latest(name).create_write_transaction(
                actions,
                mode="overwrite" if new_schema else "append",
                schema=delta_schema,
                partition_by=parts or None,
            )
        version = self.latest_version(name)
        self._advance(name, version)
        log.info(
            "lake commit",
            extra={
                "table": name,
                "version": version,
                "n_files_added": len(adds),
                "n_files_removed": len(removes),
                "n_rows_written": n_rows,
            },
        )
        return CommitResult(name, version, len(adds), len(removes), n_rows)

    def _check_schema(self, name: str, schema: pa.Schema) -> None:
        have = _delta_fields(self.arrow_schema(name))
        want = _delta_fields(schema)
        if have != want:
            raise LakeError(name, f"schema mismatch: table has {have}, data has {want}")

    def _need_spark(self, what: str) -> SparkSession:
        if self.spark is None:
            raise LakeError(self.root, f"{what} of a Spark DataFrame needs a Spark session")
        return self.spark

    # ------------------------------------------------------------------ delta-spark engine
    def _spark_write(
        self, name: str, data: Data, *, mode: str, partition_by: Sequence[str], new_schema: bool = False
    ) -> CommitResult:
        df = self._as_spark(data)
        writer = df.write.format("delta").mode(mode)
        if new_schema:
            writer = writer.option("overwriteSchema", "true")
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        faults.checkpoint(f"commit:{name}")
        writer.save(self.uri(name))
        return self._spark_done(name)

    def _spark_replace(self, name: str, data: Data, *, predicate: str) -> CommitResult:
        writer = self._as_spark(data).write.format("delta").mode("overwrite").option("replaceWhere", predicate)
        faults.checkpoint(f"commit:{name}")
        writer.save(self.uri(name))
        return self._spark_done(name)

    def _spark_done(self, name: str) -> CommitResult:
        version = self.latest_version(name)
        self._advance(name, version)
        return CommitResult(name, version)

    def _spark_merge(self, name: str, data: Data, keys: Sequence[str]) -> CommitResult:
        from delta.tables import DeltaTable as SparkDeltaTable  # deferred: Arrow-only callers never load Spark

        faults.checkpoint(f"commit:{name}")
        cond = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in keys)
        (
            SparkDeltaTable.forPath(self._need_spark("merge"), self.uri(name))
            .alias("t")
            .merge(self._as_spark(data).alias("s"), cond)
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )
        return self._spark_done(name)

    def _as_spark(self, data: Data) -> DataFrame:
        return data if _is_spark(data) else self._need_spark("write").createDataFrame(data)


# ---------------------------------------------------------------------- helpers on data
def _add_actions(table: DeltaTable) -> pa.Table:
    """The snapshot's add actions (path, size, partition.<col>…) as a pyarrow Table."""
    return pa.table(table.get_add_actions(flatten=True))


def _is_spark(data: object) -> bool:
    return type(data).__module__.startswith("pyspark.")


def _arrow_schema_of(data: Data) -> pa.Schema:
    if _is_spark(data):
        from pyspark.sql.pandas.types import to_arrow_schema  # deferred: Arrow-only callers never load Spark

        return to_arrow_schema(data.schema)
    if isinstance(data, pa.Table | pa.RecordBatchReader):
        return data.schema
    raise LakeError("?", f"cannot write {type(data).__name__}: pass a Spark DataFrame, a pyarrow Table or a reader")


def _delta_fields(schema: pa.Schema) -> list[tuple[str, str]]:
    """(name, Delta type) pairs: compares schemas the way Delta sees them (string = large_string…)."""
    fields = json.loads(DeltaSchema.from_arrow(schema).to_json())["fields"]
    return [(f["name"], json.dumps(f["type"], sort_keys=True)) for f in fields]


def _spark_filter(df: DataFrame, where: Mapping[str, Sequence[Any]] | None) -> DataFrame:
    from pyspark.sql import functions as F  # noqa: N812  # deferred: Arrow-only callers never load Spark

    for col, vals in (where or {}).items():
        df = df.filter(F.col(col).isin(list(vals)))
    return df


def _arrow_filter(table: pa.Table, where: Mapping[str, Sequence[Any]] | None) -> pa.Table:
    for col, vals in (where or {}).items():
        table = table.filter(pc.is_in(table[col], pa.array(list(vals), type=table.schema.field(col).type)))
    return table


def _without_values(old: Data, column: str, values: Sequence[Any]) -> Data:
    """The rows of `old` whose `column` is not one of `values` (nulls are kept)."""
    if not isinstance(old, pa.Table):
        from pyspark.sql import functions as F  # noqa: N812  # deferred: Arrow-only callers never load Spark

        return old.filter(~F.coalesce(F.col(column).isin(list(values)), F.lit(False)))
    hit = pc.is_in(old[column], pa.array(list(values), type=old.schema.field(column).type))
    return old.filter(pc.invert(pc.fill_null(hit, False)))


def _without_keys(old: Data, new: Data, keys: Sequence[str]) -> Data:
    """The rows of `old` whose key does not occur in `new` (an anti-join on `keys`)."""
    if not isinstance(old, pa.Table):
        assert not isinstance(new, pa.Table)
        return old.join(new.select(*keys).distinct(), on=list(keys), how="left_anti")
    assert isinstance(new, pa.Table)
    return old.join(
        new.select(list(keys)).group_by(list(keys)).aggregate([]), keys=list(keys), join_type="left anti"
    ).select(old.column_names)


def _distinct_values(data: Data, column: str) -> list[Any]:
    if not isinstance(data, pa.Table):
        return [r[0] for r in data.select(column).distinct().collect()]
    return pc.unique(data[column]).to_pylist()


def _chunks(reader: pa.RecordBatchReader, rows: int) -> Iterator[pa.Table]:
    """The stream as tables of about `rows` rows (at least one, possibly empty)."""
    pending: list[pa.RecordBatch] = []
    n = 0
    yielded = False
    for batch in reader:
        pending.append(batch)
        n += batch.num_rows
        if n >= rows:
            yield pa.Table.from_batches(pending, reader.schema)
            pending, n, yielded = [], 0, True
    if pending or not yielded:
        yield pa.Table.from_batches(pending, reader.schema)


def _in_ranges(actions: pa.Table, where: Mapping[str, Sequence[Any]]) -> list[bool]:
    """Per add action: whether its file's [min, max] of every `where` column holds one of that
    column's values. A file without statistics for a column may hold anything."""
    n = actions.num_rows
    hits = [True] * n
    for col, values in where.items():
        if f"min.{col}" not in actions.column_names or f"max.{col}" not in actions.column_names:
            continue
        wanted = sorted(v for v in values if v is not None)
        lows, highs = actions[f"min.{col}"].to_pylist(), actions[f"max.{col}"].to_pylist()
        for i, (low, high) in enumerate(zip(lows, highs, strict=True)):
            if not hits[i] or low is None or high is None:
                continue
            try:
                at = bisect.bisect_left(wanted, low)
                hits[i] = at < len(wanted) and wanted[at] <= high
            except TypeError:  # values of another type than the column: no pruning
                continue
    return hits


def _partition_values(folder: str) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for segment in filter(None, folder.split("/")):
        key, _, value = segment.partition("=")
        value = unquote(value)
        out[unquote(key)] = None if value == "__HIVE_DEFAULT_PARTITION__" else value
    return out


def _partition_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return str(value)


def _file_stats(meta: pq.FileMetaData) -> dict[str, Any]:
    """Delta per-file stats from the Parquet footer: row count, null counts, min/max of numeric and
    string columns. A writer may truncate a long string bound, but a truncated bound still bounds
    the column (the Parquet format requires it), and bounds are all that pruning by range uses."""
    stats: dict[str, Any] = {"numRecords": meta.num_rows, "minValues": {}, "maxValues": {}, "nullCount": {}}
    if meta.num_row_groups == 0:
        return stats
    schema = meta.schema.to_arrow_schema()
    first = meta.row_group(0)
    leaf = {first.column(j).path_in_schema: j for j in range(first.num_columns)}  # nested fields shift leaves
    for field in schema:
        i = leaf.get(field.name)
        numeric = pa.types.is_integer(field.type) or pa.types.is_floating(field.type)
        text = pa.types.is_string(field.type) or pa.types.is_large_string(field.type)
        if i is None or not (numeric or text):
            continue
        mins, maxs, nulls = [], [], 0
        for rg in range(meta.num_row_groups):
            col = meta.row_group(rg).column(i)
            st = col.statistics
            if st is None or not st.has_min_max or st.null_count is None:
                break
            if pa.types.is_floating(field.type) and (st.min != st.min or st.max != st.max):
                break  # NaN bounds say nothing
            mins.append(st.min)
            maxs.append(st.max)
            nulls += st.null_count
        else:
            if mins:
                stats["minValues"][field.name] = min(mins)
                stats["maxValues"][field.name] = max(maxs)
            stats["nullCount"][field.name] = nulls
    return stats
