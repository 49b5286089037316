"""The DAG files import cleanly (without reading settings), every DAG is tagged, every task retries,
portal-facing tasks back off, and the lookup/search entry points never import Airflow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from catalog.core.settings import Settings
from spark_jobs.orchestration import airflow_runner as airflow_env

ROOT = Path(__file__).resolve().parents[2]


def test_dagbag_imports_tags_and_retries(af_settings: Settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # A DAG file that read settings at import time would fail on this broken config path.
    monkeypatch.setenv("JUNCTURE_CONFIG", str(Path(af_settings.home) / "missing.toml"))
    airflow_env.prepare(af_settings)
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(airflow_env.DAGS_DIR))
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == set(airflow_env.DAG_IDS)
    for dag in bag.dags.values():
        assert "juncture" in dag.tags, dag.dag_id
        assert dag.max_active_runs == 1, dag.dag_id
        for t in dag.tasks:
            assert t.retries >= 1, f"{dag.dag_id}.{t.task_id} has no retries"
    crawl = bag.dags["lake_crawl"].get_task("crawl")
    assert crawl.retries >= 3 and crawl.retry_exponential_backoff
    index = bag.dags["lake_index"]
    assert set(index.params.keys()) == {"add", "delete"}
    assert index.get_task("tokens").downstream_task_ids  # a task per stage, chained
    assert {"land_manual", "pending_batches", "trigger_rebuild", "publish"} <= set(index.task_ids)


def test_lookup_and_search_never_import_airflow() -> None:
    code = (
        "import sys, catalog.lookup, catalog.cli.main, catalog.cli.commands.update; "
        "bad = sorted(m for m in sys.modules if m == 'airflow' or m.startswith('airflow.')); "
        "assert not bad, bad[:5]"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUNCTURE_", "AIRFLOW"))}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
