"""lake_rebuild: weekly (and on demand, or when lake_index finds the JOSIE index too dirty):
duplicate-group rebuild, full re-relate, publish."""

from __future__ import annotations

from airflow.sdk import chain, dag, task

from dags.common import START, TAGS, default_args


@dag(dag_id="lake_rebuild", schedule="@weekly", start_date=START, catchup=False, max_active_runs=1, tags=TAGS,
     default_args=default_args(), doc_md=__doc__)
def lake_rebuild() -> None:
    @task
    def rebuild_groups() -> dict:
        from spark_jobs.orchestration import tasks as dag_tasks

        return dag_tasks.rebuild_step("rebuild_groups")

    @task
    def relate_all() -> dict:
        from spark_jobs.orchestration import tasks as dag_tasks

        return dag_tasks.rebuild_step("relate_all")

    @task
    def publish_all() -> dict:
        from spark_jobs.orchestration import tasks as dag_tasks

        return dag_tasks.rebuild_step("publish_all")

    chain(rebuild_groups(), relate_all(), publish_all())


lake_rebuild()
