"""Lakes for the relations tests, and the plain-Python oracles they are checked against."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

from catalog.core.identity import column_headers, token_set
from catalog.core.settings import Settings
from spark_jobs.crawl.land import ParsedTable, land_batch
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.store import LakeStore
from spark_jobs.profile import tokens as column_tokens
from spark_jobs.relate import joinable as relate_joinable
from spark_jobs.relate import stage as relate


def random_table(rng: random.Random, name: str, vocab: int) -> ParsedTable:
    n_cols, n_rows = rng.randint(1, 3), rng.randint(1, 12)
    cols = [
        [rng.choice([str(rng.randint(0, vocab)), None, "n/a", f"v{rng.randint(0, vocab)}"]) for _ in range(n_rows)]
        for _ in range(n_cols)
    ]
    return ParsedTable(table_id=f"file:rand/{name}.csv", headers=[f"c{i}" for i in range(n_cols)], columns=cols)


def column_sets(tables: Iterable[ParsedTable]) -> dict[str, frozenset[str]]:
    """column_id -> distinct tokens, for columns with at least one token (the indexed ones)."""
    out: dict[str, frozenset[str]] = {}
    for t in tables:
        for header, values in zip(column_headers(list(t.headers)), t.columns, strict=True):
            tokens = token_set(values)
            if tokens:
                out[f"{t.table_id}#{header}"] = tokens
    return out


def brute_force_joinable(sets: Mapping[str, frozenset[str]], k: int) -> dict[str, list[tuple[str, int]]]:
    """column_id -> [(candidate_column_id, overlap)] top-k, overlap desc then candidate id asc."""
    out: dict[str, list[tuple[str, int]]] = {}
    for a, sa in sets.items():
        cands = [(b, len(sa & sb)) for b, sb in sets.items() if b != a and sa & sb]
        cands.sort(key=lambda x: (-x[1], x[0]))
        if cands:
            out[a] = cands[:k]
    return out


def frequent_tokens(
    sets: Mapping[str, frozenset[str]], max_list: int, before: frozenset[str] = frozenset()
) -> frozenset[str]:
    """The tokens gold `joinable` skips: held by more than `max_list` columns, or skipped `before`
    (after the previous batch) and still held by more than half of `max_list`."""
    freq: dict[str, int] = {}
    for tokens in sets.values():
        for t in tokens:
            freq[t] = freq.get(t, 0) + 1
    return frozenset(t for t, f in freq.items() if f > max_list or (t in before and f > max_list // 2))


def bounded_brute_force(
    sets: Mapping[str, frozenset[str]], k: int, frequent: frozenset[str]
) -> dict[str, list[tuple[str, int, bool]]]:
    """column_id -> [(candidate, overlap, exact)] as gold `joinable` defines them when the `frequent`
    tokens are skipped: they are not counted, and a column holding one says exact=False on all its
    answers."""
    bounded = {c: frozenset(s - frequent) for c, s in sets.items()}
    return {
        c: [(b, n, not sets[c] & frequent) for b, n in rows] for c, rows in brute_force_joinable(bounded, k).items()
    }


def gold_joinable(settings: Settings) -> dict[str, list[dict]]:
    rows = LakeStore(settings.lake).read_arrow(relate_joinable.JOINABLE).to_pylist()
    out: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (r["column_id"], r["rank"])):
        out.setdefault(r["column_id"], []).append(r)
    return out


def index_batch(
    spark,
    settings: Settings,
    added: Sequence[ParsedTable] = (),
    deleted: Sequence[str] = (),
    *,
    unionable: bool = False,
) -> ChangeBatch:  # type: ignore[no-untyped-def]
    """Land a batch and run the stages the relations need (tokens, joinable, optionally unionable)."""
    store = LakeStore(settings.lake, spark)
    batch = land_batch(store, list(added), list(deleted), n_buckets=settings.index.cells_buckets)
    column_tokens.run(spark, settings, batch)
    relate.run(spark, settings, batch, with_unionable=unionable)
    return batch


CITIES = ["Albany", "Boston", "Chicago", "Denver", "El Paso", "Fresno"]
KINDS = ["retail", "office", "industrial", "housing"]


def _rows(rng: random.Random, n: int) -> list[list[str]]:
    return [
        [rng.choice(CITIES), rng.choice(KINDS), f"{rng.gauss(100, 10):.2f}", str(rng.randint(2000, 2005))]
        for _ in range(n)
    ]


def crafted_lake() -> tuple[list[ParsedTable], dict[str, str]]:
    rng = random.Random(5)
    rows = _rows(rng, 80)
    headers = ["city", "kind", "amount", "year"]
    first = ParsedTable("file:crafted/sales_2019.csv", headers, [list(c) for c in zip(*rows[:40], strict=True)])
    # the other half of the rows, columns renamed and reordered
    second_cols = list(zip(*rows[40:], strict=True))
    second = ParsedTable(
        "file:crafted/sales_2020.csv",
        ["Year", "Total Amount", "town", "category"],
        [list(second_cols[3]), list(second_cols[2]), list(second_cols[0]), list(second_cols[1])],
    )
    # a decoy: the same headers, different values
    decoy_rows = [
        [
            rng.choice(["Oslo", "Bergen", "Tromso"]),
            rng.choice(["x1", "x2", "x3"]),
            f"{rng.gauss(5000, 30):.2f}",
            str(rng.randint(1800, 1805)),
        ]
        for _ in range(40)
    ]
    decoy = ParsedTable("file:crafted/decoy.csv", headers, [list(c) for c in zip(*decoy_rows, strict=True)])
    other = ParsedTable(
        "file:crafted/weather.csv",
        ["station", "temp"],
        [[f"s{i}" for i in range(30)], [f"{rng.gauss(15, 5):.1f}" for _ in range(30)]],
    )
    expected = {"city": "town", "kind": "category", "amount": "Total Amount", "year": "Year"}
    return [first, second, decoy, other], expected
