"""The collection builds with ansible-galaxy, the tarball installs, and every module's documentation renders
from the INSTALLED copy (not from this checkout, which .venv also puts on sys.path)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
MODULES = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py") if p.stem != "__init__")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("galaxy")
    build = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--force", "--output-path",
                            str(out), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    tarball = next(out.glob("continuity-artemis-*.tar.gz"))
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    # build_ignore keeps the lab, benchmarks and local state out of the published collection
    assert not [n for n in names if n.split("/")[0] in ("lab", "benchmarks", ".venv", "build")], names
    assert "galaxy.yml" not in names and "MANIFEST.json" in names
    target = out / "collections"
    (out / "ansible.cfg").write_text("[defaults]\n")  # not the checkout's ansible.cfg, which points at build/
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(target), "ANSIBLE_CONFIG": str(out / "ansible.cfg")}
    inst = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--force", "-p", str(target),
                           str(tarball)], capture_output=True, text=True, timeout=300, env=env, cwd=out)
    assert inst.returncode == 0, inst.stdout + inst.stderr
    coll = target / "ansible_collections" / "continuity" / "artemis"
    assert (coll / "MANIFEST.json").exists(), inst.stdout
    return target


@pytest.mark.parametrize("module", MODULES)
def test_module_doc_renders_from_the_installed_collection(installed: Path, module: str) -> None:
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(installed), "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
           "ANSIBLE_CONFIG": str(installed.parent / "ansible.cfg")}
    res = subprocess.run([str(BIN / "ansible-doc"), "-t", "module", "--json", f"continuity.artemis.{module}"],
                         capture_output=True, text=True, timeout=120, env=env, cwd=installed)
    assert res.returncode == 0, res.stderr
    assert str(installed) in res.stdout, "documentation came from somewhere else than the installed tarball"
