"""Put the awx.awx collection under build/collections from the hash-pinned wheel named in requirements/awx.txt.

    python scripts/awx_collection.py [--dest build/collections]

The `ansible` community package on PyPI carries awx.awx; pip downloads the wheel (hash checked, no dependencies)
into build/downloads/pip and only ansible_collections/awx/awx/ is unpacked. A second run reuses the wheel and
the unpacked copy when its MANIFEST.json names the expected version.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "ansible_collections/awx/awx/"


def pinned(requirements: Path) -> tuple[str, str]:
    """(name, version) of the one `name==version --hash=...` line of the requirements file."""
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            spec = line.split()[0]
            name, _sep, version = spec.partition("==")
            if not version or "--hash=sha256:" not in line:
                sys.exit(f"{requirements}: expected one 'name==version --hash=sha256:...' line, got {line!r}")
            return name, version
    sys.exit(f"{requirements}: no requirement")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requirements", type=Path, default=ROOT / "requirements" / "awx.txt")
    ap.add_argument("--downloads", type=Path, default=ROOT / "build" / "downloads" / "pip")
    ap.add_argument("--dest", type=Path, default=ROOT / "build" / "collections")
    args = ap.parse_args(argv)
    name, version = pinned(args.requirements)
    wheel = args.downloads / f"{name}-{version}-py3-none-any.whl"
    # pip checks the hash of a wheel it finds in --find-links as well as of one it downloads
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--require-hashes", "--find-links", str(args.downloads), "-d", str(args.downloads),
                    "-r", str(args.requirements)], check=True)
    with zipfile.ZipFile(wheel) as zf:
        manifest = json.loads(zf.read(PREFIX + "MANIFEST.json"))
        want = manifest["collection_info"]["version"]
        target = args.dest / PREFIX
        have = target / "MANIFEST.json"
        if have.exists() and json.loads(have.read_text())["collection_info"]["version"] == want:
            print(f"awx.awx {want} already in {args.dest}")
            return 0
        shutil.rmtree(target, ignore_errors=True)
        members = [m for m in zf.namelist() if m.startswith(PREFIX)]
        zf.extractall(args.dest, members)
    print(f"awx.awx {want} (from {wheel.name}) -> {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
