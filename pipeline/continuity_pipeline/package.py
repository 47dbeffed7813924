"""Build the --py-files zip for spark-submit: this package plus the collection's pure module_utils it imports.

The zip holds ``continuity_pipeline/`` and ``ansible_collections/continuity/artemis/plugins/module_utils/``
(``lag.py`` and ``evidence.py`` only: standard library, no ansible-core), and the evidence JSON Schema at
``ansible_collections/continuity/artemis/schemas/``, where evidence.py looks for it (the Spark record schema is
derived from it when imported, on the driver and on every executor). Empty ``__init__.py`` files make the
collection path importable from a zip (zipimport does not resolve namespace packages).
"""

from __future__ import annotations

import os
import zipfile

import continuity_pipeline
from ansible_collections.continuity.artemis.plugins.module_utils import evidence, lag

MODULE_UTILS = (lag, evidence)
COLLECTION_PKG = "ansible_collections/continuity/artemis/plugins/module_utils"
SCHEMA_ARCNAME = f"ansible_collections/continuity/artemis/schemas/{evidence.SCHEMA_FILE}"
# A fixed timestamp: the same sources give the same zip bytes.
ZIP_DATE = (2026, 1, 1, 0, 0, 0)


def _add(zf: zipfile.ZipFile, arcname: str, data: bytes) -> None:
    info = zipfile.ZipInfo(arcname, ZIP_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    zf.writestr(info, data)


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
        for mod in MODULE_UTILS:
            with open(mod.__file__, "rb") as fh:
                _add(zf, f"{COLLECTION_PKG}/{os.path.basename(mod.__file__)}", fh.read())
        with open(evidence.schema_path(), "rb") as fh:
            _add(zf, SCHEMA_ARCNAME, fh.read())
    return out
