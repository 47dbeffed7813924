"""The collection builds with ansible-galaxy, the tarball holds content only, it installs, every module's and every
filter's documentation renders from the INSTALLED copy (not from this checkout, which .venv also puts on sys.path),
and the runbooks of the installed copy pass a syntax check by their FQCN."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
MODULES = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py") if p.stem != "__init__")
RUNBOOKS = ["deploy", "initial_roles", "status", "swapover", "failover", "failback", "rehearsal"]


def _filter_names() -> list[str]:
    """The names each filter plugin file registers in FilterModule.filters() (read from the source, no import)."""
    names = []
    for path in sorted((ROOT / "plugins" / "filter").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == "filters":
                ret = next(n for n in ast.walk(node) if isinstance(n, ast.Return))
                names += [k.value for k in ret.value.keys]
    return sorted(names)


FILTERS = _filter_names()


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("galaxy")
    build = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--force", "--output-path",
                            str(out), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    tarball = next(out.glob("continuity-artemis-*.tar.gz"))
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    # build_ignore keeps tests, tooling, the lab, benchmarks and local state out of the published collection
    top = {n.split("/")[0] for n in names}
    assert not top & {"lab", "benchmarks", "plugin", "scripts", ".venv", "build", "Makefile", "ansible.cfg",
                      "pyproject.toml", ".ansible-lint", ".ci"}, sorted(top)
    assert [n for n in names if n.startswith("tests/") and "." in n.rsplit("/", 1)[-1]] == \
        [n for n in names if n.startswith("tests/sanity/ignore-")], "only the sanity ignore files of tests/ ship"
    assert not [n for n in names if n.startswith(("extensions/molecule", "inventories/lab")) or "__pycache__" in n]
    # and the content does ship: what meta/execution-environment.yml names, the tools the rehearsal runs, AWX as code
    for needed in ("requirements/controller.txt", "requirements/bindep.txt", "meta/execution-environment.yml",
                   "extensions/awx/configure.yml", "traffic", "pipeline", "agent", "schemas", "inventories/example",
                   "CHANGELOG.rst", "changelogs/changelog.yaml"):
        assert needed in names, needed
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


def _doc_env(installed: Path) -> dict[str, str]:
    return {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(installed), "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
            "ANSIBLE_CONFIG": str(installed.parent / "ansible.cfg")}


def _docs(installed: Path, kind: str, names: list[str]) -> tuple[dict, str]:
    """One `ansible-doc --json` run for every plugin of a kind (a run each cost ~2 s of Ansible's start-up): the
    documentation it rendered, by FQCN, and its warnings (a plugin it could not load is left out and named there)."""
    res = subprocess.run([str(BIN / "ansible-doc"), "-t", kind, "--json", *[f"continuity.artemis.{n}" for n in names]],
                         capture_output=True, text=True, timeout=300, env=_doc_env(installed), cwd=installed)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout), res.stderr


@pytest.fixture(scope="module")
def module_docs(installed: Path) -> tuple[dict, str]:
    return _docs(installed, "module", MODULES)


@pytest.fixture(scope="module")
def filter_docs(installed: Path) -> tuple[dict, str]:
    return _docs(installed, "filter", FILTERS)


@pytest.mark.parametrize("module", MODULES)
def test_module_doc_renders_from_the_installed_collection(installed: Path, module_docs, module: str) -> None:
    docs, warnings = module_docs
    doc = docs.get(f"continuity.artemis.{module}")
    assert doc is not None, f"ansible-doc rendered no documentation for {module}: {warnings}"
    assert doc["doc"]["short_description"] and doc["examples"] and doc["return"], doc
    assert str(installed) in doc["doc"]["filename"], "documentation came from somewhere else than the installed tarball"


def test_every_filter_is_registered_somewhere():
    assert len(FILTERS) == len(set(FILTERS)) and len(FILTERS) >= 20, FILTERS


@pytest.mark.parametrize("name", FILTERS)
def test_filter_doc_renders_from_the_installed_collection(installed: Path, filter_docs, name: str) -> None:
    docs, warnings = filter_docs
    doc = docs.get(f"continuity.artemis.{name}")
    assert doc is not None, f"ansible-doc rendered no documentation for {name}: {warnings}"
    assert doc["doc"]["short_description"] and doc["doc"]["description"], doc
    assert doc["examples"] and doc["return"], f"{name}: examples and return value are documented"
    assert str(installed) in doc["doc"]["filename"], "documentation came from somewhere else than the tarball"


@pytest.mark.parametrize("runbook", RUNBOOKS)
def test_runbook_of_the_installed_collection_passes_a_syntax_check(installed: Path, runbook: str) -> None:
    res = subprocess.run([str(BIN / "ansible-playbook"), "--syntax-check", "-i",
                          str(ROOT / "inventories" / "example" / "hosts.yml"), f"continuity.artemis.{runbook}"],
                         capture_output=True, text=True, timeout=120, env=_doc_env(installed), cwd=installed)
    assert res.returncode == 0, res.stdout + res.stderr
    # the playbook that was checked is the installed copy's
    assert f"playbook: {installed}/ansible_collections/continuity/artemis/playbooks/{runbook}.yml" in res.stdout, \
        res.stdout
