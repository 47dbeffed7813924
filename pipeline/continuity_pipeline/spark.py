"""SparkSession construction. Local by default; under spark-submit the master and resources come from it."""

from __future__ import annotations

import os
import sys

from pyspark import SparkContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from continuity_pipeline import class_archive

SHORT_LIVED_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
# The driver is a batch process: the throughput collector gives the tasks more of the 2 cores than G1 with its
# concurrent threads (10 M events: ~0.5 s of ~14). A cold JVM's optimizing compiler competes with the tasks for
# those cores, and most of what it compiles runs hot only briefly (planning, code generation): inlining smaller
# hot callees (100 bytecodes, not 325) leaves it less to compile (10 M events on PySpark 4.3: 13.5-14.4 s instead
# of 15.1-16.0; benchmarks/README.md).
LOCAL_JAVA_OPTIONS = "-XX:+UseParallelGC -XX:FreqInlineSize=100"


def under_spark_submit() -> bool:
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def session(master: str | None = None, app_name: str = "continuity-pipeline", shuffle_partitions: int = 8,
            driver_memory: str | None = None, ui: bool = False, short_lived: bool = False,
            write_class_archive: str | None = None) -> SparkSession:
    """A SparkSession for the pipeline.

    ``master`` None means: keep what spark-submit configured, else ``local[2]`` (a plain ``python -m`` run).
    AQE stays on (broadcast joins and skew handling adapt to the data) but does not merge shuffle partitions: the
    initial count is small because a rehearsal's ledgers are millions of rows, not billions.

    A driver JVM this call launches maps the class data sharing archive ``prepare`` wrote (``class_archive``);
    ``write_class_archive`` (an archive path) makes it write one instead, which ``finish`` installs.
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
    # options for the driver JVM this call launches (spark-submit launched its own; a second session reuses it)
    if SparkContext._gateway is None and not under_spark_submit():
        java_options = [LOCAL_JAVA_OPTIONS]
        if short_lived:
            # A run over a small input is over before the JIT's optimizing compiler (C2) pays back: it compiled
            # ~24,000 methods (1.5 min of compiler threads, measured with JFR on a rehearsal's evidence). The quick
            # compiler alone halves the JVM's CPU time there; a big input keeps the default.
            java_options.append(SHORT_LIVED_JAVA_OPTIONS)
        if write_class_archive:
            java_options.append(class_archive.write_options(class_archive.partial_path(write_class_archive)))
        else:
            mapped = class_archive.use_option(archive_path())
            java_options += [mapped] if mapped else []
        builder = builder.config("spark.driver.extraJavaOptions", " ".join(java_options))
    builder = (builder
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.adaptive.enabled", "true")
               # The initial count is already small (a multiple of the cores); merging partitions left 3 tasks
               # for 2 cores in two of the three big stages (10 M events: ~0.4 s of ~13, benchmarks/README.md).
               .config("spark.sql.adaptive.coalescePartitions.enabled", "false")
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


def pyspark_install() -> tuple[str, str]:
    """The version and the directory of the PySpark this process imports."""
    import pyspark

    return pyspark.__version__, os.path.dirname(os.path.abspath(pyspark.__file__))


def archive_path(environ: dict | None = None) -> str | None:
    """The class archive for this JVM and the PySpark installation this process imports (``class_archive``)."""
    return class_archive.archive_path(*pyspark_install(), environ)


def finish(spark: SparkSession, written_class_archive: str) -> bool:
    """Stop the session of ``session(write_class_archive=...)``, let its JVM exit now (it writes the archive as it
    exits) and install the archive; True when one was installed. A later ``session`` in this process starts a new
    JVM."""
    spark.stop()
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None:
        return False
    gateway.close()
    code = class_archive.wait_exit(proc)
    SparkContext._gateway = None
    SparkContext._jvm = None
    return class_archive.install(written_class_archive, class_archive.partial_path(written_class_archive), code)


def local_frame(spark: SparkSession, rows: list[tuple], schema: str | T.StructType) -> DataFrame:
    """A DataFrame of a few driver-side rows (``schema``: DDL or StructType), handed to the JVM as Arrow.

    Why not ``createDataFrame(rows)``: that converts the rows in a Python worker, whose first start took ~0.8 s and
    every later call ~0.2 s, with both cores held (the pipeline builds about ten such tables per run)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    struct = T.StructType.fromDDL(schema) if isinstance(schema, str) else schema
    assert isinstance(struct, T.StructType), schema
    names = struct.names
    table = pa.Table.from_pylist([dict(zip(names, r, strict=True)) for r in rows], schema=to_arrow_schema(struct))
    return spark.createDataFrame(table)
