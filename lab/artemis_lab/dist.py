"""Build `lab-artemis-<version>-bin.tar.gz`, laid out like Apache's binary distribution:

    lab-artemis-<version>/bin/artemis      shell launcher (python from ARTEMIS_LAB_PYTHON or the builder's)
    lab-artemis-<version>/lib/artemis_lab  this package, with EMULATED_VERSION
    lab-artemis-<version>/schema/          the real xsd files when ../shared/artemis-schema/<version>/ exists

The xsd files are copied into the build output only, never into the source tree.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from artemis_lab import instance, versions

PACKAGE = Path(__file__).resolve().parent
REPO = PACKAGE.parents[1]
SHARED_SCHEMA = REPO.parent / "shared" / "artemis-schema"


def build_tree(top: Path, version: str, python: str, schema_root: Path) -> None:
    (top / "bin").mkdir(parents=True)
    launcher = top / "bin" / "artemis"
    launcher.write_text(instance.render("home-artemis.sh.in", version=version, python=python))
    launcher.chmod(0o755)
    lib = top / "lib" / "artemis_lab"
    instance.copy_tree(PACKAGE, lib)
    (lib / "EMULATED_VERSION").write_text(version + "\n")
    schema = top / "schema"
    schema.mkdir()
    source = schema_root / version
    xsds = sorted(source.glob("*.xsd")) if source.is_dir() else []
    for xsd in xsds:
        shutil.copy2(xsd, schema / xsd.name)
    if not xsds:
        (schema / "README").write_text(
            f"The Artemis {version} configuration schema was not available when this lab archive was built;\n"
            "broker.xml is checked by the lab's own rules only.\n"
        )
    (top / "README.txt").write_text(
        f"lab broker emulating Artemis {version}: a Python stand-in for tests, not Apache ActiveMQ Artemis.\n"
        "Create an instance with: bin/artemis create <dir> --user U --password P --require-login\n"
    )


def build(out: Path, version: str, python: str = sys.executable, schema_root: Path = SHARED_SCHEMA) -> Path:
    if version not in versions.SUPPORTED_VERSIONS:
        raise SystemExit(f"unsupported version {version}; supported: {', '.join(versions.SUPPORTED_VERSIONS)}")
    out.mkdir(parents=True, exist_ok=True)
    name = f"lab-artemis-{version}"
    archive = out / f"{name}-bin.tar.gz"
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp) / name
        build_tree(top, version, python, schema_root)
        # A private partial name: several test sessions may build the same archive at once.
        partial = archive.with_name(f".{archive.name}.{os.getpid()}.partial")
        with tarfile.open(partial, "w:gz") as tar:
            tar.add(top, arcname=name)
        partial.replace(archive)
    return archive


def source_mtime() -> float:
    return max(p.stat().st_mtime for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def ensure(out: Path, version: str) -> Path:
    """The archive for `version` in `out`, rebuilt when missing or older than the lab sources."""
    archive = out / f"lab-artemis-{version}-bin.tar.gz"
    if not archive.exists() or archive.stat().st_mtime < source_mtime():
        return build(out, version)
    return archive


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m artemis_lab.dist", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--version", action="append", dest="versions", required=True, choices=versions.SUPPORTED_VERSIONS)
    p.add_argument("--python", default=sys.executable, help="interpreter baked into bin/artemis")
    p.add_argument("--schema-root", type=Path, default=SHARED_SCHEMA)
    args = p.parse_args(argv)
    for version in args.versions:
        print(build(args.out, version, args.python, args.schema_root))
    return 0


def extract(archive: Path, dest: Path) -> Path:
    """Unpack an archive built here (tests, labctl); returns the top directory."""
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
        top = tar.getnames()[0].split("/")[0]
    return dest / top



if __name__ == "__main__":
    sys.exit(main())
