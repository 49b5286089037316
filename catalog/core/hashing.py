"""One 64-bit integer mixer for the numpy hashing code (embeddings, LSH bands, q-gram keys)."""

from __future__ import annotations

import numpy as np

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_SHIFTS = (np.uint64(30), np.uint64(27), np.uint64(31))


def splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, element-wise over uint64 (numpy's uint64 arithmetic wraps, as the
    finalizer expects): every output bit depends on every input bit, so any slice of the bits is
    a hash of the whole input. (A polynomial hash's high bits are not: its first character only
    reaches the low ones.)"""
    x = (x ^ (x >> _SHIFTS[0])) * _M1
    x = (x ^ (x >> _SHIFTS[1])) * _M2
    return x ^ (x >> _SHIFTS[2])
