"""Builds the SparkSession both pipeline jobs run on.

Local mode by default (``local[*]``), small driver, no UI, few shuffle partitions: the jobs read
metadata-sized data or one topic, not a data lake. Spark's Kafka connector is not part of pyspark;
its jars are fetched by ``make setup`` into ``.dev/jars/spark`` (``deploy/pom.xml``, profile
``spark``): the ``spark`` folder of :func:`common.paths.jars_dir` (``FERRY_JARS_DIR``).
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ferry.common import paths
from ferry.pipeline import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
MASTER_ENV = "FERRY_SPARK_MASTER"

# Spark logs INFO/WARN to stderr by default, which buries a CLI's output; only errors get through.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def jars_dir() -> Path:
    """Where the Kafka connector's jars are: ``$FERRY_JARS_DIR/spark`` (default ``.dev/jars/spark``)."""
    return paths.jars_dir("spark")


def kafka_jars() -> list[str]:
    """The connector's jar files, sorted; empty when they were never fetched."""
    folder = jars_dir()
    return sorted(str(p) for p in folder.glob("*.jar")) if folder.is_dir() else []


def require_kafka_jars() -> list[str]:
    jars = kafka_jars()
    if not any("spark-sql-kafka" in Path(j).name for j in jars):
        raise PipelineError(
            f"Spark's Kafka connector is not in {jars_dir()}: run `make setup` "
            f"(or point {paths.JARS_DIR_ENV} at a folder whose spark/ holds spark-sql-kafka and its dependencies)"
        )
    return jars


def _log_config() -> str:
    path = Path(tempfile.gettempdir()) / "ferry-spark-log4j2.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        path.write_text(_LOG4J2)
    return str(path)


def get_session(master: str | None = None, app_name: str = "ferry") -> SparkSession:
    """A SparkSession for Ferry's jobs (an already running one in this process is reused).

    ``master``: a Spark master URL; default ``$FERRY_SPARK_MASTER`` or ``local[*]``. The
    connector's jars are put on the classpath whenever they are present, because a JVM's
    classpath cannot grow once the first SparkSession started it.
    """
    from pyspark.sql import SparkSession

    # py4j logs every command it sends to the JVM at DEBUG, the Kafka options of `ferry audit`
    # included (a cluster's password inside sasl.jaas.config): never below INFO, even with
    # `--log-level DEBUG`.
    py4j = logging.getLogger("py4j")
    py4j.setLevel(max(py4j.getEffectiveLevel(), logging.INFO))
    # Without it Spark warns that the hostname resolves to a loopback address on every start.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log_opt = f"-Dlog4j2.configurationFile=file:{_log_config()}"
    builder = (
        SparkSession.builder.master(master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER)
        .appName(app_name)
        .config("spark.driver.memory", "512m")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", log_opt)
    )
    jars = kafka_jars()
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
