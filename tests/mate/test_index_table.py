"""The Spark job's per-table pass (`index_table`) against the in-memory index built cell by cell:
the same posting lists and the same row super keys; its token rule against `normalize_token`."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from catalog.core.identity import normalize_token
from catalog.core.xash import XashSpec
from catalog.search.mate.models import ROW_BLOCK
from catalog.search.mate.source import build_memory_source
from spark_jobs.mate.lists import cells_by_row, key_tuples
from spark_jobs.mate.update import KEYS, POSTINGS, index_table, tokens_of
from tests.mate.lake import random_lake

TRICKY = [
    "Berlin", "NULL", "null", "-", "n/a", "NA", "12.0", "-0.00", "007", "a_b:c/d,e-f", "abc\n", " padded ",
    "Straße", "ＡＢＣ", "tab\there", "x\x00y", "MIXED case", "", "e\u0301", "1e3", "NaN", "None", "-5.000",
]  # fmt: skip


def test_tokens_equal_normalize_token() -> None:
    got = tokens_of(pa.array(TRICKY, pa.string())).to_pylist()
    assert got == [normalize_token(v) for v in TRICKY]


def _cells(table_id: str, rows: list[list[str | None]]) -> pa.Table:
    out = [(r, c, v) for r, row in enumerate(rows) for c, v in enumerate(row, start=1) if v is not None]
    return pa.table(
        {
            "table_id": [table_id] * len(out),
            "bucket": pa.array([3] * len(out), pa.int32()),
            "row": pa.array([r for r, _, _ in out], pa.int64()),
            "col": pa.array([c for _, c, _ in out], pa.int32()),
            "value": [v for _, _, v in out],
        }
    )


@pytest.mark.parametrize("bits", [128, 512])
def test_index_table_equals_the_memory_index(bits: int) -> None:
    spec = XashSpec(bits=bits)
    tables, _ = random_lake(4, n_tables=12)
    tables.append(("tall", ["a", "b"], [[str(i % 7), None if i % 5 else "x"] for i in range(3 * ROW_BLOCK + 5)]))
    memory = build_memory_source(tables, spec)
    for ref, (table_id, _, rows) in enumerate(tables):
        if not any(v is not None for r in rows for v in r):
            continue
        out = index_table(spec, _cells(table_id, [[v if v is None else str(v) for v in r] for r in rows])).to_pylist()
        postings = {r["token"]: (r["rows"], r["cols"]) for r in out if r["kind"] == POSTINGS}
        want = {t: (p[ref].rows.tolist(), p[ref].cols.tolist()) for t, p in memory.lists.items() if ref in p}
        assert postings == want
        keys = np.zeros((len(rows) + ROW_BLOCK, spec.words), np.uint64)
        for r in out:
            if r["kind"] == KEYS:
                block = np.frombuffer(r["keys"], "<u8").reshape(-1, spec.words)
                keys[r["block"] * ROW_BLOCK : r["block"] * ROW_BLOCK + len(block)] = block
        assert np.array_equal(keys[: len(rows)], memory.keys[ref])
        assert all(r["table_id"] == table_id and r["bucket"] == 3 for r in out)


def test_cells_by_row_regroups_every_posting_list_by_row() -> None:
    """The lists step reads posting lists as (table, token, row) -> the row's columns: every cell
    once, in order, across tables, tokens and rows holding a token in one column or many."""
    tables = [
        ("wide", ["a", "b", "c", "d"], [["0", "0", "1", "0"], ["1", "0", "0", "1"], ["x", None, "0", "0"]]),
        ("narrow", ["a", "b"], [["0", "x"], ["0", "y"]]),
    ]
    spec = XashSpec()
    out = [r for t, _, rows in tables for r in index_table(spec, _cells(t, rows)).to_pylist() if r["kind"] == POSTINGS]
    postings = pa.RecordBatch.from_pylist(out).select(["table_id", "token", "rows", "cols"])
    got = cells_by_row(postings).to_pylist()
    want = sorted(
        (t, v, r, [c for c, w in enumerate(row, start=1) if w == v])
        for t, _, rows in tables
        for r, row in enumerate(rows)
        for v in {w for w in row if w is not None}
    )
    assert sorted((g["table_id"], g["token"], g["row"], g["cols"]) for g in got) == want
    assert [g["row"] for g in got if (g["table_id"], g["token"]) == ("wide", "0")] == [0, 1, 2]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_key_tuples_are_each_keys_distinct_complete_tuples(seed: int) -> None:
    """The lists step's key tuples from a table's posting lists: for every key (its columns in key
    order, any order of positions) the distinct tuples of tokens of the rows whose key cells are
    all present, against the rows themselves."""
    rng = np.random.default_rng(seed)
    values = ["a", "b", "NULL", None, "7", "07", "x y"]
    rows = [[values[i] for i in rng.integers(0, len(values), 5)] for _ in range(int(rng.integers(1, 60)))]
    out = [r for r in index_table(XashSpec(), _cells("t", rows)).to_pylist() if r["kind"] == POSTINGS]
    postings = pa.Table.from_pylist(out).select(["table_id", "token", "rows", "cols"])
    keys = [(10, [1, 2]), (11, [5, 3, 1]), (12, [2, 4]), (13, [4])]
    got = key_tuples(postings, keys).to_pylist()
    want = set()
    for lid, positions in keys:
        for row in rows:
            tokens = [normalize_token(row[p - 1]) if row[p - 1] is not None else None for p in positions]
            if all(t is not None for t in tokens):
                want.add((lid, tuple(tokens)))
    assert sorted((r["lid"], tuple(r["tokens"])) for r in got) == sorted(want)
    assert len(got) == len(want)  # each tuple once
    assert key_tuples(postings.slice(0, 0), keys).num_rows == 0
