"""lake_crawl: crawl every configured source (one mapped task per source) and announce new batches.

The `announce` task emits the lake-changes asset event only when some source landed a non-empty
batch; otherwise it is skipped and lake_index is not triggered.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import dag, get_current_context, task
from airflow.sdk.exceptions import AirflowSkipException

from dags.common import LAKE_CHANGES, PORTAL_RETRIES, START, TAGS, default_args


@dag(
    dag_id="lake_crawl",
    schedule="@daily",
    start_date=START,
    catchup=False,
    max_active_runs=1,
    tags=TAGS,
    default_args=default_args(),
    doc_md=__doc__,
)
def lake_crawl() -> None:
    @task
    def list_sources() -> list[str]:
        from spark_jobs.orchestration import tasks as dag_tasks  # deferred: DAG files parse without loading the jobs

        return dag_tasks.source_names()

    @task(**PORTAL_RETRIES)
    def crawl(source: str) -> int:
        from plugins.airflow_plugin import with_portal_credentials  # deferred: DAG files parse without loading the jobs
        from spark_jobs.orchestration import tasks as dag_tasks  # deferred: DAG files parse without loading the jobs

        settings = with_portal_credentials(dag_tasks.current_settings(), source)
        # 0 = nothing changed (a None return pushes no XCom, which `announce` would then miss)
        return dag_tasks.crawl_source(source, settings=settings) or 0

    @task(outlets=[LAKE_CHANGES])
    def announce(batch_ids: list[int]) -> list[int]:
        # one slice read: iterating the lazy sequence asks for the item past the end, logged as an error
        ids = sorted(b for b in batch_ids[:] if b)
        if not ids:
            raise AirflowSkipException("no source changed: no asset event")
        get_current_context()["outlet_events"][LAKE_CHANGES].extra = {"batch_ids": list[Any](ids)}
        return ids

    announce(crawl.expand(source=list_sources()))


lake_crawl()
