"""The --py-files zip carries every module_utils the pipeline imports, found from the sources (issue 19: a new
import in the pipeline or in the core must not leave executors without a module)."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from continuity_pipeline import package


def test_core_modules_follow_imports_transitively(tmp_path: Path):
    (tmp_path / "a.py").write_text("from ansible_collections.continuity.artemis.plugins.module_utils import gates\n")
    names = {os.path.basename(p) for p in package.core_modules(str(tmp_path))}
    # gates imports lag and site_state; site_state imports jolokia, objectname, versions, continuity_plugin;
    # lag imports evidence
    assert {"gates.py", "lag.py", "site_state.py", "jolokia.py", "objectname.py", "versions.py",
            "continuity_plugin.py", "evidence.py"} <= names, names
    assert "switch.py" not in names and "broker_xml.py" not in names


def test_the_zip_holds_what_the_pipeline_imports(tmp_path: Path):
    zip_path = package.build_zip(str(tmp_path / "p.zip"))
    with zipfile.ZipFile(zip_path) as zf:
        names = set(zf.namelist())
    pkg_dir = os.path.dirname(package.__file__)
    for path in package.core_modules(pkg_dir):
        assert f"{package.COLLECTION_PKG}/{os.path.basename(path)}" in names
    assert f"{package.COLLECTION_PKG}/evidence.py" in names
