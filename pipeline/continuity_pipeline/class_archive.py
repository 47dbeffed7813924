"""A class data sharing archive for the driver JVM (JDK 13+ dynamic AppCDS).

Why: every pipeline run starts a fresh JVM that loads and verifies ~16,000 Spark classes while it plans and runs
its first jobs; on 2 cores that was ~2 s of a rehearsal's whole run and of a 10 M-event reconciliation
(benchmarks/README.md). ``python -m continuity_pipeline prepare`` runs the pipeline once over a small generated
evidence with a JVM that writes the classes it loaded to an archive when it exits (``-XX:ArchiveClassesAtExit``);
every later run maps that archive (``-XX:SharedArchiveFile``). Writing it slows that one run (~2x, plus ~10 s at
exit), which is why an operator's run never does it.

The JVM checks an archive against its own build and class path and ignores one that does not match (a warning,
then a normal start), so a stale archive costs speed, never correctness. The name carries the JVM and the PySpark
installation, so upgrading either means running ``prepare`` again. The archive is written under a partial name and
renamed into place only after that JVM exited with status 0: a half-written file is never mapped.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import subprocess

ENV_DIR = "CONTINUITY_PIPELINE_CACHE_DIR"  # where the archive lives; "off" disables it
EXIT_WAIT_SECONDS = 180.0  # the JVM writes the archive (~170 MB) as it exits
# The JVM lists every class it could not archive (generated code, signed jars) as a warning: ~1,000 lines.
QUIET_DUMP = "-Xlog:cds=off"


def cache_dir(environ: dict | None = None) -> str | None:
    env = os.environ if environ is None else environ
    configured = env.get(ENV_DIR)
    if configured:
        return None if configured.lower() == "off" else configured
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "continuity-pipeline")


def java_binary(environ: dict | None = None) -> str | None:
    """The java pyspark launches (spark-class: JAVA_HOME/bin/java, else java on PATH)."""
    env = os.environ if environ is None else environ
    home = env.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java", path=env.get("PATH"))
    return os.path.realpath(found) if found and os.path.exists(found) else None


def archive_path(pyspark_version: str, pyspark_dir: str, environ: dict | None = None) -> str | None:
    """Where the archive for this JVM and this PySpark installation lives; None when archives are off or no java
    is found. The JVM maps an archive only with the exact class path (jar paths, sizes, times) it was written
    with: two virtualenvs with the same PySpark version each get their own, and a reinstall a new one."""
    directory, java = cache_dir(environ), java_binary(environ)
    if directory is None or java is None:
        return None
    name = _name(java, pyspark_version, pyspark_dir)
    return os.path.join(directory, name) if name else None


def _name(java: str, pyspark_version: str, pyspark_dir: str) -> str | None:
    if not os.path.isfile(java):
        return None
    st = os.stat(java)
    jars = os.path.join(pyspark_dir, "jars")
    jars_time = int(os.stat(jars).st_mtime) if os.path.isdir(jars) else 0
    key = f"{java}|{st.st_size}|{int(st.st_mtime)}|{pyspark_version}|{os.path.realpath(jars)}|{jars_time}".encode()
    return f"spark-{pyspark_version}-{hashlib.sha256(key).hexdigest()[:12]}.jsa"


def record(archive: str, pyspark_version: str, pyspark_dir: str, environ: dict | None = None) -> None:
    """Note next to an archive what it was written for, so ``remove_stale`` can tell when it can never be mapped."""
    with open(archive + ".json", "w") as fh:
        json.dump({"java": java_binary(environ), "pyspark_version": pyspark_version, "pyspark_dir": pyspark_dir}, fh)


def remove_stale(directory: str) -> list[str]:
    """Delete the archives whose JVM or PySpark installation is gone or was replaced (their name would differ now):
    the JVM could never map them again. Returns what was deleted."""
    removed = []
    for note in sorted(glob.glob(os.path.join(directory, "spark-*.jsa.json"))):
        archive = note[: -len(".json")]
        try:
            with open(note) as fh:
                meta = json.load(fh)
            current = _name(meta["java"] or "", meta["pyspark_version"], meta["pyspark_dir"])
        except (OSError, ValueError, KeyError, TypeError):
            current = None
        if current != os.path.basename(archive):
            for path in (archive, note):
                if os.path.exists(path):
                    os.remove(path)
            removed.append(archive)
    return removed


def use_option(archive: str | None) -> str | None:
    """The JVM option that maps the archive, when there is one."""
    return f"-XX:SharedArchiveFile={archive}" if archive and os.path.isfile(archive) else None


def partial_path(archive: str, pid: int | None = None) -> str:
    return f"{archive}.partial-{os.getpid() if pid is None else pid}"


def write_options(partial: str) -> str:
    return f"-XX:ArchiveClassesAtExit={partial} {QUIET_DUMP}"


def install(archive: str, partial: str, jvm_exit_code: int | None) -> bool:
    """After the JVM exited: move a complete archive into place (atomic rename); drop an incomplete one."""
    if jvm_exit_code == 0 and os.path.isfile(partial) and os.path.getsize(partial) > 0:
        os.replace(partial, archive)
        return True
    if os.path.exists(partial):
        os.remove(partial)
    return False


def wait_exit(proc: subprocess.Popen, timeout: float = EXIT_WAIT_SECONDS) -> int | None:
    """Close the gateway JVM's stdin (pyspark's JVM exits on EOF, writing the archive) and wait for it."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        return proc.wait(timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
