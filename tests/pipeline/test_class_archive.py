"""The driver JVM's class data sharing archive (``continuity_pipeline prepare``, ``class_archive``): where it lives,
how a new one is installed, and that a real JVM maps it (``-Xshare:on`` refuses to start otherwise) while an
unusable one costs nothing but speed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from continuity_pipeline import class_archive
from continuity_pipeline import spark as sparkmod

# A JVM start with the pipeline's class path and options: a session, one job.
START = ("from continuity_pipeline import spark as s; x = s.session('local[1]'); "
         "assert x.range(3).count() == 3; print('jvm ok')")


def test_the_archive_is_per_jvm_and_pyspark_and_can_be_turned_off(tmp_path):
    env = {"CONTINUITY_PIPELINE_CACHE_DIR": str(tmp_path), "PATH": os.environ["PATH"]}
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    venv1, venv2 = tmp_path / "venv1" / "pyspark", tmp_path / "venv2" / "pyspark"
    for d in (venv1, venv2):
        (d / "jars").mkdir(parents=True)
    a = class_archive.archive_path("4.0.1", str(venv1), env)
    assert a is not None and os.path.dirname(a) == str(tmp_path) and a.endswith(".jsa")
    assert class_archive.archive_path("4.0.1", str(venv1), env) == a
    assert class_archive.archive_path("4.0.2", str(venv1), env) != a  # an upgrade does not map the old archive
    # another virtualenv with the same version has other jar paths: the JVM would refuse this one
    assert class_archive.archive_path("4.0.1", str(venv2), env) != a
    for path in (a, b := class_archive.archive_path("4.0.1", str(venv2), env)):
        with open(path, "wb") as fh:
            fh.write(b"archive")
    class_archive.record(a, "4.0.1", str(venv1), env)
    class_archive.record(b, "4.0.1", str(venv2), env)
    assert class_archive.remove_stale(str(tmp_path)) == []  # both can still be mapped
    os.utime(venv1 / "jars", (1, 1))  # reinstalled in place: new jar times
    assert class_archive.archive_path("4.0.1", str(venv1), env) != a
    assert class_archive.remove_stale(str(tmp_path)) == [a]  # that one can never be mapped again
    assert not os.path.exists(a) and not os.path.exists(a + ".json") and os.path.exists(b)
    assert class_archive.archive_path("4.0.1", str(venv1), {**env, "CONTINUITY_PIPELINE_CACHE_DIR": "off"}) is None
    assert class_archive.archive_path("4.0.1", str(venv1),
                                      {"CONTINUITY_PIPELINE_CACHE_DIR": str(tmp_path), "PATH": "/none"}) \
        is None  # no java: nothing to name it after
    assert class_archive.use_option(a) is None  # not written yet: nothing to map
    home = class_archive.cache_dir({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert home == str(tmp_path / "xdg" / "continuity-pipeline")


@pytest.mark.parametrize("exit_code, content, installed", [(0, b"archive", True), (1, b"archive", False),
                                                           (None, b"archive", False), (0, b"", False)])
def test_only_a_complete_archive_from_a_clean_jvm_exit_is_installed(tmp_path, exit_code, content, installed):
    archive = str(tmp_path / "spark.jsa")
    partial = class_archive.partial_path(archive, pid=42)
    with open(partial, "wb") as fh:
        fh.write(content)
    assert class_archive.install(archive, partial, exit_code) is installed
    assert os.path.exists(archive) is installed
    assert not os.path.exists(partial)  # never left behind, never mapped


def _python(code: str, tmp_path, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable, **env})


def test_prepare_wrote_an_archive_that_the_jvm_maps(tmp_path):
    archive = sparkmod.archive_path()
    assert archive is not None, "class archives are off or no java was found"
    assert os.path.isfile(archive), (
        f"no class archive at {archive}: `make test-pipeline` runs `python -m continuity_pipeline prepare` first "
        "(make pipeline-prepare)")
    from continuity_pipeline.prepare import prepare

    assert prepare() == 0  # in place: kept, not rewritten
    # -Xshare:on makes the JVM refuse to start when it cannot map the archive it is given; the class loading log
    # says where Spark's classes came from: "shared objects file (top)" is the dynamic archive layer
    log = tmp_path / "classes.log"
    run = _python(START, tmp_path, JAVA_TOOL_OPTIONS=f"-Xshare:on -Xlog:class+load=info:file={log}")
    assert run.returncode == 0 and "jvm ok" in run.stdout, run.stdout[-2000:] + run.stderr[-3000:]
    spark_classes = [line for line in log.read_text().splitlines() if "] org.apache.spark." in line]
    from_archive = sum("source: shared objects file (top)" in line for line in spark_classes)
    from_jars = sum("source: file:" in line for line in spark_classes)  # (lambdas name their defining class)
    assert from_archive > 1000 and from_archive > 4 * from_jars, (from_archive, from_jars)


def test_an_unusable_archive_costs_speed_not_the_run(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    archive = sparkmod.archive_path({**os.environ, "CONTINUITY_PIPELINE_CACHE_DIR": str(cache)})
    with open(archive, "wb") as fh:
        fh.write(b"\0" * 4096)  # e.g. truncated by a full disk
    refused = _python(START, tmp_path, CONTINUITY_PIPELINE_CACHE_DIR=str(cache), JAVA_TOOL_OPTIONS="-Xshare:on")
    assert refused.returncode != 0 and "jvm ok" not in refused.stdout  # the check above can fail
    ignored = _python(START, tmp_path, CONTINUITY_PIPELINE_CACHE_DIR=str(cache))
    assert ignored.returncode == 0 and "jvm ok" in ignored.stdout, ignored.stdout[-2000:] + ignored.stderr[-3000:]
