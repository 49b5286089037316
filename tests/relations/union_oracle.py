"""Plain-Python union features and candidate evidence: the oracle's own arithmetic for the unionable
tests, from a table's raw values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from catalog.core.embedding import DEFAULT_EMBEDDER, set_vectors
from catalog.core.identity import column_headers, normalize_token
from spark_jobs.crawl.land import ParsedTable
from spark_jobs.relate import union_score
from spark_jobs.relate.union_features import (
    EMBEDDING_SAMPLE,
    SHAPES_KEPT,
    band_keys,
    distribution_keys,
    sample_quantiles,
)
from tests.relations.lakes import column_sets


def table_features(table: ParsedTable) -> list[dict[str, Any]]:
    """The columns' union features computed from the raw values."""
    out = []
    for position, (header, values) in enumerate(zip(column_headers(list(table.headers)), table.columns, strict=True)):
        counts: dict[str, int] = {}
        for v in values:
            token = normalize_token(v)
            if token is not None:
                counts[token] = counts.get(token, 0) + 1
        if not counts:
            continue
        numbers = {t: float(t) for t in counts if _is_number(t)}
        n_all = sum(counts.values())
        n_num = sum(counts[t] for t in numbers)
        mean = sum(x * counts[t] for t, x in numbers.items()) / n_num if n_num else None
        var = (
            max(sum(x * x * counts[t] for t, x in numbers.items()) / n_num - mean * mean, 0.0)
            if n_num and mean is not None
            else None
        )
        numeric = n_num / n_all >= 0.9
        out.append(
            {
                "column_id": f"{table.table_id}#{header}",
                "header": header,
                "position": position + 1,
                "size": len(counts),
                "numeric": numeric,
                "mean": mean,
                "std": None if var is None else var**0.5,
                "type": "numeric" if numeric else "text",
                "shapes": _shapes(counts),
                "embedding": _embedding(counts),
                "quantiles": _quantiles(counts) if numeric else None,
            }
        )
    return out


def oracle_lists(tables: Sequence[ParsedTable], k: int, *, evidence_only: bool) -> list[dict[str, Any]]:
    """Every table's top-k unionable rows by plain-Python scoring against every other table
    (`evidence_only`: only those it shares a header, an embedding band or a value with, as
    candidate generation with room for all of them would)."""
    sets = column_sets(tables)
    features = {t.table_id: table_features(t) for t in tables}
    keys = {t.table_id: evidence_keys(t, features[t.table_id]) for t in tables}
    rows = []
    for t in tables:
        mine = features[t.table_id]
        candidates = []
        for other in tables:
            theirs = features[other.table_id]
            if other.table_id == t.table_id or not theirs:
                continue
            overlap = np.array(
                [[len(sets[a["column_id"]] & sets[b["column_id"]]) for b in theirs] for a in mine], dtype=float
            ).reshape(len(mine), len(theirs))
            if evidence_only and not (keys[t.table_id] & keys[other.table_id]) and not overlap.any():
                continue
            candidates.append(union_score.Candidate(other.table_id, union_score.Columns.from_records(theirs), overlap))
        rows.extend(union_score.rank_candidates(t.table_id, union_score.Columns.from_records(mine), candidates, k))
    return rows


def evidence_keys(table: ParsedTable, columns: list[dict[str, Any]]) -> set[str]:
    """The table's normalized headers, the band keys of its non-numeric columns' embeddings and the
    distribution keys of its numeric columns."""
    headers = {"".join(c for c in h if c.isascii() and c.isalnum()).lower() for h in table.headers} - {""}
    return headers | _bands(columns) | _distributions(columns)


def _distributions(columns: list[dict[str, Any]]) -> set[str]:
    """The distribution keys of a table's numeric columns."""
    numeric = [c for c in columns if c["numeric"]]
    if not numeric:
        return set()
    mean = np.array([c["mean"] for c in numeric], dtype=float)
    std = np.array([c["std"] for c in numeric], dtype=float)
    return {key for keys in distribution_keys(mean, std).to_pylist() for key in keys}


def _bands(columns: list[dict[str, Any]]) -> set[str]:
    """The band keys of a table's non-numeric columns' embeddings."""
    text = [c["embedding"] for c in columns if not c["numeric"]]
    if not text:
        return set()
    return {key for keys in band_keys(np.array(text, np.float32)).to_pylist() for key in keys}


def _shapes(counts: dict[str, int]) -> list[dict[str, Any]]:
    """The most common value shapes of the distinct values, with their shares."""
    shapes: dict[str, int] = {}
    for token in counts:
        shape = union_score.value_shape(token)
        shapes[shape] = shapes.get(shape, 0) + 1
    top = sorted(shapes.items(), key=lambda kv: (-kv[1], kv[0]))[:SHAPES_KEPT]
    return [{"shape": shape, "share": n / len(counts)} for shape, n in top]


def _embedding(counts: dict[str, int]) -> list[float]:
    """The embedding of every distinct value (the test's columns are under the sample size)."""
    assert len(counts) <= EMBEDDING_SAMPLE
    values = pa.array(sorted(counts), pa.string())
    return set_vectors(DEFAULT_EMBEDDER, values, np.zeros(len(values), np.int64), 1)[0].tolist()


def _quantiles(counts: dict[str, int]) -> list[float] | None:
    """The quantiles of the distinct values that are numbers (the test's columns are under the sample
    size, so the stage samples every distinct value too)."""
    values = pa.array(sorted(counts), pa.string())
    row = sample_quantiles(values, np.zeros(len(values), np.int64), 1)[0]
    return None if np.isnan(row).any() else row.tolist()


def _is_number(token: str) -> bool:
    try:
        x = float(token)
    except ValueError:
        return False
    return x == x and abs(x) < 1e300
