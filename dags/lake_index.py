"""lake_index: apply pending change batches — one task per pipeline stage — then publish, then
work on the backlog (the precomputed lists earlier runs left pending; `spark_jobs.orchestration.backlog`).

Runs on the lake-changes asset (lake_crawl) and on manual triggers whose conf names tables to add
(files, folders or configured sources) or delete (table ids); the manual request is first landed
as its own change batch. When an index family is due for a rebuild (JOSIE: its dirty share passes
its threshold), lake_rebuild is triggered.
"""

from __future__ import annotations

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import Param, chain, dag, task
from airflow.sdk.exceptions import AirflowFailException

from catalog.core.errors import UserError
from dags.common import LAKE_CHANGES, PENDING_TASK, START, TAGS, JunctureStageOperator, default_args
from spark_jobs.orchestration.plan import stage_names

PARAMS = {
    "add": Param(
        [],
        type="array",
        items={"type": "string"},
        title="Tables to add",
        description="Files or folders (CSV) to land, or names of configured sources to crawl",
    ),
    "delete": Param(
        [],
        type="array",
        items={"type": "string"},
        title="Tables to delete",
        description="table ids, e.g. file:a/b.csv or socrata:data.example.org:abcd-1234",
    ),
}


@dag(
    dag_id="lake_index",
    schedule=LAKE_CHANGES,
    start_date=START,
    catchup=False,
    max_active_runs=1,
    tags=TAGS,
    default_args=default_args(),
    params=PARAMS,
    doc_md=__doc__,
)
def lake_index() -> None:
    @task
    def land_manual(params: dict | None = None) -> int | None:
        from spark_jobs.orchestration import tasks as dag_tasks  # deferred: DAG files parse without loading the jobs

        try:
            return dag_tasks.land_manual((params or {}).get("add") or [], (params or {}).get("delete") or [])
        except UserError as e:  # a bad path or unknown table id: retrying cannot help
            raise AirflowFailException(str(e)) from e

    @task(task_id=PENDING_TASK)
    def pending_batches() -> list[int]:
        from spark_jobs.orchestration import tasks as dag_tasks  # deferred: DAG files parse without loading the jobs

        return dag_tasks.pending_batch_ids()

    @task.short_circuit
    def has_work(batch_ids: list[int]) -> bool:
        return bool(batch_ids)

    @task
    def backlog() -> dict:
        from spark_jobs.orchestration import tasks as dag_tasks  # deferred: DAG files parse without loading the jobs

        return dag_tasks.work_backlog()

    @task.short_circuit
    def rebuild_needed() -> bool:
        from spark_jobs.orchestration import tasks as dag_tasks  # deferred: DAG files parse without loading the jobs

        return dag_tasks.rebuild_needed()

    pending = pending_batches()
    stages = [JunctureStageOperator(task_id=name, stage=name) for name in stage_names()]
    trigger = TriggerDagRunOperator(
        task_id="trigger_rebuild",
        trigger_dag_id="lake_rebuild",
        conf={"reason": "an index family is due for a rebuild"},
    )
    chain(land_manual(), pending, has_work(pending), *stages, backlog(), rebuild_needed(), trigger)  # type: ignore[arg-type]


lake_index()
