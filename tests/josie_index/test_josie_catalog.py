"""End to end on SQLite and PostgreSQL: tables landed with land_batch, the tokens and josie stages,
then the publish; the catalog copy equals the Delta copy after a build, after an incremental batch
(which rewrites only the changed rows) and after a rebuild, and the sets equal the columns' token
sets computed from the raw cells with catalog.core.identity."""

from __future__ import annotations

import numpy as np
from sqlalchemy import select

from catalog.core.identity import column_headers, column_id, token_set
from catalog.db.engine import open_catalog, session_scope
from catalog.search.josie.models import JosieMeta, JosiePosting, JosieSet, JosieToken
from spark_jobs.crawl.land import ParsedTable, land_batch
from spark_jobs.josie import rebuild as rebuild_josie
from spark_jobs.josie import update as update_josie
from spark_jobs.josie.publish import publish_josie
from spark_jobs.lake.store import LakeStore
from spark_jobs.orchestration.pipeline import run_batch
from spark_jobs.profile import tokens as column_tokens
from spark_jobs.publish import catalog as publish_catalog
from spark_jobs.publish.catalog import publish_rebuilt
from tests.josie_index.josie_oracle import Index, check_invariants, read_index


def _publish(spark, settings, batch):  # type: ignore[no-untyped-def]
    return publish_catalog.run(spark, settings, batch, publishers=[publish_catalog.publish_tables, publish_josie])


STAGES = [("tokens", column_tokens.run), ("josie", update_josie.run), ("publish", _publish)]


def _table(name: str, headers: list[str], rows: list[list[str | None]]) -> ParsedTable:
    return ParsedTable(table_id=f"file:{name}.csv", headers=headers, columns=[list(c) for c in zip(*rows, strict=True)])


def _raw_sets(tables: dict[str, ParsedTable]) -> dict[str, frozenset[str]]:
    out = {}
    for t in tables.values():
        for header, values in zip(column_headers(list(t.headers)), t.columns, strict=True):
            toks = token_set(values)
            if toks:
                out[column_id(t.table_id, header)] = toks
    return out


def _catalog_index(settings) -> Index:  # type: ignore[no-untyped-def]
    engine = open_catalog(settings.catalog_url)
    with session_scope(engine) as s:
        tokens = {r.token_id: (r.token, r.frequency, r.group_id) for r in s.scalars(select(JosieToken))}
        sets = {
            r.set_id: {
                "set_id": r.set_id,
                "column_id": r.column_id,
                "table_id": r.table_id,
                "size": r.size,
                "tokens": np.asarray(r.tokens).tolist(),
            }
            for r in s.scalars(select(JosieSet))
        }
        postings = {
            r.token_id: (np.asarray(r.set_ids).tolist(), np.asarray(r.positions).tolist(), np.asarray(r.sizes).tolist())
            for r in s.scalars(select(JosiePosting))
        }
        meta = {r.key: r.value for r in s.scalars(select(JosieMeta))}
    engine.dispose()
    return Index(tokens, sets, postings, meta)


def _assert_same(catalog: Index, delta: Index) -> None:
    assert catalog.tokens == delta.tokens
    assert catalog.sets == delta.sets
    assert catalog.postings == delta.postings
    assert int(catalog.state["index_version"]) == delta.state["index_version"]
    assert int(catalog.state["n_dirty_lists"]) == delta.state["n_dirty_lists"]


def test_catalog_copy_equals_delta_through_updates_and_rebuild(spark, catalog_settings):  # type: ignore[no-untyped-def]
    settings = catalog_settings
    store = LakeStore(settings.lake, spark)
    tables = {
        "a": _table(
            "a",
            ["City", "Code", "Note"],
            [["Paris", "75", "x"], ["Lyon", "69.0", None], ["Nice", "06", "n/a"], ["paris ", "75", "x"]],
        ),
        "b": _table("b", ["city", "id"], [["PARIS", "1"], ["Nice", "2"], ["Lille", "3"]]),
        "c": _table("c", ["v"], [["only"], ["only"]]),
        "d": _table("d", ["city", "empty"], [["Lyon", ""], ["Nice", "null"]]),
    }
    batch = land_batch(store, list(tables.values()), [], n_buckets=settings.index.cells_buckets)
    report = run_batch(spark, settings, batch, STAGES)
    assert report.results["josie"].mode == "build"
    delta = read_index(store)
    check_invariants(delta, fresh=True)
    assert delta.column_sets() == _raw_sets(tables)
    _assert_same(_catalog_index(settings), delta)

    # a changed table (an existing token added mid-set, a token removed), a new table, a deletion
    tables["a"] = _table(
        "a", ["City", "Code", "Note"], [["Lille", "75", "y"], ["Lyon", "69", None], ["Nice", "13", None]]
    )
    tables["e"] = _table("e", ["town"], [["Paris"], ["Marseille"]])
    del tables["c"]
    batch2 = land_batch(store, [tables["a"], tables["e"]], ["file:c.csv"], n_buckets=settings.index.cells_buckets)
    report = run_batch(spark, settings, batch2, STAGES)
    assert report.results["josie"].mode == "update"
    delta = read_index(store)
    check_invariants(delta, fresh=False)
    assert delta.column_sets() == _raw_sets(tables)
    counts = report.results["publish"]
    assert 0 < counts["josie_tokens_written"] < len(delta.tokens)  # only the changed rows
    assert counts["josie_sets_written"] < len(delta.sets)
    _assert_same(_catalog_index(settings), delta)

    assert rebuild_josie.run(spark, settings).mode == "rebuild"
    assert publish_rebuilt(settings, spark)["josie_tokens_written"] == len(read_index(store).tokens)
    delta = read_index(store)
    check_invariants(delta, fresh=True)
    assert delta.column_sets() == _raw_sets(tables)
    _assert_same(_catalog_index(settings), delta)
