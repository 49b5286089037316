from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from catalog.core.errors import JavaError
from catalog.core.settings import Settings, environment_with
from spark_jobs.lake.session import check_java, java_major_version, spark_conf

JUNCTURE = str(Path(sys.executable).with_name("juncture"))


def fake_java(tmp_path: Path, version_line: str) -> Path:
    """A stand-in `java` that only answers -version: the too-old runtime cannot exist on this machine."""
    java = tmp_path / "bin" / "java"
    java.parent.mkdir(parents=True, exist_ok=True)
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return java


def test_version_parsing(tmp_path: Path) -> None:
    assert java_major_version(str(fake_java(tmp_path, 'openjdk version "17.0.15" 2025-04-15'))) == 17
    assert java_major_version(str(fake_java(tmp_path, 'java version "1.8.0_392"'))) == 8


def test_missing_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaError, match="needs Java 17 or newer"):
        check_java()


def test_old_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_java(tmp_path, 'java version "1.8.0_392"')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(JavaError, match="version 8"):
        check_java()


def test_cli_reports_missing_java_in_one_line(tmp_path: Path) -> None:
    env = environment_with(os.environ, home=tmp_path / "home")
    env.update(JAVA_HOME=str(tmp_path / "none"), PATH=str(tmp_path))
    proc = subprocess.run([JUNCTURE, "demo"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("juncture: Spark needs Java 17")


def test_conf_defaults_and_overrides() -> None:
    settings = Settings()
    conf = spark_conf(settings)
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.pyspark.python"] == sys.executable
    assert conf["spark.driver.host"] == "127.0.0.1"
    import dataclasses

    custom = dataclasses.replace(
        settings,
        spark=dataclasses.replace(
            settings.spark, master="spark://10.1.1.1:7077", conf={"spark.sql.shuffle.partitions": "64"}
        ),
    )
    conf = spark_conf(custom)
    assert conf["spark.sql.shuffle.partitions"] == "64"
    assert "spark.driver.host" not in conf


def test_session_is_local_and_shared(spark) -> None:  # type: ignore[no-untyped-def]
    assert spark.sparkContext.master == "local[2]"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert spark.range(10).count() == 10
