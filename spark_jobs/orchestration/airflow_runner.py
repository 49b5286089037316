"""Embedded Airflow: run Juncture's DAGs in this process with `dag.test()`, no scheduler or API server.

* `AIRFLOW_HOME` is `settings.airflow.home`, else `<settings.home>/airflow`; the metadata database
  is SQLite in it, migrated (`airflow db migrate`) once per Airflow version.
* Airflow reads its configuration when first imported, so `prepare()` sets the environment before
  that import, and refuses to switch to another home later in the same process.
* DAG tasks find the caller's `Settings` through `spark_jobs.orchestration.tasks.bind_settings`.
* A run that triggers another DAG (lake_index -> lake_rebuild) leaves a queued run in the metadata
  DB; with no scheduler to pick it up, `run_dag` runs it in-process too and records the outcome.

This module is the only place outside `dags/` that imports Airflow, and it does so lazily:
`juncture lookup` and `juncture search` never import it.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from catalog.core.errors import JunctureError, UserError
from catalog.core.settings import Settings

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
DAGS_DIR = ROOT / "dags"
PLUGINS_DIR = ROOT / "plugins"
DAG_IDS = ("lake_crawl", "lake_index", "lake_rebuild")


class DagRunError(JunctureError):
    """An in-process DAG run did not succeed; names the failed tasks."""

    def __init__(self, dag_id: str, run_id: str, state: str, failed: list[str]) -> None:
        super().__init__(
            f"DAG {dag_id} run {run_id} ended {state}; failed tasks: {', '.join(failed) or 'none'}"
            " (see the task logs under AIRFLOW_HOME/logs)"
        )
        self.dag_id, self.run_id, self.state, self.failed = dag_id, run_id, state, failed


@dataclass
class DagRunResult:
    dag_id: str
    run_id: str
    state: str
    tasks: dict[str, str]  # task id (with map index) -> state
    seconds: float
    triggered: list[DagRunResult] = field(default_factory=list)


def airflow_home(settings: Settings) -> Path:
    home = Path(settings.airflow.home) if settings.airflow.home else Path(settings.home) / "airflow"
    return home if home.is_absolute() else home.resolve()


def environment(settings: Settings) -> dict[str, str]:
    """The Airflow configuration of embedded mode, as environment variables."""
    home = airflow_home(settings)
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_DIR),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PLUGINS_DIR),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        # dag.test() logs every task transition to the console; keep embedded runs readable (the
        # task logs under AIRFLOW_HOME/logs and Juncture's own -v logging still have the detail).
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    }


def prepare(settings: Settings) -> Path:
    """Configure Airflow for embedded mode (before its first import) and migrate its DB once."""
    env = environment(settings)
    home = Path(env["AIRFLOW_HOME"])
    if "airflow" in sys.modules or "airflow.settings" in sys.modules:
        current = os.environ.get("AIRFLOW_HOME", "")
        if Path(current).resolve() != home:
            raise UserError(
                f"Airflow is already configured in this process with AIRFLOW_HOME={current or '~/airflow'}"
                f"; embedded mode needs {home} (set airflow.home to the same folder)"
            )
    home.mkdir(parents=True, exist_ok=True)
    os.environ.update(env)
    import airflow  # deferred: Airflow loads only when a DAG runs

    marker = home / f".juncture-db-migrated-{airflow.__version__}"
    if not marker.exists():
        from airflow.utils import db  # deferred: Airflow loads only when a DAG runs

        t0 = time.perf_counter()
        db.upgradedb()  # what `airflow db migrate` runs
        marker.write_text("ok\n")
        log.info(
            "airflow metadata db migrated",
            extra={"airflow_home": str(home), "seconds": round(time.perf_counter() - t0, 1)},
        )
    return home


def load_dags(settings: Settings) -> dict[str, Any]:
    """Juncture's DAGs parsed from `dags/` (raises if any file fails to import)."""
    prepare(settings)
    from airflow.dag_processing.dagbag import DagBag  # deferred: Airflow loads only when a DAG runs

    bag = DagBag(dag_folder=str(DAGS_DIR))
    if bag.import_errors:
        path, err = next(iter(bag.import_errors.items()))
        raise JunctureError(f"DAG file {path} failed to import: {err}")
    return dict(bag.dags)


def run_dag(
    settings: Settings,
    dag_id: str,
    conf: Mapping[str, Any] | None = None,
    *,
    follow_triggers: bool = True,
    check: bool = True,
) -> DagRunResult:
    """Run one DAG in-process (`dag.test(run_conf=conf)`) with `settings`; then the runs it triggered."""
    from spark_jobs.orchestration.tasks import bind_settings  # deferred: tasks is what the DAGs import

    dags = load_dags(settings)
    if dag_id not in dags:
        raise UserError(f"unknown DAG {dag_id!r} (known: {', '.join(sorted(dags))})")
    before = _queued_runs()
    t0 = time.perf_counter()
    with bind_settings(settings):
        dr = dags[dag_id].test(run_conf=dict(conf or {}))
    result = _result(dr, time.perf_counter() - t0)
    log.info(
        "dag run finished",
        extra={"dag_id": dag_id, "run_id": result.run_id, "state": result.state, "seconds": round(result.seconds, 1)},
    )
    if check and result.state != "success":
        failed = [t for t, s in result.tasks.items() if s in ("failed", "upstream_failed", "up_for_retry")]
        raise DagRunError(dag_id, result.run_id, result.state, failed)
    if follow_triggers:
        for run in sorted(_queued_runs() - before):
            result.triggered.append(_run_queued(settings, dags, run, check=check))
        for consumer, extra in _asset_consumers(result):
            result.triggered.append(run_dag(settings, consumer, None, follow_triggers=True, check=check))
            log.info("asset event consumed in-process", extra={"consumer": consumer, **extra})
    return result


# Asset URI -> the DAG scheduled on it (a scheduler would create that run from the asset event).
ASSET_CONSUMERS = {"juncture://lake/changes": "lake_index"}


def _asset_consumers(result: DagRunResult) -> list[tuple[str, dict[str, Any]]]:
    """The DAGs to run because `result`'s run emitted asset events (embedded mode has no scheduler)."""
    from airflow.models.asset import AssetEvent, AssetModel  # deferred: Airflow loads only when a DAG runs
    from airflow.utils.session import create_session  # deferred: Airflow loads only when a DAG runs

    with create_session() as session:
        rows = (
            session.query(AssetModel.uri, AssetEvent.extra)
            .join(AssetEvent, AssetEvent.asset_id == AssetModel.id)
            .filter(AssetEvent.source_dag_id == result.dag_id, AssetEvent.source_run_id == result.run_id)
            .all()
        )
    out: dict[str, dict[str, Any]] = {}
    for uri, extra in rows:
        if uri in ASSET_CONSUMERS:
            out[ASSET_CONSUMERS[uri]] = dict(extra or {})
    return sorted(out.items())


def _result(dr: Any, seconds: float) -> DagRunResult:
    from airflow.models.dagrun import DagRun  # deferred: Airflow loads only when a DAG runs
    from airflow.utils.session import create_session  # deferred: Airflow loads only when a DAG runs

    with create_session() as session:
        run = session.query(DagRun).filter(DagRun.dag_id == dr.dag_id, DagRun.run_id == dr.run_id).one()
        tasks = {
            (ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]"): str(ti.state)
            for ti in run.get_task_instances(session=session)
        }
        return DagRunResult(dr.dag_id, dr.run_id, str(run.state), tasks, seconds)


def _queued_runs() -> set[tuple[str, str]]:
    from airflow.models.dagrun import DagRun  # deferred: Airflow loads only when a DAG runs
    from airflow.utils.session import create_session  # deferred: Airflow loads only when a DAG runs

    with create_session() as session:
        rows = session.query(DagRun.dag_id, DagRun.run_id).filter(DagRun.dag_id.in_(DAG_IDS), DagRun.state == "queued")
        return {(d, r) for d, r in rows}


def _run_queued(settings: Settings, dags: dict[str, Any], run: tuple[str, str], *, check: bool) -> DagRunResult:
    """Execute a run another DAG queued (no scheduler here): a fresh in-process run with its conf;
    the queued run is then closed with the same state and a note pointing at the run that did it."""
    from airflow.models.dagrun import DagRun  # deferred: Airflow loads only when a DAG runs
    from airflow.utils.session import create_session  # deferred: Airflow loads only when a DAG runs

    dag_id, run_id = run
    with create_session() as session:
        queued = session.query(DagRun).filter(DagRun.dag_id == dag_id, DagRun.run_id == run_id).one()
        conf = dict(queued.conf or {})
    result = run_dag(settings, dag_id, conf, follow_triggers=True, check=check)
    with create_session() as session:
        queued = session.query(DagRun).filter(DagRun.dag_id == dag_id, DagRun.run_id == run_id).one()
        queued.state = result.state
        queued.note = f"executed in-process by juncture as run {result.run_id}"
    return result


def api_trigger(settings: Settings, dag_id: str, conf: Mapping[str, Any]) -> dict[str, Any]:
    """Trigger `dag_id` through the Airflow 3 REST API at `settings.airflow.api_url` (no Airflow import)."""

    base = settings.airflow.api_url.rstrip("/")
    headers = {}
    with httpx.Client(base_url=base, timeout=30.0) as client:
        if settings.airflow.username:
            tok = client.post(
                "/auth/token", json={"username": settings.airflow.username, "password": settings.airflow.password}
            )
            if tok.status_code >= 400:
                raise UserError(
                    f"airflow API {base}: login as {settings.airflow.username!r} failed (HTTP {tok.status_code})"
                )
            headers["Authorization"] = f"Bearer {tok.json()['access_token']}"
        resp = client.post(
            f"/api/v2/dags/{dag_id}/dagRuns",
            headers=headers,
            json={"logical_date": dt.datetime.now(dt.UTC).isoformat(), "conf": dict(conf)},
        )
        if resp.status_code >= 400:
            raise UserError(
                f"airflow API {base}: triggering {dag_id} failed (HTTP {resp.status_code}: {resp.text[:200]})"
            )
        return resp.json()
