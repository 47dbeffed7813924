"""Controller side of roles/agent: pack the agent package, the collection's module_utils and the evidence schema
into one reproducible tar.gz (sorted names, fixed times and owners), so the host receives ONE file whose checksum
only changes when the code does (idempotent copy, restart only on a real upgrade). The archive's paths are those
of a site-packages directory: the role unpacks it into the agent's own virtualenv, where Python finds both
``continuity_agent`` and ``ansible_collections.continuity.artemis`` with no .pth file or PYTHONPATH.

Prints the agent's runtime requirements as JSON, read from agent/pyproject.toml (their one home).

usage: bundle.py <collection root> <output .tar.gz>
"""

import gzip
import io
import json
import os
import sys
import tarfile
import tomllib

PARTS = (
    ("agent/continuity_agent", "continuity_agent", ".py"),
    ("plugins/module_utils", "ansible_collections/continuity/artemis/plugins/module_utils", ".py"),
    ("schemas", "ansible_collections/continuity/artemis/schemas", ".json"),
)


def requirements(root: str) -> list:
    with open(os.path.join(root, "agent", "pyproject.toml"), "rb") as fh:
        return list(tomllib.load(fh)["project"]["dependencies"])


def main(root: str, out: str) -> int:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for src, dest, suffix in PARTS:
            folder = os.path.join(root, src)
            names = sorted(n for n in os.listdir(folder) if n.endswith(suffix) and not n.startswith("."))
            if not names:
                print(f"nothing to bundle in {folder}", file=sys.stderr)
                return 1
            for name in names:
                with open(os.path.join(folder, name), "rb") as fh:
                    data = fh.read()
                info = tarfile.TarInfo(f"{dest}/{name}")
                info.size, info.mtime, info.mode, info.uid, info.gid = len(data), 0, 0o644, 0, 0
                tar.addfile(info, io.BytesIO(data))
    with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
        gz.write(buf.getvalue())
    print(json.dumps({"requirements": requirements(root)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
