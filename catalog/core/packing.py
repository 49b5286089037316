"""Fixed-width rows of unsigned integers (MinHash signatures, XASH super keys) as one little-endian
blob per row: the form the lake and the catalog store them in, decoded by numpy in one call."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def pack_rows(rows: np.ndarray, dtype: np.dtype) -> list[bytes]:
    """One blob per row of `rows` (a 1-d array is one row), whose dtype must be `dtype`."""
    rows = np.asarray(rows)
    if rows.dtype != dtype:
        raise ValueError(f"rows are {dtype}, got {rows.dtype}")
    packed = np.ascontiguousarray(np.atleast_2d(rows), dtype=dtype.newbyteorder("<"))
    raw, width = packed.tobytes(), packed.shape[1] * dtype.itemsize
    return [raw[i : i + width] for i in range(0, len(raw), width)]


def unpack_rows(blobs: bytes | Sequence[bytes], width: int, dtype: np.dtype, what: str) -> np.ndarray:
    """Inverse of `pack_rows`: one blob gives (width,), a sequence of blobs (n, width) of `dtype`."""
    if isinstance(blobs, bytes | bytearray | memoryview):
        return unpack_rows([bytes(blobs)], width, dtype, what)[0]
    size, rows = width * dtype.itemsize, list(blobs)
    bad = [len(r) for r in rows if len(r) != size]
    if bad:
        raise ValueError(f"{what} is {size} bytes, got a blob of {bad[0]}")
    return np.frombuffer(b"".join(rows), dtype=dtype.newbyteorder("<")).astype(dtype).reshape(len(rows), width)
