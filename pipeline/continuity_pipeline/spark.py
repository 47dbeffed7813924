"""SparkSession construction. Local by default; under spark-submit the master and resources come from it."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

SHORT_LIVED_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


def under_spark_submit() -> bool:
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def session(master: str | None = None, app_name: str = "continuity-pipeline", shuffle_partitions: int = 8,
            driver_memory: str | None = None, ui: bool = False, short_lived: bool = False) -> SparkSession:
    """A SparkSession for the pipeline.

    ``master`` None means: keep what spark-submit configured, else ``local[2]`` (a plain ``python -m`` run).
    AQE stays on so the shuffle partition count adapts to the data; the initial count is small because a
    rehearsal's ledgers are millions of rows, not billions.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    # spark-submit starts the JVM first and hands the Python driver its gateway port: then the master and the
    # resources are spark-submit's and must not be overridden here.
    if not under_spark_submit():
        builder = builder.master(master or "local[2]")
        if (master or "local").startswith("local"):
            # Local mode talks to itself only: without this the driver (and the UI, when on) binds the host's
            # first non-loopback interface. SPARK_LOCAL_IP is read by the JVM pyspark launches next.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            builder = (builder.config("spark.driver.host", "127.0.0.1")
                       .config("spark.driver.bindAddress", "127.0.0.1"))
    if driver_memory and not under_spark_submit():
        builder = builder.config("spark.driver.memory", driver_memory)
    if short_lived and not under_spark_submit():
        # A run over a small input is over before the JIT's optimizing compiler (C2) pays back: it compiled
        # ~24,000 methods (1.5 min of compiler threads, measured with JFR on a rehearsal's evidence). The quick
        # compiler alone halves the JVM's CPU time there; a big input keeps the default.
        builder = builder.config("spark.driver.extraJavaOptions", SHORT_LIVED_JAVA_OPTIONS)
    builder = (builder
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.adaptive.enabled", "true")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.enabled", "true" if ui else "false")
               .config("spark.ui.showConsoleProgress", "false")
               # A corrupt file must not abort the whole run: the reader compares the files it could read
               # with the files it listed and reports every one that yielded nothing.
               .config("spark.sql.files.ignoreCorruptFiles", "true")
               .config("spark.sql.parquet.compression.codec", "zstd")
               # The reader extracts ~80 fields from ONE from_json; this rewrite would otherwise turn it into one
               # JSON parse per field (and an optimizer blow-up on the validation expressions).
               .config("spark.sql.optimizer.enableJsonExpressionOptimization", "false")
               # The per-message aggregate has ~one group per two events: the small first-level hash map in front
               # of the real one overflows at once and every row pays both (10 M events: ~2 CPU-s, 8-10 % of the
               # reconciliation's wall, benchmarks/README.md).
               .config("spark.sql.codegen.aggregate.map.twolevel.enabled", "false")
               # The evidence schema is ~90 fields wide: above the default limit of 100 (counting nested and
               # metadata fields) Spark drops whole-stage codegen AND the vectorized Parquet reader.
               .config("spark.sql.codegen.maxFields", "400"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
