"""Bounded candidate generation loses no good pair: on a crafted lake of partner tables (row and
column samples of a few base tables, some with every header renamed, some with every value
reformatted as well) mixed with skewed distractors, every pair of tables whose plain-Python score
against *every* other table reaches `THRESHOLD` was among the pipeline's candidates; and some
candidates share no header and no value with the table (their embeddings' band keys found them)."""

from __future__ import annotations

import random

from catalog.core.identity import normalize_token
from spark_jobs.crawl.land import ParsedTable
from spark_jobs.lake.store import LakeStore
from spark_jobs.relate.unionable import UNIONABLE_CANDIDATES
from tests.relations.lakes import CITIES, column_sets, index_batch
from tests.relations.test_union_candidates import skewed_table
from tests.relations.union_oracle import oracle_lists

THRESHOLD = 0.5
FIRST = ["ada", "alan", "grace", "edsger", "barbara", "donald", "ken", "dennis", "frances", "john", "leslie"]
LAST = ["lovelace", "turing", "hopper", "dijkstra", "liskov", "knuth", "thompson", "ritchie", "allen", "backus"]


def _base_rows(rng: random.Random, kind: int, n: int) -> tuple[list[str], list[list[str]]]:
    """A base table's headers and rows: three kinds of real-looking tables."""
    if kind == 0:
        headers = ["city", "product_code", "sale_date", "amount"]
        rows = [
            [
                rng.choice(CITIES),
                f"PR-{rng.randint(1000, 1060)}",
                f"2013-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                f"{rng.gauss(120, 30):.2f}",
            ]
            for _ in range(n)
        ]
    elif kind == 1:
        headers = ["full_name", "birth_date", "team", "score"]
        rows = [
            [
                f"{rng.choice(FIRST).title()} {rng.choice(LAST).title()}",
                f"19{rng.randint(40, 99)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                rng.choice(["red", "green", "blue", "gold"]),
                str(rng.randint(0, 100)),
            ]
            for _ in range(n)
        ]
    else:
        headers = ["carrier", "flight", "origin", "dep_delay"]
        rows = [
            [
                rng.choice(["UA", "AA", "DL", "B6", "WN"]),
                f"{rng.choice(['UA', 'AA', 'DL'])}{rng.randint(100, 999)}",
                rng.choice(["JFK", "LGA", "EWR", "BOS", "ORD", "SFO"]),
                str(rng.randint(-10, 90)),
            ]
            for _ in range(n)
        ]
    return headers, rows


def _reformat(value: str) -> str:
    """The same value written another way: dates month first with slashes, codes without their
    dash, names last name first, numbers with one more decimal."""
    if len(value) == 10 and value[4] == "-" and value[7] == "-":
        return f"{value[5:7]}/{value[8:]}/{value[:4]}"
    if "-" in value and not value.startswith("-"):
        return value.replace("-", "")
    if " " in value:
        first, last = value.split(" ", 1)
        return f"{last}, {first}"
    try:
        return f"{float(value):.3f}"
    except ValueError:
        return f"{value}."


def partner_lake(rng: random.Random) -> list[ParsedTable]:
    """Three partners of each of 6 bases (two of each kind): the first keeps its headers, the second
    renames all of them, the third renames them and reformats every value."""
    tables = []
    for b in range(6):
        headers, rows = _base_rows(rng, b % 3, 120)
        for p in range(3):
            picked = rng.sample(rows, 50)
            cols = sorted(rng.sample(range(len(headers)), 3))
            names = [headers[c] for c in cols] if p == 0 else [f"field_{rng.randint(10, 99)}_{i}" for i in cols]
            columns = [[r[c] if p < 2 else _reformat(r[c]) for r in picked] for c in cols]
            tables.append(ParsedTable(f"file:partners/b{b}p{p}.csv", names, columns))
    return tables


def test_no_pair_scoring_above_the_threshold_is_left_out_of_the_candidates(spark, settings) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(3)
    tables = partner_lake(rng) + [skewed_table(rng, f"d{i:02d}") for i in range(12)]
    index_batch(spark, settings, tables, unionable=True)
    candidates = {
        (r["table_id"], r["candidate_table_id"])
        for r in LakeStore(settings.lake).read_arrow(UNIONABLE_CANDIDATES).to_pylist()
    }
    good = {
        (r["table_id"], r["candidate_table_id"])
        for r in oracle_lists(tables, k=len(tables), evidence_only=False)
        if r["score"] >= THRESHOLD
    }
    assert len(good) >= 10, "the crafted lake has pairs above the threshold"
    assert good <= candidates, sorted(good - candidates)
    sets = column_sets(tables)
    by_table: dict[str, set[str]] = {}
    for column_id, tokens in sets.items():
        by_table.setdefault(column_id.split("#")[0], set()).update(tokens)
    by_table.update({t.table_id: set() for t in tables if t.table_id not in by_table})
    headers = {t.table_id: {normalize_token(h) for h in t.headers} for t in tables}
    blind = {(a, b) for a, b in candidates if not (by_table[a] & by_table[b]) and not (headers[a] & headers[b])}
    assert blind, "no candidate came from the embeddings alone"
