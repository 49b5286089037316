"""The one place a SparkSession is built, with defaults that suit a small machine.

Executors must run the project's interpreter (they import mmh3, numpy and our UDF modules), so the
session pins `spark.pyspark.python` to it; without that a cluster worker picks the system python3
and fails on the first UDF. A missing or too-old Java is reported as `JavaError` with what to
install, instead of py4j's "Java gateway process exited" stack trace.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from catalog.core.errors import JavaError
from catalog.core.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
MIN_JAVA = 17
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def java_executable() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def java_major_version(java: str) -> int | None:
    """Major version from `java -version` ("17.0.15" -> 17, "1.8.0_392" -> 8), None if unreadable."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def check_java() -> None:
    java = java_executable()
    if java is None:
        raise JavaError(
            f"Spark needs Java {MIN_JAVA} or newer: no `java` on PATH and JAVA_HOME is not set "
            "(install e.g. openjdk-17-jre-headless)"
        )
    major = java_major_version(java)
    if major is None or major < MIN_JAVA:
        raise JavaError(
            f"Spark needs Java {MIN_JAVA} or newer, but {java} is version {major or 'unknown'} "
            "(set JAVA_HOME to a newer JDK)"
        )


def spark_conf(settings: Settings) -> dict[str, str]:
    """The configuration every Juncture session starts with; settings.spark.conf overrides it."""
    conf = {
        "spark.driver.memory": settings.spark.driver_memory,
        "spark.sql.shuffle.partitions": str(settings.spark.shuffle_partitions),
        "spark.default.parallelism": str(settings.spark.shuffle_partitions),
        "spark.ui.enabled": str(settings.spark.ui).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # Delta stores microsecond timestamps; INT96 would not read back through delta-rs.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.sql.adaptive.enabled": "true",
        # A session runs many small jobs (a service runs batch after batch). Each broadcast join's hash
        # table is built in the driver on a whole memory page (by default up to 64 MB, even for ten
        # rows) and lives until a GC lets the cleaner drop it; the status store keeps every query's
        # plan graph. Small pages, frequent collection and little history keep the driver's heap for
        # the work (a test session at 2 GB ran out after ~400 jobs without them).
        "spark.buffer.pageSize": "4m",
        "spark.cleaner.periodicGC.interval": "1min",
        "spark.sql.ui.retainedExecutions": "50",
        "spark.ui.retainedJobs": "100",
        "spark.ui.retainedStages": "100",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        # The project root first: an editable install exposes our packages through an import hook that
        # executor processes (started by the JVM, not by this interpreter) do not run.
        "spark.executorEnv.PYTHONPATH": os.pathsep.join([str(PROJECT_ROOT), *(p for p in sys.path if p)]),
    }
    if settings.spark.master.startswith("local"):
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    if settings.spark.delta_jars:
        conf["spark.sql.extensions"] = "io.delta.sql.DeltaSparkSessionExtension"
        conf["spark.sql.catalog.spark_catalog"] = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    conf.update(settings.spark.conf)
    return conf


def get_spark(settings: Settings, app_name: str = "juncture") -> SparkSession:
    """The process's SparkSession (created on first call, reused after: Spark allows one per JVM)."""
    check_java()
    from pyspark.sql import SparkSession  # deferred: Arrow-only callers never load Spark

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.master(settings.spark.master).appName(app_name)
    for key, value in spark_conf(settings).items():
        builder = builder.config(key, value)
    if settings.spark.delta_jars:
        from delta import configure_spark_with_delta_pip  # deferred: Arrow-only callers never load Spark

        builder = configure_spark_with_delta_pip(builder)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    log.info(
        "spark session started",
        extra={"master": settings.spark.master, "app": app_name, "spark_version": spark.version},
    )
    return spark


def has_delta_jars(spark: SparkSession) -> bool:
    """Whether this session can write Delta itself (delta-spark jars on its classpath)."""
    try:
        spark.sparkContext._jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")  # type: ignore[union-attr]
    except Exception:  # py4j raises a generic Py4JJavaError for ClassNotFoundException
        return False
    return True
