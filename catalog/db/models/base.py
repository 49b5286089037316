"""The declarative base, project-wide column types, and the packed integer-array type.

Integer arrays (JOSIE sets and posting lists, signatures) are stored as little-endian int32/int64
BLOBs on every database: one portable form, no PostgreSQL-only types, and numpy decodes them
without a per-element Python loop.

Text that comes from the crawl (ids, headers, titles, tokens) has no length limit, but a PostgreSQL
B-tree entry cannot exceed about 2,700 bytes. So such text is never a B-tree key itself: a primary
or foreign key on it is its fixed-size `text_key` digest (a Python-side column default computes it,
`key_default`), and a plain lookup index on it is a hash index on PostgreSQL (`text_index`; SQLite
has no such limit and gets its ordinary index).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from sqlalchemy import DateTime, Index, LargeBinary, MetaData
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeDecorator

if TYPE_CHECKING:
    import pyarrow as pa  # only for a type: every command imports the models

# Named constraints let migrations drop or alter them on SQLite (batch mode) and PostgreSQL alike.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


TEXT_KEY_LENGTH = 32  # hex digits: the first 128 bits of SHA-256


def text_key(value: str) -> str:
    """The fixed-size key of an unbounded text: the first 128 bits of SHA-256 of its UTF-8 bytes, as
    32 hex digits. PostgreSQL computes the same value in SQL (`text_key_sql`), so a migration can
    key existing rows without reading them into Python."""
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:TEXT_KEY_LENGTH]


def text_key_sql(column: str) -> str:
    """`text_key` of `column` as a PostgreSQL expression (sha256 is built in since PostgreSQL 11)."""
    return f"substr(encode(sha256(convert_to({column}, 'UTF8')), 'hex'), 1, {TEXT_KEY_LENGTH})"


def key_default(column: str) -> Callable[[Any], str]:
    """A column default: `text_key` of the value inserted into `column` of the same row."""

    def default(context: Any) -> str:
        return text_key(context.get_current_parameters()[column])

    return default


def text_index(name: str, column: str) -> Index:
    """A lookup index on an unbounded text column: hash on PostgreSQL (no entry-size limit; equality
    only, which is all the catalog asks of it), the ordinary index on SQLite."""
    return Index(name, column, postgresql_using="hash")


def dialect_index(name: str, *columns: str, dialect: str, **kwargs: Any) -> Index:
    """An index built on one database only (`dialect`, "sqlite" or "postgresql"): where the two
    need different indexes for the same reads (a B-tree on an unbounded text column is fine on
    SQLite and refused by PostgreSQL past 2,700 bytes). `in_this_schema` leaves it out of
    migrations' comparisons on the other database."""
    index = Index(name, *columns, info={"dialect": dialect}, **kwargs)
    return index.ddl_if(dialect=dialect)


def in_this_schema(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any, *, dialect: str) -> bool:
    """Alembic's `include_object` for a `dialect` database: every object but the indexes
    `dialect_index` builds on the other database."""
    wanted = getattr(obj, "info", {}).get("dialect") if type_ == "index" and not reflected else None
    return wanted is None or wanted == dialect


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {dt.datetime: DateTime(timezone=True)}


def _checked(value: Any, dtype: str) -> np.ndarray:
    """`value` as a one-dimensional array of `dtype`, or ValueError when it is not one (more
    dimensions, not integers, a value out of the type's range)."""
    arr = np.asarray(value)
    if arr.ndim != 1:
        raise ValueError(f"packed arrays are one-dimensional, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise ValueError(f"packed arrays hold integers, got dtype {arr.dtype}")
    info = np.iinfo(np.dtype(dtype))
    if arr.size and (arr.min() < info.min or arr.max() > info.max):
        raise ValueError(f"value out of range for {dtype}")
    return arr.astype(dtype, copy=False)


class _PackedIntArray(TypeDecorator[np.ndarray]):
    impl = LargeBinary
    cache_ok = True
    dtype: str = "<i4"

    def process_bind_param(self, value: Any, dialect: Dialect) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, bytes):  # already packed in this layout (`pack_int32_lists`)
            if len(value) % np.dtype(self.dtype).itemsize:
                raise ValueError(f"{len(value)} bytes are not a whole number of {self.dtype} values")
            return value
        return _checked(value, self.dtype).tobytes()

    def process_result_value(self, value: bytes | None, dialect: Dialect) -> np.ndarray | None:
        if value is None:
            return None
        return np.frombuffer(value, dtype=self.dtype)


class PackedInt32Array(_PackedIntArray):
    """A 1-D int32 array stored as a little-endian BLOB (bytea on PostgreSQL)."""

    dtype = "<i4"
    cache_ok = True


class PackedInt64Array(_PackedIntArray):
    """A 1-D int64 array stored as a little-endian BLOB (bytea on PostgreSQL)."""

    dtype = "<i8"
    cache_ok = True


def pack_int32_lists(offsets: np.ndarray, values: Any) -> Iterator[bytes]:
    """The stored form (`PackedInt32Array`) of each list of a list column in Arrow's layout (list i
    is `values[offsets[i]:offsets[i + 1]]`): the checks and the conversion run once over the flat
    values, not once per list (a publish packs millions of lists; the column type stores the bytes
    as given)."""
    flat = _checked(values, "<i4")
    return (flat[offsets[i] : offsets[i + 1]].tobytes() for i in range(len(offsets) - 1))


def pack_int32_list_array(lists: pa.ListArray) -> Iterator[bytes]:
    """`pack_int32_lists` of an Arrow list<int32> array, which may be a slice (a batch of a larger
    table): only the slice's own values are checked and converted, not its parent's."""
    offsets = lists.offsets.to_numpy()
    start, end = int(offsets[0]), int(offsets[-1])
    return pack_int32_lists(offsets - start, lists.values.slice(start, end - start).to_numpy(zero_copy_only=False))


def unpack_int32(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<i4")
