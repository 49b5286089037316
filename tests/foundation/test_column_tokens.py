"""Silver column tokens: the Spark normalization equals the Python contract function, and the job
replaces exactly the tokens of a batch's tables."""

from __future__ import annotations

import contextlib
import io
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from catalog.core.identity import SAMPLE_TOKENS, column_headers, normalize_token, storable_text
from catalog.core.settings import Settings
from catalog.search.autojoin.transform import sampled_tokens
from spark_jobs.crawl.land import ParsedTable, land_batch
from spark_jobs.lake.bronze import CELLS_SCHEMA, DATASETS_SCHEMA
from spark_jobs.lake.commit_point import UnitSpec
from spark_jobs.lake.store import LakeStore
from spark_jobs.profile import tokens as column_tokens
from spark_jobs.profile.profiles import sampled_top_values

ALPHABET = [
    *"aZ09 .+-_/,'",
    "\t",
    "\n",
    "\x0b",
    "\x1c",
    "\x1f",
    "\u00a0",
    "\u2003",
    "ß",
    "İ",
    "ﬁ",
    "１",
    "٣",
    "é",
    "e\u0301",
    "Σ",
    "ς",
    "😀",
    "Ⅻ",
    "\u200b",
    "\x00",
    "\u05d0",
    "\u202e",
    "\u0301",
    "\ufffd",
]
SPECIAL = [
    # the plain ASCII path (its token is the value in lower case, unless null-like)
    "ABC-12",
    "007",
    "-12",
    "N/A",
    "Null",
    "NONE",
    "a_b:c/d,e",
    ",",
    "12.0",
    "-0.00",
    "+5.0",
    "0012.000",
    "12.50",
    "NULL",
    " n/a ",
    "NaN",
    "-",
    "",
    "  ",
    "N A",
    "１２.０",
    "Straße",
    "ﬁne",
    "x\x1cy",
    "\x1fz\x1f",
    "İstanbul",
    "NA",
    "None",
    "nan ",
    "1.0e3",
    # hostile: NUL anywhere (removed by the contract), RTL text and overrides, combining marks
    # alone and stacked, and long values (tokens have no length limit)
    "\x00",
    "a\x00b",
    " \x00 12.0\x00",
    "n\x00/a",
    "\x00NULL",
    "שלום \u202eabc",
    "\u0301\u0301x",
    "a" * 3000,
    "X\x00" * 1500,
    "é" * 2000,
]


def random_values(n: int, seed: int = 7) -> list[str]:
    rnd = random.Random(seed)
    out = list(SPECIAL)
    while len(out) < n:
        out.append("".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, 8))))
    return out


def test_spark_normalization_equals_the_python_contract(spark) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F  # noqa: N812

    values = random_values(3000)
    df = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "i int, value string")
    got = dict(column_tokens.with_tokens(df).select("i", F.col("token").alias("t")).collect())
    assert len(got) == len(values)
    mismatches = [
        (values[i], got[i], normalize_token(values[i]))
        for i in range(len(values))
        if got[i] != normalize_token(values[i])
    ]
    assert mismatches == []


def physical_plan(df: Any) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain()
    return out.getvalue()


def test_values_are_normalized_once_each_after_their_count(spark) -> None:  # type: ignore[no-untyped-def]
    """The tokens and the profiles' top values count each column's distinct values, then normalize
    those. Dropping the null-likes must not become a filter below the count: Spark moves a filter
    on `token` there (it depends on `value` alone), and then normalizes every cell, the Python
    function twice. In the plans: one Python evaluation, and no filter that normalizes."""
    from pyspark.sql.pandas.types import from_arrow_schema

    cells = spark.createDataFrame([], from_arrow_schema(CELLS_SCHEMA))
    datasets = spark.createDataFrame([], from_arrow_schema(DATASETS_SCHEMA))
    for df in (column_tokens.column_tokens(cells, datasets), sampled_top_values(cells)):
        plan = physical_plan(df)
        assert plan.count("ArrowEvalPython") == 1, plan
        filters = [line for line in plan.splitlines() if "Filter" in line]
        assert filters and not [f for f in filters if "regexp_" in f or "pythonUDF" in f], plan


def table(tid: str, headers: list[str], rows: list[list[str | None]]) -> ParsedTable:
    return ParsedTable(table_id=tid, headers=headers, columns=[list(c) for c in zip(*rows, strict=True)])


def expected(tables: list[ParsedTable]) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for t in tables:
        headers = [None if h is None else storable_text(h) for h in t.headers]
        for header, values in zip(column_headers(headers), t.columns, strict=True):
            counts = Counter(tok for tok in map(normalize_token, values) if tok is not None)
            out.update({(f"{t.table_id}#{header}", tok): n for tok, n in counts.items()})
    return out


def actual(store: LakeStore) -> dict[tuple[str, str], int]:
    t = store.read_arrow(column_tokens.COLUMN_TOKENS)
    return {
        (c, tok): n
        for c, tok, n in zip(t["column_id"].to_pylist(), t["token"].to_pylist(), t["n"].to_pylist(), strict=True)
    }


def test_job_tracks_adds_changes_and_deletes(spark, settings: Settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = LakeStore(settings.lake, spark)
    a = table("file:a.csv", ["id", "city", "city"], [["1", "NYC", "x"], ["2", "nyc ", None], ["3.0", "Boston", "n/a"]])
    b = table("file:b.csv", ["", "city"], [["1", "Boston"], ["1", "Paris"]])
    batch = land_batch(store, [a, b], [], n_buckets=settings.index.cells_buckets)
    column_tokens.run(spark, settings, batch)
    assert actual(store) == expected([a, b])
    assert ("file:a.csv#city~2", "x") in actual(store) and ("file:b.csv#column_1", "1") in actual(store)

    a2 = table("file:a.csv", ["id"], [["9"]])
    c = table("file:c.csv", ["k"], [["Boston"]])
    batch2 = land_batch(store, [a2, c], ["file:b.csv"], n_buckets=settings.index.cells_buckets)
    column_tokens.run(spark, settings, batch2)
    assert actual(store) == expected([a2, c])
    version = store.version(column_tokens.COLUMN_TOKENS)
    assert column_tokens.run(spark, settings, batch2).skipped  # re-running a batch is a no-op
    assert store.version(column_tokens.COLUMN_TOKENS) == version


def test_landed_hostile_cells_give_the_python_tokens(spark, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    """NUL and lone surrogates (a JSON file's `\\ud800`) land under the storable-text rule, and the
    job's tokens equal `normalize_token` of the raw values: every engine applies the same rule."""
    store = LakeStore(settings.lake, spark)
    raw = ["a\x00b", "\ud800x", "x\udfff", "\x00", " \x00n/a", "\ud83d\ude00", "k" * 3000 + "\x00", "Ab"]
    t = table("file:h.json", ["id\x00", "\x00"], [[v, str(i)] for i, v in enumerate(raw)])
    batch = land_batch(store, [t], [], n_buckets=settings.index.cells_buckets)
    column_tokens.run(spark, settings, batch)
    got = actual(store)
    assert got == expected([t])
    assert ("file:h.json#id", "ab") in got and got[("file:h.json#id", "ab")] == 2
    assert ("file:h.json#id", "\ufffdx") in got and ("file:h.json#column_2", "0") in got
    cells = store.read_arrow("cells")["value"].to_pylist()
    assert not any("\x00" in c for c in cells if c is not None)


def test_spark_submit_entry_point_runs_the_same_job(
    spark,
    tmp_path: Path,  # type: ignore[no-untyped-def]
    monkeypatch,
) -> None:
    """`main(["--batch-id", N])` (what spark-submit runs) applies the batch like `run` does."""
    import os

    for var in [v for v in os.environ if v.startswith("JUNCTURE_")]:
        monkeypatch.delenv(var)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JUNCTURE_HOME", str(tmp_path / "home"))
    from catalog.core.settings import load_settings

    settings = load_settings()
    store = LakeStore(settings.lake, spark)
    a = table("file:a.csv", ["id"], [["1"], ["2"], ["2"]])
    batch = land_batch(store, [a], [], n_buckets=settings.index.cells_buckets)
    assert column_tokens.main(["--batch-id", str(batch.batch_id)]) == 0
    assert actual(store) == expected([a])


def expected_samples(tables: list[ParsedTable]) -> dict[str, list[str]]:
    """Each column's first SAMPLE_TOKENS distinct tokens in UTF-8 byte order."""
    per_column: dict[str, set[str]] = {}
    for column_id, token in expected(tables):
        per_column.setdefault(column_id, set()).add(token)
    return {c: sorted(tokens, key=lambda t: t.encode())[:SAMPLE_TOKENS] for c, tokens in per_column.items()}


def samples(t: pa.Table | None) -> dict[str, list[str]]:
    assert t is not None
    out: dict[str, list[str]] = {}
    for c, tok in zip(t["column_id"].to_pylist(), t["token"].to_pylist(), strict=True):
        out.setdefault(c, []).append(tok)
    return {c: sorted(tokens, key=lambda s: s.encode()) for c, tokens in out.items()}


def wide_table(tid: str, n: int, seed: int) -> ParsedTable:
    """Two columns of `n` rows: hostile values (non-ASCII, case, null-likes) and a narrow one."""
    values = random_values(n, seed)
    return table(tid, ["v", "w"], [[v, str(i % 5)] for i, v in enumerate(values)])


def test_token_samples_are_each_columns_first_tokens_in_byte_order(  # type: ignore[no-untyped-def]
    spark, settings: Settings, monkeypatch
) -> None:
    """The samples follow every batch (added, changed, deleted tables), a lake whose tokens were
    committed before samples existed gets them whole with its next batch, and until then
    `sampled_tokens` reads the same sample from all of `column_tokens`."""
    store = LakeStore(settings.lake, spark)
    a, b = wide_table("file:a.csv", 300, 1), wide_table("file:b.csv", 90, 2)
    monkeypatch.setattr(column_tokens, "TOKENS", UnitSpec("tokens", (column_tokens.COLUMN_TOKENS,)))
    monkeypatch.setattr(column_tokens, "write_samples", lambda *args, **kwargs: None)
    column_tokens.run(spark, settings, land_batch(store, [a, b], [], n_buckets=settings.index.cells_buckets))
    monkeypatch.undo()
    assert not LakeStore(settings.lake).exists(column_tokens.COLUMN_TOKEN_SAMPLES)
    assert samples(sampled_tokens(LakeStore(settings.lake), SAMPLE_TOKENS, ["column_id", "token"])) == (
        expected_samples([a, b])
    )

    c = wide_table("file:c.csv", 200, 3)
    column_tokens.run(spark, settings, land_batch(store, [c], [], n_buckets=settings.index.cells_buckets))
    reader = LakeStore(settings.lake)
    want = expected_samples([a, b, c])
    assert samples(reader.read_arrow(column_tokens.COLUMN_TOKEN_SAMPLES)) == want
    assert max(len(v) for v in want.values()) == SAMPLE_TOKENS and min(len(v) for v in want.values()) < SAMPLE_TOKENS

    a2 = wide_table("file:a.csv", 120, 4)
    batch = land_batch(store, [a2], ["file:b.csv"], n_buckets=settings.index.cells_buckets)
    column_tokens.run(spark, settings, batch)
    reader = LakeStore(settings.lake)
    assert samples(reader.read_arrow(column_tokens.COLUMN_TOKEN_SAMPLES)) == expected_samples([a2, c])
    assert samples(sampled_tokens(reader, 10, ["column_id", "token"])) == {
        k: v[:10] for k, v in expected_samples([a2, c]).items()
    }
