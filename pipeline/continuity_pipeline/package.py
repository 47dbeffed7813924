"""Build the --py-files zip for spark-submit: this package plus the collection's pure module_utils it imports.

The zip holds ``continuity_pipeline/``; under ``ansible_collections/continuity/artemis/plugins/module_utils/`` the
module_utils the pipeline imports, directly or through each other (read from the sources, so a new import cannot
be forgotten here; they use the standard library only, no ansible-core); and the evidence JSON Schema at
``ansible_collections/continuity/artemis/schemas/``, where evidence.py looks for it (the Spark record schema is
derived from it when imported, on the driver and on every executor). Empty ``__init__.py`` files make the
collection path importable from a zip (zipimport does not resolve namespace packages).
"""

from __future__ import annotations

import ast
import os
import zipfile

import continuity_pipeline
from ansible_collections.continuity.artemis.plugins.module_utils import evidence

CORE = "ansible_collections.continuity.artemis.plugins.module_utils"
COLLECTION_PKG = CORE.replace(".", "/")
SCHEMA_ARCNAME = f"ansible_collections/continuity/artemis/schemas/{evidence.SCHEMA_FILE}"
# A fixed timestamp: the same sources give the same zip bytes.
ZIP_DATE = (2026, 1, 1, 0, 0, 0)


def _add(zf: zipfile.ZipFile, arcname: str, data: bytes) -> None:
    info = zipfile.ZipInfo(arcname, ZIP_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    zf.writestr(info, data)


def _core_imports(path: str) -> set[str]:
    """Names of the module_utils that the Python file at ``path`` imports."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == CORE:
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(CORE + "."):
            found.add(node.module[len(CORE) + 1:].split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(a.name[len(CORE) + 1:].split(".")[0] for a in node.names if a.name.startswith(CORE + "."))
    return found


def core_modules(pkg_dir: str) -> list[str]:
    """Paths of the module_utils the package in ``pkg_dir`` needs, with what those import in turn."""
    core_dir = os.path.dirname(os.path.abspath(evidence.__file__))
    todo = set()
    for name in os.listdir(pkg_dir):
        if name.endswith(".py"):
            todo |= _core_imports(os.path.join(pkg_dir, name))
    done: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in done:
            done.add(name)
            todo |= _core_imports(os.path.join(core_dir, name + ".py"))
    return sorted(os.path.join(core_dir, name + ".py") for name in done)


def build_zip(out: str) -> str:
    out = os.path.abspath(out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    pkg_dir = os.path.dirname(os.path.abspath(continuity_pipeline.__file__))
    with zipfile.ZipFile(out, "w") as zf:
        for name in sorted(os.listdir(pkg_dir)):
            if name.endswith(".py"):
                with open(os.path.join(pkg_dir, name), "rb") as fh:
                    _add(zf, f"continuity_pipeline/{name}", fh.read())
        parts = COLLECTION_PKG.split("/")
        for i in range(1, len(parts) + 1):
            _add(zf, "/".join(parts[:i]) + "/__init__.py", b"")
        for path in core_modules(pkg_dir):
            with open(path, "rb") as fh:
                _add(zf, f"{COLLECTION_PKG}/{os.path.basename(path)}", fh.read())
        with open(evidence.schema_path(), "rb") as fh:
            _add(zf, SCHEMA_ARCNAME, fh.read())
    return out
