"""Lakes for the LSH Ensemble benchmark (bench/lshe_bench.py) as integer-coded token sets.

A `TokenLake` holds every column's distinct tokens as ascending token ids in one CSR pair
(`indptr`, `tokens`), and the normalized token string of each id (`vocab`, an Arrow array) for
signing. The last `n_new` columns are held back from the first build: they are the 1% insert.

- `zipf_lake`: synthetic columns with Zipf sizes (a = 1.5, capped at 20,000). Most are drawn from
  shared domain vocabularies with Zipf-like popularity (so columns of a domain overlap, and small
  columns of popular values sit inside large ones); some are identifiers (values no other column
  holds); the rest are planted: subsets of another column, near-subsets (part of another column's
  values plus values of their own, so their containment in it is spread over [0.3, 1]) and exact
  copies. Generated with numpy, seeded.
- `seed_lake`: the local portal's real tables (`plugins.local_portal.seed`; subset "all" is what
  the portal serves with `--seed all`, "demo" what `juncture demo` serves and indexes), one set per
  column, tokenized as Juncture tokenizes (`catalog.core.identity.normalize_token`, bench/seed_lake.py).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from bench.seed_lake import seed_files, table_sets
from catalog.core.identity import normalize_token


@dataclass(frozen=True)
class TokenLake:
    """Columns as ascending distinct token ids (CSR); the last `n_new` columns are the insert."""

    name: str
    title: str
    indptr: np.ndarray  # int64, len n + 1
    tokens: np.ndarray  # int64 token ids, ascending within each column
    vocab: pa.Array  # normalized token string of each id
    n_new: int

    def __len__(self) -> int:
        return len(self.indptr) - 1

    @property
    def n_base(self) -> int:
        return len(self) - self.n_new

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.indptr)

    def column(self, row: int) -> np.ndarray:
        return self.tokens[self.indptr[row] : self.indptr[row + 1]]

    def postings(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(token ids, position in `rows` of their column) of the columns `rows`, in that order."""
        return gather(self.indptr, self.tokens, np.asarray(rows, dtype=np.int64))


def gather(indptr: np.ndarray, values: np.ndarray, which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR slices `which` concatenated, and the position in `which` of each value's slice."""
    starts = indptr[which]
    lengths = indptr[which + 1] - starts
    total = int(lengths.sum())
    ends = np.cumsum(lengths)
    index = np.repeat(starts - ends + lengths, lengths) + np.arange(total, dtype=np.int64)
    return values[index], np.repeat(np.arange(len(which), dtype=np.int64), lengths)


def csr(columns: Iterable[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(indptr, tokens) of columns given as ascending token-id arrays."""
    cols = list(columns)
    indptr = np.zeros(len(cols) + 1, dtype=np.int64)
    np.cumsum([len(c) for c in cols], out=indptr[1:])
    tokens = np.concatenate(cols).astype(np.int64) if cols else np.empty(0, np.int64)
    return indptr, tokens


def with_insert(
    name: str, title: str, columns: list[np.ndarray], vocab: pa.Array, n_new: int, rng: np.random.Generator
) -> TokenLake:
    """The lake in a seeded random order; its last `n_new` columns are the insert."""
    order = rng.permutation(len(columns))
    indptr, tokens = csr(columns[i] for i in order)
    return TokenLake(name, title, indptr, tokens, vocab, n_new)


# ---------------------------------------------------------------------------------------- synthetic
def zipf_lake(
    n_columns: int,
    *,
    seed: int,
    insert_share: float = 0.01,
    exponent: float = 1.5,
    max_size: int = 20_000,
    domain_vocab: int = 50_000,
) -> TokenLake:
    """`n_columns` columns to build on plus `insert_share` more to insert (see the module docstring)."""
    rng = np.random.default_rng(seed)
    n_new = max(1, round(insert_share * n_columns))
    n_total = n_columns + n_new
    sizes = np.minimum(rng.zipf(exponent, n_total), max_size).astype(np.int64)
    kind = rng.choice(5, size=n_total, p=[0.55, 0.12, 0.14, 0.16, 0.03])  # domain, id, subset, near, copy
    n_domains = max(8, n_columns // 200)
    domain_of = np.minimum(rng.zipf(1.3, n_total), n_domains) - 1
    next_fresh = n_domains * domain_vocab  # ids above every domain's: values of one column only

    def fresh(m: int) -> np.ndarray:
        nonlocal next_fresh
        next_fresh += m
        return np.arange(next_fresh - m, next_fresh, dtype=np.int64)

    columns: list[np.ndarray] = [np.empty(0, np.int64)] * n_total
    base = np.flatnonzero(kind <= 1)
    for i in base.tolist():
        m = int(sizes[i])
        if kind[i] == 1:
            columns[i] = fresh(m)
        else:
            columns[i] = int(domain_of[i]) * domain_vocab + _popular(rng, m, domain_vocab)
    base_sizes = np.array([len(columns[i]) for i in base.tolist()], dtype=np.int64)
    by_size = base[np.argsort(base_sizes, kind="stable")]
    sorted_sizes = np.sort(base_sizes)
    for i in np.flatnonzero(kind >= 2).tolist():
        m = int(sizes[i])
        if kind[i] == 4:  # an exact copy of any column built so far
            columns[i] = columns[int(by_size[rng.integers(len(by_size))])].copy()
            continue
        low = min(int(np.searchsorted(sorted_sizes, m)), len(by_size) - 1)  # parents holding >= m values
        parent = columns[int(by_size[rng.integers(low, len(by_size))])]
        keep = min(m, len(parent)) if kind[i] == 2 else max(1, min(len(parent), round(m * rng.uniform(0.3, 1.0))))
        kept = rng.choice(parent, size=keep, replace=False)
        own = fresh(m - keep) if kind[i] == 3 and m > keep else np.empty(0, np.int64)
        columns[i] = np.sort(np.concatenate([kept, own]))
    used, inverse = np.unique(np.concatenate(columns), return_inverse=True)  # dense ids, order kept
    indptr, _ = csr(columns)
    dense = [inverse[indptr[i] : indptr[i + 1]] for i in range(n_total)]
    vocab = pc.binary_join_element_wise("z", pa.array(used).cast(pa.string()), "")
    title = (
        f"{n_columns:,} synthetic columns (Zipf sizes, a = {exponent}, at most {max_size:,}; "
        f"{n_domains:,} domain vocabularies, identifiers, planted subsets, near-subsets and copies)"
    )
    return with_insert("synthetic", title, dense, vocab, n_new, rng)


def _popular(rng: np.random.Generator, m: int, vocab: int) -> np.ndarray:
    """m distinct values of range(vocab), ascending; small values are likelier (density ∝ x^(-2/3)),
    so columns of one domain share their popular values."""
    m = min(m, vocab)
    picked = np.empty(0, np.int64)
    while len(picked) < m:
        draws = (vocab * rng.random(2 * m + 16) ** 3).astype(np.int64)
        values, first = np.unique(np.concatenate([picked, draws]), return_index=True)
        picked = values[np.argsort(first, kind="stable")][:m]  # in order of first draw: popular first
    return np.sort(picked)


# ---------------------------------------------------------------------------------------- real tables
class _Tokens:
    """Raw cell value -> token id (-1 for null-like), normalizing each distinct raw value once."""

    def __init__(self) -> None:
        self.of_raw: dict[str, int] = {}
        self.of_token: dict[str, int] = {}
        self.vocab: list[str] = []

    def token_id(self, token: str) -> int:
        tid = self.of_token.get(token)
        if tid is None:
            tid = self.of_token[token] = len(self.vocab)
            self.vocab.append(token)
        return tid

    def ids(self, raw_values: list[str]) -> np.ndarray:
        out = np.empty(len(raw_values), dtype=np.int64)
        of_raw = self.of_raw
        for k, raw in enumerate(raw_values):
            tid = of_raw.get(raw)
            if tid is None:
                token = normalize_token(raw)
                tid = of_raw[raw] = -1 if token is None else self.token_id(token)
            out[k] = tid
        ids = np.unique(out)
        return ids[ids >= 0]


def file_columns(data: bytes, coder: _Tokens, rel: str) -> list[np.ndarray]:
    """The token-id sets of a CSV file's columns that hold any token (bench.seed_lake.table_sets,
    read with Arrow: every cell as text, each distinct raw value normalized once; files Arrow
    does not read as bench.seed_lake reads them go through table_sets itself)."""
    header = next(csv.reader(io.StringIO(data[: 1 << 16].decode("utf-8-sig", errors="replace").split("\n", 1)[0])), [])
    names = [f"c{i}" for i in range(len(header))]
    try:
        table = pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=1),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()),
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError):  # ragged rows, bad UTF-8, quoted newlines in headers
        sets = table_sets(rel, data)
        return [np.unique([coder.token_id(t) for t in s]).astype(np.int64) for s in sets.values()]
    out = []
    for col in table.columns:
        ids = coder.ids(pc.unique(col).to_pylist())
        if len(ids):
            out.append(ids)
    return out


def seed_lake(subset: str, scratch: Path, *, seed: int, insert_share: float = 0.01) -> TokenLake:
    """The portal seed's tables (`subset` "all" or "demo") as a lake, columns in a seeded order; a
    share `insert_share` of them (at least one) is held back as the insert."""
    files: Mapping[str, bytes] = seed_files(subset, scratch)
    coder = _Tokens()
    columns = [c for rel, data in files.items() for c in file_columns(data, coder, rel)]
    vocab = pa.array(coder.vocab, pa.string())
    if subset == "demo":
        title = f"the demo lake (`juncture demo`: the portal's demo seed, {len(files)} tables)"
    else:
        title = f"the local portal's real tables (seed `{subset}`: {len(files):,} tables)"
    name = "demo" if subset == "demo" else "portal"
    n_new = max(1, round(insert_share * len(columns)))
    return with_insert(name, title, columns, vocab, n_new, np.random.default_rng(seed + 1))


def describe(lake: TokenLake) -> str:
    s = lake.sizes
    q = np.percentile(s, [50, 99]).astype(int)
    return (
        f"{len(lake):,} columns ({lake.n_base:,} built + {lake.n_new:,} inserted), {len(lake.tokens):,} "
        f"(column, token) pairs, {len(lake.vocab):,} distinct tokens; sizes median {q[0]:,}, p99 {q[1]:,}, "
        f"max {int(s.max()):,}"
    )
