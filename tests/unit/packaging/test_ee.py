"""The execution environment: `ansible-builder create` succeeds from the shipped definition
(extensions/ee/execution-environment.yml) next to the collection tarball, the introspection of the installed
collection finds the Python and system packages the runbooks need, and requirements/ee.txt pins exactly the
versions the suite is tested with. (`ansible-builder build` needs podman or docker, which this machine lacks.)"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
DEFINITION = ROOT / "extensions" / "ee" / "execution-environment.yml"


def _pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[re.sub(r"[-_.]+", "-", name).lower()] = version
    return out


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ee-galaxy")
    build = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--force", "--output-path", str(out),
                            str(ROOT)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    return next(out.glob("continuity-artemis-*.tar.gz"))


def test_ee_requirements_are_pinned_to_the_tested_versions():
    ee = _pins(ROOT / "requirements" / "ee.txt")
    tested = _pins(ROOT / "requirements" / "constraints.txt")
    assert ee and all(ee.values()), f"every EE requirement is pinned: {ee}"
    for name, version in ee.items():
        assert tested.get(name) == version, f"{name}=={version} in ee.txt, {tested.get(name)} in constraints.txt"


def test_definition_takes_the_tarball_of_this_version():
    version = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    d = yaml.safe_load(DEFINITION.read_text())
    assert d["version"] == 3
    (coll,) = d["dependencies"]["galaxy"]["collections"]
    assert coll["name"].endswith(f"continuity-artemis-{version}.tar.gz") and coll["type"] == "file"
    (extra,) = d["additional_build_files"]
    assert extra["src"] == f"continuity-artemis-{version}.tar.gz"
    meta = yaml.safe_load((ROOT / "meta" / "execution-environment.yml").read_text())
    assert (ROOT / meta["dependencies"]["python"]).is_file() and (ROOT / meta["dependencies"]["system"]).is_file()


def test_the_shipped_ee_adds_the_pipeline_by_choice_pinned_to_the_tested_versions():
    d = yaml.safe_load(DEFINITION.read_text())
    tested = _pins(ROOT / "requirements" / "constraints.txt")
    python = {re.sub(r"[-_.]+", "-", p.split("==")[0]).lower(): p.split("==")[1] for p in d["dependencies"]["python"]}
    assert set(python) == {"pyspark", "pyarrow"} and all(tested.get(n) == v for n, v in python.items()), python
    assert d["dependencies"]["system"] == ["java-17-openjdk-headless [platform:rpm]"]


def test_ansible_builder_create_from_the_shipped_definition(tarball: Path, tmp_path: Path):
    shutil.copy2(DEFINITION, tmp_path / DEFINITION.name)
    shutil.copy2(tarball, tmp_path / tarball.name)
    context = tmp_path / "context"
    res = subprocess.run([str(BIN / "ansible-builder"), "create", "-f", str(tmp_path / DEFINITION.name), "-c",
                          str(context), "--output-filename", "Containerfile"], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    containerfile = (context / "Containerfile").read_text()
    assert "ansible-galaxy collection install" in containerfile or "install-from-bindep" in containerfile
    assert (context / "_build" / "collections" / tarball.name).is_file(), sorted(
        str(p.relative_to(context)) for p in context.rglob("*"))
    # the tools are pip-installed from the collection's own folders, and found without a .pth (issue 19)
    assert ".pth" not in containerfile
    assert re.search(r"pip install --no-deps \S+/traffic\S* \S+/agent\S* \S+/pipeline", containerfile), containerfile


def test_introspection_of_the_installed_collection_finds_what_the_runbooks_need(tarball: Path, tmp_path: Path):
    target = tmp_path / "collections"
    env = {**os.environ, "ANSIBLE_CONFIG": str(tmp_path / "none.cfg"), "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false"}
    inst = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--force", "-p", str(target),
                           str(tarball)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert inst.returncode == 0, inst.stdout + inst.stderr
    res = subprocess.run([str(BIN / "ansible-builder"), "introspect", str(target)], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    deps = yaml.safe_load(res.stdout)
    python = [p.split("#")[0].strip() for p in deps["python"]]
    found = {re.sub(r"[-_.]+", "-", p.split("==")[0]).lower(): p.split("==")[1] for p in python}
    assert found == _pins(ROOT / "requirements" / "ee.txt"), res.stdout
    system = [s.split("#")[0].strip() for s in deps["system"]]
    # the runbooks need neither PySpark nor Java: an EE built with this collection gets neither (issue 19)
    assert "pyspark" not in found and not [s for s in system if "openjdk" in s], (found, system)
    # the test-only Debian packages of bindep.txt carry the `test` profile, which an EE build does not select
    assert all("test]" in s for s in system if s.split()[0] in ("chromium", "prometheus", "shellcheck")), system
