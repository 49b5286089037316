"""`juncture rebuild`: regroups a dirty index (dirty share back to 0, groups exact again) and
publishes it; the catalog then holds the rebuilt index."""

from __future__ import annotations

import random

from sqlalchemy import func, select

from catalog.cli.main import main
from catalog.core.settings import load_settings
from catalog.db.engine import open_catalog, session_scope
from catalog.search.josie.models import JosieMeta, JosieToken
from spark_jobs.josie import update as update_josie
from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.store import LakeStore
from tests.josie_index.josie_oracle import check_invariants, model_sets, random_batch, read_index, write_column_tokens


def test_rebuild_command_regroups_and_publishes(spark, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("JUNCTURE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    store = LakeStore(settings.lake, spark)
    rng = random.Random(7)
    lake: dict[str, dict[str, frozenset[str]]] = {}
    first = random_batch(rng, lake, 1, 40, n_ops=8)
    write_column_tokens(store, lake, list(first.touched), settings.index.cells_buckets)
    update_josie.run(spark, settings, first)
    second = random_batch(rng, lake, 2, 40, n_ops=6)
    write_column_tokens(store, lake, list(second.touched), settings.index.cells_buckets)
    assert update_josie.run(spark, settings, ChangeBatch(2, second.added, second.deleted)).state.n_dirty_lists > 0

    assert main(["rebuild"]) == 0
    idx = read_index(store)
    check_invariants(idx, fresh=True)
    assert idx.state["dirty_share"] == 0.0 and idx.state["index_version"] == 3
    assert idx.column_sets() == model_sets(lake)
    engine = open_catalog(settings.catalog_url)
    with session_scope(engine) as s:
        assert s.scalar(select(JosieMeta.value).where(JosieMeta.key == "index_version")) == "3"
        assert s.scalar(select(func.count()).select_from(JosieToken)) == len(idx.tokens)
    engine.dispose()
