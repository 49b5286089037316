"""The full re-relate of `lake_rebuild` gives the same answers as the incremental batches did."""

from __future__ import annotations

from pathlib import Path

from catalog import lookup
from catalog.db.engine import open_catalog, session_scope
from spark_jobs.lake.store import LakeStore
from spark_jobs.publish import catalog as publish_catalog
from spark_jobs.publish.catalog import publish_rebuilt
from spark_jobs.relate.joinable import JOINABLE
from spark_jobs.relate.stage import relate_all
from spark_jobs.relate.unionable import UNIONABLE


def gold(settings, name: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    rows = LakeStore(settings.lake).read_arrow(name).to_pylist()
    return sorted(
        tuple(sorted((k, round(v, 9) if isinstance(v, float) else v) for k, v in r.items() if k != "index_version"))
        for r in rows
    )


def answers(settings, two_states) -> dict[str, list[dict]]:  # type: ignore[no-untyped-def]
    with session_scope(open_catalog(settings.catalog_url)) as s:
        out = {}
        for cid in two_states.column_ids()[:-1]:
            try:
                out[cid] = [
                    {k: v for k, v in d.items() if k != "index_version"}
                    for d in lookup.as_dict(lookup.joinable(s, cid, 50))
                ]
            except lookup.UnknownIdError:
                out[cid] = []
        for tid in two_states.table_ids()[:-1]:
            try:
                out[tid] = [
                    {k: v for k, v in d.items() if k != "index_version"}
                    for d in lookup.as_dict(lookup.unionable(s, tid, 50))
                ]
            except lookup.UnknownIdError:
                out[tid] = []
    return out


def test_full_re_relate_equals_the_incremental_answers(
    spark,
    two_states,
    catalog_settings,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    settings = two_states.copy_of_b(catalog_settings, tmp_path)
    for batch in (two_states.batch_1, two_states.batch_2):
        publish_catalog.run(spark, settings, batch)
    incremental = (gold(settings, JOINABLE), gold(settings, UNIONABLE))
    before = answers(settings, two_states)
    assert any(before.values())  # the lake has joinable and unionable answers to compare

    counts = relate_all(spark, settings)
    assert counts["index_version"] == two_states.batch_2.batch_id
    assert (gold(settings, JOINABLE), gold(settings, UNIONABLE)) == incremental
    publish_rebuilt(settings, spark)
    assert answers(settings, two_states) == before
