"""``python -m continuity_pipeline prepare``: write the driver JVM's class data sharing archive once (class_archive).

One pipeline run over a small generated evidence (a swapover in JSON lines and a failover in Parquet, so both
readers, every stage and the HTML report load their classes) with a JVM that writes the archive as it exits.
Idempotent: an archive already in place for this JVM and PySpark is kept unless ``force``. Archives of JVMs or
PySpark installations that are gone or were replaced are deleted after a new one is written.
"""

from __future__ import annotations

import os
import sys
import tempfile

from continuity_pipeline import class_archive, jobs
from continuity_pipeline import spark as sparkmod
from continuity_pipeline.generate import GenParams, generate


def prepare(force: bool = False, quiet: bool = False) -> int:
    archive = sparkmod.archive_path()
    if archive is None:
        print(f"class archive: off ({class_archive.ENV_DIR}=off, or no java found)")
        return 0
    if os.path.isfile(archive) and not force:
        print(f"class archive: present {archive}")
        return 0
    try:
        os.makedirs(os.path.dirname(archive), exist_ok=True)
    except OSError as exc:
        print(f"error: cannot create the class archive directory: {exc} (set {class_archive.ENV_DIR} to a "
              "writable directory, or to off)", file=sys.stderr)
        return 2
    progress = jobs.Progress(quiet)
    with tempfile.TemporaryDirectory(prefix="continuity-prepare-") as tmp:
        evidence = os.path.join(tmp, "evidence")
        for spec in (dict(run_id="prepare-swapover", swapover_at=1.0, fmt="jsonl"),
                     dict(run_id="prepare-failover", failover_at=1.0, fmt="parquet")):
            generate(GenParams(out=evidence, messages=2000, producers=2, consumers=2, lost=2, duplicated=2,
                               reorder=2, in_doubt=1, **spec))
        progress(f"writing the class archive: one run with a JVM that records the classes it loads -> {archive}")
        spark = sparkmod.session(write_class_archive=archive, short_lived=True)
        try:
            jobs.run_pipeline(spark, [evidence], os.path.join(tmp, "out"), {}, progress, html=True)
        finally:
            installed = sparkmod.finish(spark, archive)
    if not installed:
        print(f"error: the JVM did not write the class archive {archive}; runs work without it, only slower",
              file=sys.stderr)
        return 1
    class_archive.record(archive, *sparkmod.pyspark_install())
    print(f"class archive: written {archive} ({os.path.getsize(archive) / 2**20:.0f} MiB)")
    for old in class_archive.remove_stale(os.path.dirname(archive)):
        print(f"class archive: removed {old} (its JVM or PySpark installation is gone or was replaced)")
    return 0
