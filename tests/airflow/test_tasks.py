"""The task layer without DAG runs: the lake lock, settings handed to spark-submitted jobs, the
`juncture update` conf, and the catalog page the plugin mounts in the Airflow API server."""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
from pathlib import Path

import pytest

from catalog.core.errors import UserError
from catalog.core.settings import Settings, SourceConfig, load_settings
from spark_jobs.orchestration import tasks as dag_tasks


def test_lake_lock_excludes_a_second_writer_and_names_the_holder(settings: Settings) -> None:
    with dag_tasks.lake_lock(settings, "lake_index:tokens"):
        with dag_tasks.lake_lock(settings, "nested", wait_s=0):  # re-entrant in the holding thread
            pass
        # another thread (an in-process task) is excluded, and told who holds the lock
        outcome: list[str] = []

        def other() -> None:
            try:
                with dag_tasks.lake_lock(settings, "other", wait_s=0):
                    outcome.append("got it")
            except dag_tasks.LakeBusyError as err:
                outcome.append(str(err))

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert len(outcome) == 1 and outcome[0].startswith("lake is busy: lake_index:tokens (pid ")
    with dag_tasks.lake_lock(settings, "after release", wait_s=0):
        pass


def test_settings_toml_round_trips(settings: Settings, tmp_path: Path) -> None:
    s = dataclasses.replace(
        settings,
        sources=(
            SourceConfig(name="f", kind="folder", path=str(tmp_path / "f")),
            SourceConfig(name="nyc", kind="socrata", url="https://data.example.org", app_token='a"b'),
        ),
        spark=dataclasses.replace(settings.spark, conf={"spark.x": "1"}),
        index=settings.index.with_family("josie", dirty_threshold=0.05, update_engine="spark"),
        airflow=dataclasses.replace(settings.airflow, spark_conn_id="c", source_connections={"nyc": "conn_nyc"}),
    )
    path = tmp_path / "submitted.toml"
    path.write_text(dag_tasks.settings_toml(s, master="spark://127.0.0.1:7077"))
    loaded = load_settings({}, config_file=path)
    expected = dataclasses.replace(s, spark=dataclasses.replace(s.spark, master="spark://127.0.0.1:7077"))
    assert dataclasses.replace(loaded, config_file=None) == expected


def test_update_conf_validates_before_triggering(settings: Settings, tmp_path: Path) -> None:
    from catalog.cli.commands.update import update_conf
    from catalog.cli.context import CliContext

    ctx = CliContext(settings)
    f = tmp_path / "x.csv"
    f.write_text("a\n1\n")
    assert update_conf(ctx, [str(f)], ["file:y.csv"]) == {"add": [str(f.resolve())], "delete": ["file:y.csv"]}
    for add, delete in (([], []), ([str(tmp_path / "missing.csv")], []), ([], ["not-an-id"])):
        with pytest.raises(UserError):
            update_conf(ctx, add, delete)


def test_update_takes_repeated_and_listed_paths() -> None:
    from catalog.cli.main import build_parser

    parse = build_parser().parse_args
    args = parse(
        ["update", "--add", "a.csv", "--add", "b.csv", "c.csv", "--delete", "file:x.csv", "--delete", "file:y.csv"]
    )
    assert (args.add, args.delete) == (["a.csv", "b.csv", "c.csv"], ["file:x.csv", "file:y.csv"])
    assert parse(["update", "--delete", "file:x.csv"]).add == []


def test_catalog_page_searches_and_shows_a_table(settings: Settings, monkeypatch, airflow_home) -> None:  # type: ignore[no-untyped-def]
    from spark_jobs.orchestration import airflow_runner as airflow_env

    airflow_env.prepare(
        dataclasses.replace(settings, airflow=dataclasses.replace(settings.airflow, home=str(airflow_home)))
    )
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from catalog.db.engine import open_catalog, session_scope
    from catalog.db.models import CatalogColumn, CatalogTable
    from plugins import airflow_plugin

    with session_scope(open_catalog(settings.catalog_url)) as s:
        for tid, headers in (("file:cities.csv", ["city", "country"]), ("file:other.csv", ["x"])):
            s.add(
                CatalogTable(
                    table_id=tid,
                    name=tid[5:],
                    title=None,
                    source_name="t",
                    format="csv",
                    n_rows=3,
                    n_columns=len(headers),
                    batch_id="1",
                    index_version=1,
                    published_at=dt.datetime.now(dt.UTC),
                )
            )
            for i, h in enumerate(headers, start=1):
                s.add(CatalogColumn(column_id=f"{tid}#{h}", table_id=tid, position=i, header=h))
    monkeypatch.setenv("JUNCTURE_CATALOG_URL", settings.catalog_url)
    monkeypatch.setattr(airflow_plugin, "_api", airflow_plugin._LazyCatalogApi())
    server = FastAPI()  # as Airflow's API server mounts a plugin's app: at its url_prefix
    (plugin_app,) = [a for a in airflow_plugin.JuncturePlugin.fastapi_apps if a["name"] == "Juncture catalog"]
    server.mount(plugin_app["url_prefix"], airflow_plugin.create_ui_app())
    client = TestClient(server)
    page = client.get("/juncture/", params={"q": "citi"}).text
    assert "file:cities.csv" in page and "file:other.csv" not in page
    assert 'href="/juncture/table?id=file%3Acities.csv"' in page  # links stay under the mount
    assert 'href="/juncture/static/site.css"' in page and client.get("/juncture/static/site.css").status_code == 200
    assert client.get("/juncture/static/vendor/vega-embed.min.js").status_code == 200
    table = client.get("/juncture/table", params={"id": "file:cities.csv"}).text
    assert "country" in table and "Unionable tables" in table
    missing = client.get("/juncture/table", params={"id": "file:nope.csv"})
    assert missing.status_code == 404 and "unknown table_id" in missing.text
    assert "Lake state" in client.get("/juncture/state").text
    big = b"city,n\n" + b"".join(b"Paris%d,%d\n" % (i, i) for i in range(10_000))  # over the API's 16 KB
    searched = client.post("/juncture/search", files={"file": ("q.csv", big)})
    assert searched.status_code == 200 and 'id="join-results"' in searched.text and "10,000 rows" in searched.text
    values = {"values": [f"value {i}" for i in range(3000)]}  # a 40 KB body: a search's, not a lookup's limit
    assert client.post("/juncture/v1/search/join", json=values).status_code != 413
    for prefix in ("/juncture/api", "/juncture"):
        api = client.get(f"{prefix}/v1/tables").json()
        assert sorted(t["table_id"] for t in api["items"]) == ["file:cities.csv", "file:other.csv"]


def test_airflow_loads_the_plugin_and_mounts_the_catalog(af_settings: Settings) -> None:
    from spark_jobs.orchestration import airflow_runner as airflow_env

    airflow_env.prepare(af_settings)
    from airflow import plugins_manager

    apps, _ = plugins_manager.get_fastapi_plugins()
    assert plugins_manager.get_import_errors() == {}
    assert [a["url_prefix"] for a in apps if a["name"] == "Juncture catalog"] == ["/juncture"]


def test_the_dags_tasks_are_the_pipeline_stages_and_rebuild_steps_in_order() -> None:
    from spark_jobs.orchestration.pipeline import all_stages
    from spark_jobs.orchestration.rebuild import steps

    assert [name for name, _ in all_stages()] == dag_tasks.stage_names()
    assert list(steps()) == dag_tasks.rebuild_step_names()
