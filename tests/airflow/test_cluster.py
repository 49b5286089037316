"""Cluster mode: lake_index spark-submits its stages (SparkSubmitOperator) to a real Spark standalone
master and worker started on loopback from the pip-installed pyspark; the master named by an Airflow
connection. The catalog must then hold the landed tables, and the master must list the stage jobs."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from catalog import lookup
from catalog.core.settings import Settings
from catalog.db.engine import open_catalog, session_scope
from spark_jobs.crawl.land import ParsedTable, land_batch
from spark_jobs.lake.store import LakeStore
from spark_jobs.orchestration import airflow_runner as airflow_env

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, what: str, timeout: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    """Poll `check()` until true (a readiness wait, not a timing assumption)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def master_state(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
        return json.load(r)


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[tuple[str, int]]:
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOG_DIR": str(tmp_path / "spark-logs"),
        "SPARK_WORKER_DIR": str(tmp_path / "spark-work"),
    }
    port, ui, worker_ui = free_port(), free_port(), free_port()
    spark_class = str(spark_home / "bin" / "spark-class")
    logs = tmp_path / "spark-logs"
    logs.mkdir()
    procs: list[subprocess.Popen] = []
    try:
        procs.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(ui),
                ],
                env=env,
                stdout=(logs / "master.out").open("w"),
                stderr=subprocess.STDOUT,
            )
        )
        wait_for(lambda: master_state(ui).get("status") == "ALIVE", "the Spark master")
        master = f"spark://127.0.0.1:{port}"
        procs.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    master,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(worker_ui),
                    "--work-dir",
                    str(tmp_path / "spark-work"),
                ],
                env=env,
                stdout=(logs / "worker.out").open("w"),
                stderr=subprocess.STDOUT,
            )
        )
        wait_for(lambda: master_state(ui).get("aliveworkers", 0) >= 1, "a Spark worker to register")
        yield master, ui
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.mark.timeout(2400)  # six spark-submits (a JVM and executors each) on a shared 2-core machine
def test_lake_index_submits_stages_to_standalone_cluster(
    af_settings: Settings,
    standalone_cluster,  # type: ignore[no-untyped-def]
    monkeypatch,
) -> None:
    master, ui = standalone_cluster
    monkeypatch.setenv("AIRFLOW_CONN_JUNCTURE_SPARK", master)
    conf = {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.memory": "512m",
        "spark.cores.max": "1",
    }
    settings = dataclasses.replace(
        af_settings,
        spark=dataclasses.replace(af_settings.spark, driver_memory="1g", conf=conf),
        airflow=dataclasses.replace(af_settings.airflow, spark_conn_id="juncture_spark"),
    )
    tables = [
        ParsedTable(
            "file:cities.csv",
            ["city", "country"],
            [["Oslo", "Lima", "Pune"], ["NO", "PE", "IN"]],
            source="t",
            name="cities.csv",
            format="csv",
            content_sha256="1",
        ),
        ParsedTable(
            "file:countries.csv",
            ["country", "name"],
            [["NO", "PE"], ["Norway", "Peru"]],
            source="t",
            name="countries.csv",
            format="csv",
            content_sha256="2",
        ),
    ]
    batch = land_batch(LakeStore(settings.lake), tables, [], n_buckets=settings.index.cells_buckets)

    run = airflow_env.run_dag(settings, "lake_index")

    stage_tasks = [
        t
        for t in run.tasks
        if t not in ("land_manual", "pending_batches", "has_work", "backlog", "rebuild_needed", "trigger_rebuild")
    ]
    assert stage_tasks and all(run.tasks[t] == "success" for t in stage_tasks), run.tasks
    with session_scope(open_catalog(settings.catalog_url)) as s:
        published = {t.table_id: [c.column for c in lookup.columns(s, t.table_id)] for t in lookup.tables(s)}
        assert {t.batch_id for t in lookup.tables(s)} == {str(batch.batch_id)}
    assert published == {"file:cities.csv": ["city", "country"], "file:countries.csv": ["country", "name"]}
    apps = {a["name"] for a in master_state(ui).get("completedapps", [])}
    assert {f"juncture.{t}" for t in stage_tasks} <= apps, apps
    submit = Path(settings.airflow.home) / "submit"  # the submitted settings (with secrets) are gone
    assert not submit.exists() or list(submit.iterdir()) == []
