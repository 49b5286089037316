"""XASH, the hash MATE builds row super keys from (Esmailoghli et al., VLDB 2022, §5; digest
research/mate.md §2), and the super-key filter: the one implementation that both the Spark index
build (per Arrow batch) and the query path call.

What XASH encodes, and why: MATE keeps, with every row of the lake, the bitwise OR of the hashes of
all its cells (the super key). A query row's key values, hashed and OR'd the same way, can only be
in a row whose super key has all their bits, so one AND rules most rows out before any verification,
with no false negatives (§2.7). That only filters if each value sets few bits, placed by what makes
it differ from other values: XASH sets one bit for each of a value's `n_chars` least frequent
characters, in that character's segment and at the area of the value where it sits on average, then
rotates the character bits by a length-dependent amount (so a row only covers the character bits of
a query value if one of its cells has those characters *and* that length, §2.8), and sets one bit for
the length. MD5 or Murmur set half of all bits and a six-cell row's OR is then ~98% ones (§2.1).

Where paper and reference code disagree we follow the code, exactly as the digest's pseudo-code
(§2.5) and test vectors (§2.6) give it (discrepancies: §10):
- character selection by frequency *within the value*, ties to the smaller character, and *before*
  the alphabet filter: a character outside the 37 symbols " 0-9a-z" (upper case, punctuation,
  non-ASCII) uses up one of the `n_chars` slots and sets no bit (§2.4 step 1, §8.3);
- area = the smallest i in [0, β) with m <= (i + 1) * len / β, m the 0-based mean position (§2.4
  step 2; the paper's 1-based ⌈λβ/len⌉ differs at area boundaries). We compare the rationals
  exactly; the reference's floats give the same areas at every realistic length;
- rotation left within the 37β character bits by ⌊37β (len mod L) / L⌋, not by len (§2.4 step 3);
- the length bit is bit 37β + (len mod L), in the highest-order bits (§2.4 step 4);
- `n_chars` = 5 at every size, as the code has it; the paper's Eq. 5 would give 4 at 256 and 3 at
  512 bits (§2.3), which a spec can ask for.
A character is a Unicode code point (Python's `len` and order); values are hashed as given: the
caller normalizes them (lower-case first, §8.2) and the index records that normalizer separately.
The empty string hashes to its length bit alone (§8.5); callers skip null and empty cells.

Parameters (`XashSpec`): `bits` = 128 (paper's default), 256 or 512, giving β = 3, 6, 13 bits per
alphabet symbol and L = 17, 34, 31 length bits (§2.3); `n_chars` = 5; `name` = "xash-v1" names the
alphabet, rotation and position rules above. A hash is `bits // 64` uint64 words, little-endian
word order: bit i is bit i % 64 of word i // 64. Hashes made under two specs do not mix: a query
hash could set a bit the index never set, and joinable rows would vanish without an error (§8.9).
So the spec that built an index is stored with it (`as_dict`) and checked against the query's on
every read (`check`, raising `XashMismatchError`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa

from catalog.core.errors import XashMismatchError
from catalog.core.packing import pack_rows, unpack_rows

_U64 = np.dtype(np.uint64)

ALPHABET = " 0123456789abcdefghijklmnopqrstuvwxyz"  # symbol i owns bits [i*β, (i+1)*β) before rotation
BETA = {128: 3, 256: 6, 512: 13}  # the largest β with 37β < bits (paper Eq. 6)
SPEC_NAME = "xash-v1"

_ALPHABET_INDEX = np.full(128, -1, np.int64)  # ASCII code point -> alphabet index, -1 outside
_ALPHABET_INDEX[[ord(c) for c in ALPHABET]] = np.arange(len(ALPHABET))
_LEAD_BITS = np.array([0, 0x7F, 0x1F, 0x0F, 0x07], np.int64)  # payload of a UTF-8 lead byte, by sequence length
_CP_BITS = 21  # code points are < 0x110000
_BLOCK_BYTES = 1 << 16  # string bytes per numpy pass: its arrays stay in cache (2x faster than 1 MB)


@dataclass(frozen=True)
class XashSpec:
    """What makes two XASH hashes comparable: hash size, character slots, and the rules `name` stands for."""

    bits: int = 128
    n_chars: int = 5
    name: str = SPEC_NAME

    def __post_init__(self) -> None:
        if not _is_int(self.bits) or self.bits not in BETA:
            raise ValueError(f"bits must be one of {sorted(BETA)}, got {self.bits!r}")
        if not _is_int(self.n_chars) or not 1 <= self.n_chars <= len(ALPHABET):
            raise ValueError(f"n_chars must be an integer in [1, {len(ALPHABET)}], got {self.n_chars!r}")
        if self.name != SPEC_NAME:
            raise ValueError(f"name must be {SPEC_NAME!r} (the only rules implemented), got {self.name!r}")

    @property
    def words(self) -> int:
        """uint64 words per hash."""
        return self.bits // 64

    @property
    def beta(self) -> int:
        """Bits per alphabet symbol (areas a value is split into)."""
        return BETA[self.bits]

    @property
    def char_bits(self) -> int:
        """Width of the character region, bits [0, 37β): the part that is rotated."""
        return len(ALPHABET) * self.beta

    @property
    def length_bits(self) -> int:
        """Width L of the length segment, bits [37β, bits): the length bit is 37β + len mod L."""
        return self.bits - self.char_bits

    def as_dict(self) -> dict[str, Any]:
        return {"bits": self.bits, "n_chars": self.n_chars, "name": self.name}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> XashSpec:
        """The spec `as_dict` recorded; every key is required (a default would hide a mismatch)."""
        keys = {"bits", "n_chars", "name"}
        if set(d) != keys:
            raise ValueError(f"an XashSpec needs exactly the keys {sorted(keys)}, got {sorted(d)}")
        return XashSpec(bits=d["bits"], n_chars=d["n_chars"], name=d["name"])

    def check(self, other: XashSpec, *, what: str = "query") -> None:
        """Raise XashMismatchError unless `other` (the spec `what` was hashed with) equals this one
        (the index's)."""
        if other != self:
            raise XashMismatchError(self, other, what=what)


def _is_int(x: object) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


def xash_one(value: str, spec: XashSpec = XashSpec()) -> int:
    """XASH of one (normalized) value as a Python int, bit i = 2^i: the digest's pseudo-code (§2.5)
    line by line, with the mean position kept as an exact fraction. The test oracle for `xash`."""
    if not isinstance(value, str):
        raise TypeError(f"xash_one hashes a str, got {type(value).__name__}")
    beta, c, lseg, n = spec.beta, spec.char_bits, spec.length_bits, len(value)
    counts = Counter(value)
    chosen = sorted(counts, key=lambda ch: (counts[ch], ch))[: spec.n_chars]
    h = 0
    for ch in chosen:
        if ch not in ALPHABET:  # the slot is used up, no bit
            continue
        where = [i for i, x in enumerate(value) if x == ch]
        m = Fraction(sum(where), len(where))
        area = next(i for i in range(beta) if m <= Fraction((i + 1) * n, beta))
        h |= 1 << (ALPHABET.index(ch) * beta + area)
    d = c * (n % lseg) // lseg
    h = ((h << d) | (h >> (c - d))) & ((1 << c) - 1)  # rotate left within the character region
    return h | 1 << (c + n % lseg)


def xash(values: pa.Array | pa.ChunkedArray | Sequence[str], spec: XashSpec = XashSpec()) -> np.ndarray:
    """(len(values), spec.words) uint64 XASH hashes; row i equals `xash_one(values[i], spec)` split
    into little-endian 64-bit words.

    Takes Arrow string, large_string or string_view arrays (any offset, chunked or not) or a sequence
    of str, already normalized. Nulls raise ValueError: callers drop null cells. All values are
    hashed at once: the UTF-8 bytes are decoded to code points in numpy and each value's characters
    are counted and ranked with two sorts of packed integer keys, never a Python loop per value.
    """
    if isinstance(values, str):
        raise TypeError("xash takes a sequence of values, not one str (use xash_one)")
    if isinstance(values, pa.ChunkedArray):
        chunks = values.chunks
    elif isinstance(values, pa.Array):
        chunks = [values]
    else:
        converted = pa.array(list(values), type=pa.string())
        chunks = converted.chunks if isinstance(converted, pa.ChunkedArray) else [converted]
    parts = [_xash_array(c, spec) for c in chunks]
    return np.concatenate(parts) if parts else np.zeros((0, spec.words), np.uint64)


def _xash_array(values: pa.Array, spec: XashSpec) -> np.ndarray:
    if values.null_count:
        raise ValueError(f"xash got {values.null_count} null values; drop null cells before hashing")
    if pa.types.is_null(values.type):  # pa.array([]) is typed null
        return np.zeros((0, spec.words), np.uint64)
    if pa.types.is_string_view(values.type):
        values = values.cast(pa.large_string())
    if pa.types.is_string(values.type):
        offset_type: type[np.signedinteger[Any]] = np.int32
    elif pa.types.is_large_string(values.type):
        offset_type = np.int64
    else:
        raise TypeError(f"xash hashes string arrays (characters, not bytes), got {values.type}")
    n = len(values)
    out = np.zeros((n, spec.words), np.uint64)
    if n == 0:
        return out
    _, offsets_buf, data_buf = values.buffers()[:3]
    width = np.dtype(offset_type).itemsize
    offsets = np.frombuffer(offsets_buf, offset_type, n + 1, values.offset * width).astype(np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)

    # Keys pack (value, code point, position) and (value, count, rank) into int64; p_bits holds any
    # length in characters (a value has no more characters than bytes), so blocks stay that small.
    p_bits = max(1, int(np.diff(offsets).max()).bit_length())
    value_bits = min(63 - _CP_BITS - p_bits, 63 - 2 * p_bits)
    if value_bits < 1:
        raise ValueError(f"xash hashes values of up to 2^30 bytes, got one of {int(np.diff(offsets).max())}")
    start = 0
    while start < n:  # blocks of values: bounded bytes (cache, memory) and count (key bits)
        stop = int(np.searchsorted(offsets, offsets[start] + _BLOCK_BYTES, "right")) - 1
        stop = max(start + 1, min(n, start + (1 << value_bits), stop))
        block = offsets[start : stop + 1]
        out[start:stop] = _xash_block(data[block[0] : block[-1]], block - block[0], p_bits, spec)
        start = stop
    return out


def _code_points(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(code point of every character, character offsets of the values) from UTF-8 bytes."""
    if not data.size or int(data.max()) < 0x80:  # ASCII: a byte is a character
        return data.astype(np.int64), offsets
    lead = (data & 0xC0) != 0x80  # every byte but continuation bytes 10xxxxxx starts a character
    lead_at = np.flatnonzero(lead)
    leads_before = np.zeros(len(data) + 1, np.int64)
    np.cumsum(lead, out=leads_before[1:])
    first = data[lead_at]
    n_bytes = 1 + (first >= 0xC0).astype(np.int64) + (first >= 0xE0) + (first >= 0xF0)
    cp = first.astype(np.int64) & _LEAD_BITS[n_bytes]
    padded = np.concatenate([data, np.zeros(3, np.uint8)])
    for j in (1, 2, 3):  # continuation byte j of the characters that have one
        more = np.flatnonzero(n_bytes > j)
        if not more.size:
            break
        cp[more] = (cp[more] << 6) | (padded[lead_at[more] + j] & 0x3F)
    return cp, leads_before[offsets]


def _xash_block(data: np.ndarray, offsets: np.ndarray, p_bits: int, spec: XashSpec) -> np.ndarray:
    n_values, words = len(offsets) - 1, spec.words
    beta, c, lseg = spec.beta, spec.char_bits, spec.length_bits
    out = np.zeros(n_values * words, np.uint64)  # flat: value v, word w at v * words + w
    cp, char_offsets = _code_points(data, offsets)
    lengths = np.diff(char_offsets)  # in characters
    len_mod = lengths % lseg
    n_total = len(cp)

    if n_total:
        p_mask = (1 << p_bits) - 1
        # 1. Group each value's characters: sort (value, code point, position) keys; a run of equal
        #    (value, code point) is one distinct character, its count the run's length.
        key = np.repeat((np.arange(n_values) << (_CP_BITS + p_bits)) - char_offsets[:-1], lengths)
        key += np.arange(n_total)  # the position within the value
        key += cp << p_bits
        key.sort()
        cell = key >> p_bits
        starts = np.flatnonzero(np.concatenate(([True], cell[1:] != cell[:-1])))
        ends = np.append(starts[1:], n_total)
        owner = cell[starts] >> _CP_BITS
        per_value = np.bincount(owner, minlength=n_values)
        first_group = np.cumsum(per_value) - per_value
        # 2. Rank each value's distinct characters by (count, code point): the groups of a value are
        #    in code-point order, so their index within the value breaks ties like the code point.
        local = np.arange(len(starts)) - first_group[owner]
        rank_key = (owner << (2 * p_bits)) | ((ends - starts) << p_bits) | local
        rank_key.sort()
        ranked_owner = rank_key >> (2 * p_bits)
        rank = np.arange(len(starts)) - first_group[ranked_owner]
        chosen = np.flatnonzero(rank < spec.n_chars)
        group = first_group[ranked_owner[chosen]] + (rank_key[chosen] & p_mask)
        # 3. A chosen character outside the alphabet used its slot and sets nothing (code points
        #    >= 127 all map to DEL, which is outside).
        symbol = _ALPHABET_INDEX[np.minimum(cell[starts[group]] & ((1 << _CP_BITS) - 1), 127)]
        keep = symbol >= 0
        group, symbol = group[keep], symbol[keep]
        v, lo, hi = owner[group], starts[group], ends[group]
        positions_before = np.zeros(n_total + 1, np.int64)
        np.cumsum(key & p_mask, out=positions_before[1:])
        # 4. Area: the smallest i with mean <= (i + 1) * n / β, i.e. ceil(β·sum / (n·count)) - 1.
        num, den = beta * (positions_before[hi] - positions_before[lo]), lengths[v] * (hi - lo)
        # With n < 2^24 the float quotient (< β) is an integer or >= 2^-48 away from one: exact.
        area = np.ceil(num / den).astype(np.int64) if p_bits <= 24 else (num + den - 1) // den
        bit = symbol * beta + np.maximum(area - 1, 0)
        bit += (c * np.arange(lseg) // lseg)[len_mod[v]]  # rotate left within the 37β character bits
        bit -= c * (bit >= c)
        np.bitwise_or.at(out, v * words + (bit >> 6), np.left_shift(np.uint64(1), (bit & 63).astype(np.uint64)))

    length_bit = c + len_mod
    at = np.arange(n_values) * words + (length_bit >> 6)
    out[at] |= np.left_shift(np.uint64(1), (length_bit & 63).astype(np.uint64))
    return out.reshape(n_values, words)


def super_keys(hashes: np.ndarray, owners: np.ndarray, n_rows: int) -> np.ndarray:
    """(n_rows, words) uint64 super keys: row i is the bitwise OR of the hashes whose owner is i, 0 for
    a row that owns none.

    Args:
        hashes: (m, words) uint64 XASH hashes (`xash`), one per cell; skip null and empty cells.
        owners: (m,) the row of each hash, integers in [0, n_rows), in any order.
    """
    hashes, owners = np.asarray(hashes), np.asarray(owners)
    if hashes.ndim != 2 or hashes.dtype != np.uint64:
        raise ValueError(f"hashes must be a (m, words) uint64 array, got {hashes.dtype} {hashes.shape}")
    if owners.shape != hashes.shape[:1] or not np.issubdtype(owners.dtype, np.integer):
        raise ValueError(f"owners must be {hashes.shape[0]} integers (one per hash), got {owners.dtype} {owners.shape}")
    if n_rows < 0:
        raise ValueError(f"n_rows must be >= 0, got {n_rows}")
    out = np.zeros((n_rows, hashes.shape[1]), np.uint64)
    if len(owners) == 0:
        return out
    if owners.min() < 0 or owners.max() >= n_rows:
        raise ValueError(f"owners must be in [0, n_rows={n_rows}), got [{owners.min()}, {owners.max()}]")
    if (owners[1:] < owners[:-1]).any():
        order = np.argsort(owners, kind="stable")
        hashes, owners = hashes[order], owners[order]
    firsts = np.flatnonzero(np.concatenate(([True], owners[1:] != owners[:-1])))
    out[owners[firsts]] = np.bitwise_or.reduceat(hashes, firsts, axis=0)
    return out


def may_contain(super_key: np.ndarray, query_hashes: np.ndarray) -> np.ndarray:
    """(n,) bool: which of the (n, words) super keys have every bit of the query's, (sk & q) == q.

    `query_hashes` is a query row's OR'd hash (words,), or the (m, words) hashes of its key values,
    OR'd here. False means the row cannot hold all the query values; True means it may (verify it).
    The highest word, which holds the length bits, is tested first."""
    sk, q = np.atleast_2d(np.asarray(super_key)), np.asarray(query_hashes)
    if q.ndim == 2:
        q = np.bitwise_or.reduce(q, axis=0) if len(q) else np.zeros(q.shape[1], np.uint64)
    if sk.dtype != np.uint64 or q.dtype != np.uint64 or sk.ndim != 2 or q.shape != sk.shape[1:]:
        raise ValueError(
            f"super keys (n, words) and a query (words,) of one width, both uint64, got "
            f"{sk.dtype} {sk.shape} and {q.dtype} {q.shape}"
        )
    ok = np.ones(len(sk), bool)
    for w in reversed(range(q.shape[0])):
        if q[w]:
            ok &= (sk[:, w] & q[w]) == q[w]
    return ok


def to_bytes(hashes: np.ndarray) -> list[bytes]:
    """One blob of `words` little-endian uint64 (8 * words bytes) per hash row (a 1-d hash is one row)."""
    return pack_rows(hashes, _U64)


def from_bytes(blobs: bytes | Sequence[bytes], words: int) -> np.ndarray:
    """Inverse of `to_bytes`: one blob gives (words,), a sequence of blobs (n, words) uint64."""
    return unpack_rows(blobs, words, _U64, f"a hash of {words} words")
