"""A column's vectors in the lake: cut into rows of a bounded size by the embedding step, joined
back into one column, in one order, by the publisher."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa

from catalog.core.embedding import CharNgramEmbedder
from spark_jobs.pexeso.publish import column_rows
from spark_jobs.pexeso.tables import VECTORS_SCHEMA
from spark_jobs.pexeso.update import embed_column_tokens, values_per_row

EMBEDDER = CharNgramEmbedder(dimension=16)


def _tokens(column: str, values: list[str | None]) -> pa.Table:
    n = len(values)
    return pa.table(
        {
            "table_id": [column.split("#")[0]] * n,
            "bucket": pa.array([3] * n, pa.int32()),
            "column_id": [column] * n,
            "header": pa.array([None] * n, pa.string()),
            "token": pa.array(values, pa.string()),
        }
    )


def test_a_column_is_cut_into_rows_of_at_most_per_row_values() -> None:
    words = [f"value {i}" for i in range(10)]
    rows = embed_column_tokens(EMBEDDER, _tokens("t#c", [*words, None, "value 3", ""]), per_row=3)
    assert rows.schema == VECTORS_SCHEMA
    assert rows["n_values"].to_pylist() == [3, 3, 3, 1]  # the null, the repeat and "" (no vector) left out
    assert [v for row in rows["values"].to_pylist() for v in row] == words
    assert [len(v) for v in rows["vectors"].to_pylist()] == [n * 16 * 4 for n in rows["n_values"].to_pylist()]
    assert set(rows["column_id"].to_pylist()) == {"t#c"} and set(rows["bucket"].to_pylist()) == {3}
    assert embed_column_tokens(EMBEDDER, _tokens("t#c", ["", None]), per_row=3).num_rows == 0


def test_the_rows_of_a_column_join_back_into_the_whole_column() -> None:
    columns = {f"t{i}#c": [f"word {i} {j}" for j in range(n)] for i, n in enumerate([1, 7, 12, 3])}
    whole = {c: embed_column_tokens(EMBEDDER, _tokens(c, v), per_row=100) for c, v in columns.items()}
    cut = [embed_column_tokens(EMBEDDER, _tokens(c, v), per_row=2) for c, v in columns.items()]
    rows = pa.concat_tables(cut).to_pylist()
    random.Random(0).shuffle(rows)  # the lake keeps no order among a column's rows
    table = pa.Table.from_pylist(rows, schema=VECTORS_SCHEMA).sort_by("column_id")
    joined = list(column_rows(table))
    assert [c["column_id"] for c in joined] == sorted(columns)
    for c in joined:
        expected = whole[c["column_id"]].to_pylist()[0]
        assert c["n_values"] == expected["n_values"] == len(columns[c["column_id"]])
        # the same (value, vector) pairs, in the order the parts were joined
        got = dict(zip(c["values"], np.frombuffer(c["vectors"], "<f4").reshape(-1, 16).tolist(), strict=True))
        want = dict(
            zip(expected["values"], np.frombuffer(expected["vectors"], "<f4").reshape(-1, 16).tolist(), strict=True)
        )
        assert got == want and len(c["values"]) == c["n_values"]


def test_a_row_holds_at_most_64_kib_of_vectors_and_at_least_one_value() -> None:
    assert values_per_row(256) == 64 and values_per_row(64) == 256 and values_per_row(1 << 20) == 1
