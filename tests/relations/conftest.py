"""A two-state lake shared by the publish and lookup tests: `lake_a` after batch 1 and `lake_b`, a
copy of it after batch 2 (a table changed, one added, one deleted), both with gold relations."""

from __future__ import annotations

import dataclasses
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from catalog.core.identity import column_headers
from catalog.core.settings import Settings
from spark_jobs.crawl.land import ParsedTable
from spark_jobs.lake.batches import ChangeBatch
from tests.conftest import make_settings
from tests.relations.lakes import crafted_lake, index_batch, random_table


@dataclass(frozen=True)
class TwoStates:
    lake_a: str
    lake_b: str
    batch_1: ChangeBatch
    batch_2: ChangeBatch
    tables_a: tuple[ParsedTable, ...]
    tables_b: tuple[ParsedTable, ...]

    def settings(self, base: Settings, lake: str) -> Settings:
        return dataclasses.replace(base, lake=lake)

    def copy_of_b(self, base: Settings, folder: Path) -> Settings:
        """`base` on a copy of `lake_b` under `folder`, for a test that writes to the lake."""
        lake = str(folder / "lake")
        shutil.copytree(self.lake_b, lake)
        return self.settings(base, lake)

    def table_ids(self) -> list[str]:
        return sorted({t.table_id for t in (*self.tables_a, *self.tables_b)} | {"file:nowhere.csv"})

    def column_ids(self) -> list[str]:
        return sorted(
            {f"{t.table_id}#{h}" for t in (*self.tables_a, *self.tables_b) for h in column_headers(list(t.headers))}
            | {"file:nowhere.csv#x"}
        )


@pytest.fixture(scope="session")
def two_states(spark, tmp_path_factory: pytest.TempPathFactory) -> TwoStates:  # type: ignore[no-untyped-def]
    home = tmp_path_factory.mktemp("two_states")
    rng = random.Random(23)
    crafted, _ = crafted_lake()
    randoms = [random_table(rng, f"t{i}", vocab=12) for i in range(4)]
    tables_a = [*crafted, *randoms]
    settings_a = make_settings(home / "a")
    batch_1 = index_batch(spark, settings_a, tables_a, unionable=True)
    lake_b = str(home / "lake_b")
    shutil.copytree(settings_a.lake, lake_b)
    settings_b = dataclasses.replace(settings_a, lake=lake_b)
    changed = random_table(rng, "t1", vocab=12)
    added = random_table(rng, "t9", vocab=12)
    decoy = crafted[2].table_id
    batch_2 = index_batch(spark, settings_b, [changed, added], [decoy], unionable=True)
    tables_b = [t for t in tables_a if t.table_id not in (decoy, changed.table_id)] + [changed, added]
    return TwoStates(str(Path(settings_a.lake)), lake_b, batch_1, batch_2, tuple(tables_a), tuple(tables_b))
