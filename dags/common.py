"""What the three DAGs share: the lake-changes asset, default task arguments, and the stage operator.

Nothing here reads settings, connects or starts Spark at import time: the operator decides at
execute time whether to run its stage in-process (embedded mode) or to spark-submit it to the
master named by the Airflow connection `settings.airflow.spark_conn_id` (cluster mode).
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Asset

TAGS = ["juncture"]
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
# An asset event on this URI means "a change batch was committed to bronze `changes`"; the batch
# ids ride along in the event's extra, but lake_index always reads what is pending from the lake.
LAKE_CHANGES = Asset(name="juncture_lake_changes", uri="juncture://lake/changes")
RUN_STAGE = Path(__file__).resolve().parents[1] / "spark_jobs" / "orchestration" / "run_stage.py"
PENDING_TASK = "pending_batches"


def default_args(**overrides: Any) -> dict[str, Any]:
    """Every task retries; portal-facing ones pass more retries and exponential backoff."""
    args: dict[str, Any] = {
        "owner": "juncture",
        "retries": 2,
        "retry_delay": dt.timedelta(seconds=30),
        "retry_exponential_backoff": True,
        "max_retry_delay": dt.timedelta(minutes=10),
    }
    return {**args, **overrides}


PORTAL_RETRIES: dict[str, Any] = {
    "retries": 4,
    "retry_delay": dt.timedelta(seconds=20),
    "retry_exponential_backoff": True,
    "max_retry_delay": dt.timedelta(minutes=15),
}


class JunctureStageOperator(SparkSubmitOperator):
    """One pipeline stage for the pending batches (`spark_jobs.orchestration.run_stage`).

    Embedded (no `airflow.spark_conn_id` in the settings): runs `dag_tasks.run_stage` in this
    process. Cluster: spark-submits `spark_jobs/orchestration/run_stage.py STAGE --batch-ids …` to the connection's
    master, with the caller's settings written to a juncture.toml the job loads (private to this user,
    deleted when the job ends), while this task holds the lake lock. Either way the task's XCom is a
    few counts, never rows.
    """

    def __init__(self, *, stage: str, **kwargs: Any) -> None:
        ids = "{{ (ti.xcom_pull(task_ids='" + PENDING_TASK + "') or []) | join(',') }}"
        super().__init__(
            application=str(RUN_STAGE), application_args=[stage, "--batch-ids", ids], name=f"juncture.{stage}", **kwargs
        )
        self.stage = stage

    def execute(self, context: Any) -> Any:
        from spark_jobs.orchestration import tasks as dag_tasks  # deferred: DAG files parse without loading the jobs
        from spark_jobs.orchestration.run_stage import parse_ids  # deferred: DAG files parse without loading the jobs

        settings = dag_tasks.current_settings()
        batch_ids = parse_ids(str((self.application_args or ["", "", ""])[2]))
        if not batch_ids:
            self.log.info("no pending batches for stage %s", self.stage)
            return {}
        if not settings.airflow.spark_conn_id:
            return dag_tasks.run_stage(self.stage, batch_ids, settings=settings)
        self._conn_id = settings.airflow.spark_conn_id
        self._hook = None
        master = self._get_hook()._connection["master"]
        submit_dir = Path(settings.airflow.home or settings.home / "airflow") / "submit"
        name = f"{context['run_id']}-{self.stage}.toml".replace(":", "_").replace("+", "_").replace("/", "_")
        with dag_tasks.private_settings_file(
            submit_dir, name, dag_tasks.settings_toml(settings, master=master)
        ) as config:
            python = sys.executable
            self.env_vars = {
                "JUNCTURE_CONFIG": str(config),
                "JUNCTURE_HOME": str(settings.home),
                "JUNCTURE_LAKE": settings.lake,
                "JUNCTURE_CATALOG_URL": settings.catalog_url,
                "JUNCTURE_SPARK_MASTER": master,
                "PYSPARK_PYTHON": python,
                "PYSPARK_DRIVER_PYTHON": python,
                # spark-submit is found on PATH: put the interpreter's bin folder (the venv's) first.
                "PATH": os.pathsep.join([str(Path(python).parent), os.environ.get("PATH", "")]),
            }
            self.conf = {**(self.conf or {}), "spark.pyspark.python": python, "spark.pyspark.driver.python": python}
            self._hook = self._get_hook()
            with dag_tasks.lake_lock(settings, f"{context['dag'].dag_id}:{self.stage}"):
                super().execute(context)
        return {"submitted": True, "master": master, "batch_ids": batch_ids}
