"""MinHash signatures for the LSH Ensemble containment index: the one implementation that both the
Spark pipeline (per Arrow batch, inside `mapInArrow`) and online query signing call.

Why one shared function: a signature is only comparable with signatures made by the same hash and
the same permutations. Two implementations that drift apart (another hash seed, another random
stream) still produce plausible uint32 vectors, and every similarity computed across them is
silently wrong. So the Spark job and the query path both call `signatures`, and the `MinHashSpec`
that made an index is recorded with it (`as_dict`) and checked against the query's spec on every
read (`check`, raising `SignatureMismatchError`).

A token's 32-bit hash is MurmurHash3 x86_32 (`mmh3.hash(token.encode("utf-8"), HASH_SEED,
signed=False)`), computed here in numpy over an Arrow string buffer, all strings at once.
Permutation i maps a hash h to (a_i * h + b_i) mod PRIME with PRIME = 2^31 - 1: with a, b < 2^31
and h < 2^32, a * h + b < 2^63 + 2^31 fits uint64, so numpy computes it exactly. datasketch uses
2^61 - 1 with a, b up to 2^61 in numpy uint64, where a * h wraps modulo 2^64 before the `% prime`
(datasketch issues #99, #239). The permuted values lie in [0, PRIME), so a signature fits uint32.
(Hashes h and h + PRIME coincide mod PRIME: about one pair of distinct tokens in 2^31 collides,
far below MinHash's own error.)

The a_i and b_i come from splitmix64 over (seed, i), written out below, not from
`np.random.default_rng(seed)`: numpy promises the same Generator stream only on the same numpy
build, and an index must stay readable after numpy is upgraded. Permutation i does not depend on
num_perm, so a 128-permutation spec's permutations are the first 128 of a 256-permutation one.

An empty set's signature is `EMPTY` (0xFFFFFFFF) in every position, above every permuted value: it
shares no position with a non-empty set's signature, and min-merging it into another changes
nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from catalog.core.errors import SignatureMismatchError
from catalog.core.packing import pack_rows, unpack_rows

PRIME = (1 << 31) - 1
_U32 = np.dtype(np.uint32)
EMPTY = np.uint32(0xFFFFFFFF)
HASH_NAME = "mmh3_x86_32"
HASH_SEED = 0  # mmh3's seed: part of the HASH_NAME definition (changing it needs a new HASH_NAME)
MAX_NUM_PERM = 4096

_P = np.uint64(PRIME)
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
_TAIL_MASK = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF], dtype=np.uint32)  # bytes kept of a 0..3-byte tail
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


@dataclass(frozen=True)
class MinHashSpec:
    """What makes two signatures comparable: number of permutations, permutation seed, token hash."""

    num_perm: int = 256
    seed: int = 1
    hash: str = HASH_NAME

    def __post_init__(self) -> None:
        if not _is_int(self.num_perm) or not 1 <= self.num_perm <= MAX_NUM_PERM:
            raise ValueError(f"num_perm must be an integer in [1, {MAX_NUM_PERM}], got {self.num_perm!r}")
        if not _is_int(self.seed) or not 0 <= self.seed < 1 << 64:
            raise ValueError(f"seed must be an integer in [0, 2^64), got {self.seed!r}")
        if self.hash != HASH_NAME:
            raise ValueError(f"hash must be {HASH_NAME!r} (the only one implemented), got {self.hash!r}")

    def permutations(self) -> tuple[np.ndarray, np.ndarray]:
        """(a, b): read-only uint64 arrays of length num_perm, a in [1, PRIME), b in [0, PRIME)."""
        return _permutations(self.num_perm, self.seed)

    def as_dict(self) -> dict[str, Any]:
        return {"num_perm": self.num_perm, "seed": self.seed, "hash": self.hash}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> MinHashSpec:
        """The spec `as_dict` recorded; every key is required (a default would hide a mismatch)."""
        keys = {"num_perm", "seed", "hash"}
        if set(d) != keys:
            raise ValueError(f"a MinHashSpec needs exactly the keys {sorted(keys)}, got {sorted(d)}")
        return MinHashSpec(num_perm=d["num_perm"], seed=d["seed"], hash=d["hash"])

    def check(self, other: MinHashSpec, *, what: str = "query") -> None:
        """Raise SignatureMismatchError unless `other` (the spec `what` was signed with) equals this
        one (the index's)."""
        if other != self:
            raise SignatureMismatchError(self, other, what=what)


def _is_int(x: object) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


@functools.lru_cache(maxsize=16)
def _permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    # splitmix64: output k is the finalizer of seed + (k + 1) * golden; permutation i takes 2i, 2i+1.
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (np.arange(2 * num_perm, dtype=np.uint64) + np.uint64(1)) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z ^= z >> np.uint64(31)
    a = z[0::2] % (_P - np.uint64(1)) + np.uint64(1)
    b = z[1::2] % _P
    a.setflags(write=False)
    b.setflags(write=False)
    return a, b


def murmur3_32(tokens: pa.Array | pa.ChunkedArray | Sequence[str], seed: int = HASH_SEED) -> np.ndarray:
    """uint32 MurmurHash3 x86_32 of each token's UTF-8 bytes: element-wise equal to
    `mmh3.hash(t.encode("utf-8"), seed, signed=False)`.

    Takes Arrow string, large_string, string_view (and their binary twins: the bytes as they are)
    or a sequence of str. Nulls raise ValueError: callers hash tokens, which are never null.
    """
    if not 0 <= seed < 1 << 32:
        raise ValueError(f"seed must be in [0, 2^32), got {seed}")
    if isinstance(tokens, pa.ChunkedArray):
        chunks = tokens.chunks
    elif isinstance(tokens, pa.Array):
        chunks = [tokens]
    else:
        chunks = [_string_array(tokens)]
    parts = [_murmur3_array(c, np.uint32(seed)) for c in chunks]
    return np.concatenate(parts) if parts else np.empty(0, np.uint32)


def _string_array(tokens: Iterable[str]) -> pa.Array:
    """Python strings as an Arrow string array, built from its buffers: `pa.array` on Python
    objects imports pandas (half a second a command-line search would pay for nothing)."""
    encoded = []
    for token in tokens:
        if not isinstance(token, str):
            raise ValueError(f"tokens are strings, got {token!r}")
        encoded.append(token.encode("utf-8", "surrogatepass"))
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return pa.LargeStringArray.from_buffers(len(encoded), pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded)))


def _murmur3_array(values: pa.Array, seed: np.uint32) -> np.ndarray:
    if values.null_count:
        raise ValueError(f"murmur3_32 got {values.null_count} null tokens; tokens are never null")
    if pa.types.is_null(values.type):  # pa.array([]) is typed null
        return np.empty(0, np.uint32)
    if pa.types.is_string_view(values.type) or pa.types.is_binary_view(values.type):
        values = values.cast(pa.large_binary())
    if pa.types.is_string(values.type) or pa.types.is_binary(values.type):
        offset_type: type[np.signedinteger[Any]] = np.int32
    elif pa.types.is_large_string(values.type) or pa.types.is_large_binary(values.type):
        offset_type = np.int64
    else:
        raise TypeError(f"murmur3_32 hashes string or binary arrays, got {values.type}")
    n = len(values)
    if n == 0:
        return np.empty(0, np.uint32)
    _, offsets_buf, data_buf = values.buffers()[:3]
    width = np.dtype(offset_type).itemsize
    offsets = np.frombuffer(offsets_buf, offset_type, n + 1, values.offset * width).astype(np.int64)
    first, size = int(offsets[0]), int(offsets[-1] - offsets[0])
    data = np.zeros(size + 4, np.uint8)  # 4 zero bytes past the end: a word read at any byte stays in bounds
    if size:
        data[:size] = np.frombuffer(data_buf, np.uint8, size, first)
    # the little-endian uint32 starting at every byte (an overlapping, unaligned view: no copy)
    words = np.ndarray((size + 1,), dtype="<u4", buffer=data, strides=(1,))
    starts = offsets[:-1] - first
    lengths = np.diff(offsets)
    n_blocks = lengths >> 2

    # Blocks chain through h, so walk block index j over all strings at once, longest strings first:
    # the strings with more than j blocks are then a prefix of the order.
    max_blocks = int(n_blocks.max())
    key = max_blocks - n_blocks
    order = np.argsort(key.astype(np.uint16) if max_blocks < 1 << 16 else key, kind="stable")  # radix sort
    pos = starts[order]
    h = np.full(n, seed, np.uint32)
    active = n - np.cumsum(np.bincount(n_blocks))  # active[j]: strings with more than j blocks
    for j in range(max_blocks):
        c = int(active[j])
        k = _mix_k(words[pos[:c] + 4 * j])
        hj = h[:c] ^ k
        hj = (hj << np.uint32(13)) | (hj >> np.uint32(19))
        h[:c] = hj * np.uint32(5) + np.uint32(0xE6546B64)
    h_in_order = np.empty_like(h)
    h_in_order[order] = h
    h = h_in_order

    # tail: the last len % 4 bytes (an empty tail mixes to k = 0, which leaves h unchanged)
    h ^= _mix_k(words[starts + 4 * n_blocks] & _TAIL_MASK[lengths & 3])
    h ^= lengths.astype(np.uint32)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


def _mix_k(k: np.ndarray) -> np.ndarray:
    k = k * _C1
    k = (k << np.uint32(15)) | (k >> np.uint32(17))
    return k * _C2


def signatures(
    spec: MinHashSpec, hashes: np.ndarray, owners: np.ndarray, n_sets: int, *, chunk: int = 1 << 8
) -> np.ndarray:
    """(n_sets, num_perm) uint32 signatures: row i is the position-wise minimum of (a*h + b) mod PRIME
    over the hashes h whose owner is i, `EMPTY` for a set that owns none.

    Args:
        hashes: 32-bit token hashes (`murmur3_32`), any integer dtype with values in [0, 2^32).
            Duplicates are harmless: min is idempotent.
        owners: the set (row) of each hash, integers in [0, n_sets), in any order.
        chunk: hashes permuted per numpy pass; memory is about chunk * num_perm * 8 bytes.
    """
    hashes, owners = np.asarray(hashes), np.asarray(owners)
    if hashes.ndim != 1 or owners.shape != hashes.shape:
        raise ValueError(f"hashes and owners must be 1-d of one length, got {hashes.shape} and {owners.shape}")
    if not (np.issubdtype(hashes.dtype, np.integer) and np.issubdtype(owners.dtype, np.integer)):
        raise ValueError(f"hashes and owners must be integer arrays, got {hashes.dtype} and {owners.dtype}")
    if n_sets < 0 or chunk < 1:
        raise ValueError(f"n_sets must be >= 0 and chunk >= 1, got n_sets={n_sets}, chunk={chunk}")
    out = np.full((n_sets, spec.num_perm), EMPTY, np.uint32)
    if len(hashes) == 0:
        return out
    if hashes.dtype != np.uint32 and (hashes.min() < 0 or hashes.max() >= 1 << 32):
        raise ValueError("hashes must be 32-bit unsigned values (murmur3_32), got values outside [0, 2^32)")
    if owners.min() < 0 or owners.max() >= n_sets:
        raise ValueError(f"owners must be in [0, n_sets={n_sets}), got [{owners.min()}, {owners.max()}]")
    if (owners[1:] < owners[:-1]).any():
        order = np.argsort(owners, kind="stable")
        hashes, owners = hashes[order], owners[order]
    a, b = spec.permutations()
    for lo in range(0, len(hashes), chunk):
        owned = owners[lo : lo + chunk]
        firsts = np.flatnonzero(np.concatenate(([True], owned[1:] != owned[:-1])))
        mins = np.minimum.reduceat(_permuted(hashes[lo : lo + chunk], a, b), firsts, axis=0).astype(np.uint32)
        rows = owned[firsts]  # distinct (owners are sorted), so the fancy assignment cannot collide
        out[rows] = np.minimum(out[rows], mins)
    return out


def _permuted(hashes: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(len(hashes), num_perm) uint64 (a*h + b) mod PRIME, exact: a*h + b < 2^63 + 2^31."""
    x = np.multiply.outer(hashes.astype(np.uint64), a)
    x += b
    x %= _P  # numpy divides by a scalar with multiply-and-shift: faster here than Mersenne folding
    return x


def signature(spec: MinHashSpec, tokens: Iterable[str] | pa.Array | pa.ChunkedArray) -> np.ndarray:
    """(num_perm,) uint32 signature of the set of `tokens` (already normalized). Order and
    duplicates do not matter; no tokens gives `EMPTY` everywhere."""
    if not isinstance(tokens, pa.Array | pa.ChunkedArray | Sequence) or isinstance(tokens, str):
        tokens = list(tokens)
    hashes = murmur3_32(tokens)
    return signatures(spec, hashes, np.zeros(len(hashes), np.int64), 1)[0]


def jaccard_estimate(a: np.ndarray, b: np.ndarray) -> np.ndarray | float:
    """Share of positions where signatures a and b agree; a (n, m) against b (m,) gives (n,).

    Two empty sets agree everywhere (1.0); an empty and a non-empty set nowhere (0.0)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"signatures of {a.shape[-1]} and {b.shape[-1]} permutations cannot be compared")
    share = np.mean(a == b, axis=-1)
    return float(share) if share.ndim == 0 else share


def containment_estimate(jaccard: Any, x_size: Any, q_size: Any) -> np.ndarray | float:
    """|Q ∩ X| / |Q| from the Jaccard J of Q and X and both sizes: min(1, (|X|/|Q| + 1) J / (1 + J)),
    0 where |Q| = 0. (From J = |Q ∩ X| / (|Q| + |X| - |Q ∩ X|); LSH Ensemble, Zhu et al. 2016, §3.)"""
    j = np.asarray(jaccard, dtype=np.float64)
    x = np.asarray(x_size, dtype=np.float64)
    q = np.asarray(q_size, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(q > 0, np.minimum((x / q + 1.0) * j / (1.0 + j), 1.0), 0.0)
    return float(t) if t.ndim == 0 else t


def to_bytes(sigs: np.ndarray) -> list[bytes]:
    """One little-endian uint32 blob per signature row (a 1-d signature is one row)."""
    return pack_rows(sigs, _U32)


def from_bytes(blobs: bytes | Sequence[bytes], num_perm: int) -> np.ndarray:
    """Inverse of `to_bytes`: one blob gives (num_perm,), a sequence of blobs (n, num_perm) uint32."""
    return unpack_rows(blobs, num_perm, _U32, f"a signature of {num_perm} permutations")
