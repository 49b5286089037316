"""lake_rebuild: weekly (and on demand, or when lake_index finds an index family due, e.g. JOSIE too dirty): one task
per step of `spark_jobs.orchestration.rebuild` (catch up on pending batches, each index family's
rebuild, full re-relate, publish), in order."""

from __future__ import annotations

from typing import Any

from airflow.sdk import chain, dag, task

from dags.common import START, TAGS, default_args
from spark_jobs.orchestration.plan import rebuild_step_names


def _step_task(step: str) -> Any:
    @task(task_id=step)
    def run() -> dict:
        from spark_jobs.orchestration import tasks as dag_tasks  # deferred: DAG files parse without loading the jobs

        return dag_tasks.rebuild_step(step)

    return run()


@dag(
    dag_id="lake_rebuild",
    schedule="@weekly",
    start_date=START,
    catchup=False,
    max_active_runs=1,
    tags=TAGS,
    default_args=default_args(),
    doc_md=__doc__,
)
def lake_rebuild() -> None:
    chain(*[_step_task(step) for step in rebuild_step_names()])


lake_rebuild()
