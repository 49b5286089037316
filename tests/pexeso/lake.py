"""Test lakes of clustered unit vectors for PEXESO, and the oracle: every (query, lake) distance
by `distance_rows`, the search's one definition of a match, with no pivots, grid or lemma."""

from __future__ import annotations

import base64
import dataclasses
import json

import numpy as np
from sqlalchemy import Connection, delete, insert

from catalog.search.pexeso.index import ColumnRef, ColumnVectors, EmbeddingSpec, IndexShape
from catalog.search.pexeso.models import PexesoColumn, PexesoMeta
from catalog.search.pexeso.search import Query, distance_rows, need_count
from catalog.search.pexeso.source import IndexFrame

SPEC = EmbeddingSpec("test-vectors", 1, 16)


def unit(m: np.ndarray) -> np.ndarray:
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def sparse_centres(rng: np.random.Generator, n: int, support: int = 8) -> np.ndarray:
    """`n` centres non-zero on `support` random dimensions each (hashed n-grams are sparse too)."""
    centres = np.zeros((n, SPEC.dimension))
    for c in centres:
        c[rng.choice(SPEC.dimension, size=support, replace=False)] = rng.standard_normal(support)
    return centres


def clustered_lake(
    rng: np.random.Generator, *, n_columns: int, centres: np.ndarray, spread: float, prefix: str = "c"
) -> list[ColumnVectors]:
    """Columns drawn around a few shared centres (so they overlap), some of them empty. The noise
    falls on a centre's non-zero dimensions only, so sparse centres give sparse vectors."""
    out = []
    for i in range(n_columns):
        size = 0 if rng.random() < 0.1 else int(rng.integers(1, 40))
        picked = centres[rng.integers(len(centres), size=size)]
        noise = rng.standard_normal(picked.shape) * spread * (picked != 0)
        vectors = unit(picked + noise) if size else np.zeros((0, SPEC.dimension))
        ref = ColumnRef(f"{prefix}{i}", f"t-{prefix}{i // 3}", f"col{i % 3}")
        out.append(ColumnVectors(ref, [f"{prefix}{i}:{j}" for j in range(size)], vectors.astype(np.float32)))
    return out


def clustered_query(rng: np.random.Generator, *, centres: np.ndarray, spread: float, n: int) -> Query:
    """A query near the same centres, with duplicates (multiplicities 1..3)."""
    picked = centres[rng.integers(len(centres), size=n)]
    vectors = unit(picked + rng.standard_normal(picked.shape) * spread)
    weights = rng.integers(1, 4, size=n).astype(np.int64)
    return Query(tuple(f"q{i}" for i in range(n)), vectors, weights, SPEC)


def oracle(columns: list[ColumnVectors], query: Query, tau: float, threshold: float) -> list[tuple[str, int]]:
    """(column_id, n_matched) of every joinable column, best first (n_matched, then table, column id)."""
    need = need_count(threshold, query.size)
    out = []
    for col in columns:
        if not len(col.vectors):
            continue
        nq, nx = len(query.vectors), len(col.vectors)
        d = distance_rows(np.repeat(query.vectors, nx, axis=0), np.tile(col.vectors, (nq, 1))).reshape(nq, nx)
        matched = int(query.weights[(d <= 2 * tau).any(axis=1)].sum())
        if matched >= need:
            out.append((col.ref.table_id, col.ref.column_id, matched))
    out.sort(key=lambda r: (-r[2], r[0], r[1]))
    return [(c, m) for _, c, m in out]


def publish_columns(conn: Connection, columns: list[ColumnVectors], first_ref: int) -> None:
    """The non-empty columns as the PEXESO publisher writes them, from column_ref `first_ref` on."""
    rows = [
        {
            "column_ref": first_ref + i,
            "column_id": c.ref.column_id,
            "table_id": c.ref.table_id,
            "header": c.ref.column,
            "n_values": len(c.values),
            "value_list": json.dumps(list(c.values)),
            "vectors": c.vectors.astype("<f4").tobytes(),
        }
        for i, c in enumerate(c for c in columns if len(c.vectors))
    ]
    if rows:
        conn.execute(insert(PexesoColumn), rows)


def write_facts(conn: Connection, shape: IndexShape, pivots: np.ndarray, n_vectors: int) -> IndexFrame:
    """The index's facts as the publisher writes them (version 1, SPEC's vectors)."""
    facts = {
        "index_version": "1",
        "spec": json.dumps(dataclasses.asdict(SPEC)),
        "shape": json.dumps(dataclasses.asdict(shape)),
        "pivots": base64.b64encode(pivots.astype("<f4").tobytes()).decode("ascii"),
        "n_vectors": str(n_vectors),
    }
    conn.execute(delete(PexesoMeta).where(PexesoMeta.key.in_(list(facts))))
    conn.execute(insert(PexesoMeta), [{"key": k, "value": v} for k, v in facts.items()])
    return IndexFrame.of(facts)
