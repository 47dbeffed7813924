"""The broker.xml schemas of the Artemis versions the collection supports, taken from Apache Artemis itself.

Each version's `artemis-server-<v>.jar` (Maven Central, `org.apache.activemq:artemis-server:<v>`, sha512 pinned
below) carries `schema/artemis-server.xsd`, `artemis-configuration.xsd` and `xml.xsd`. This downloads the jar once
into build/downloads and extracts those files into `build/schemas/<v>/`, where the render and validation tests
read them. Nothing here is copied into the repository.

    python -m continuity_lab.schemas [--out build/schemas] [--downloads build/downloads]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import urllib.request
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAVEN = "https://repo1.maven.org/maven2/org/apache/activemq/artemis-server"
# The version matrix of the schema tests: oldest supported, around each feature boundary, newest.
JAR_SHA512 = {
    "2.30.0": "a3e0715e6ece8d060330f4a015f98c1573865ffa388cf09e001e0cb09a81428fb913d79a8a586c1041995832a91cd7fa3"
              "7103c81a40db4aeea24293323db51cd",
    "2.33.0": "402af172c8861a4a6d9ff866bd9f66d53c50d32e59da6b1f624909ce5e2b78ecc204336aa32be9191d5c7f251c581721"
              "0e6ada575006447b475a8915f671edd4",
    "2.37.0": "43ec2b4f37d74dc32b2046a5a76e46087560e9d3fbf4bcf775f3cbaa2d4dc55f6581f04df07b32edd6d0d9f3ef703e84"
              "46a6608b35ee1cf49c9e705e42fe9532",
    "2.40.0": "d89d6cc1cc0520f994bfe41b35b384d8f1f66a1dbe1215cbff3b01cbd14881cf289e589578c7ff5a89b3a3a32aa890e9"
              "119ab6f66142a731a31e994dc778ffb4",
    "2.42.0": "894251bffd4835f79c1f3124ca12f9fa6b154afc50fe8856b5fab62d6ea2c47fa97608de357d2238d5bc23182b8c92b6"
              "7a91e71abcdaf8459c4457ed9ccef5c7",
    "2.44.0": "7e9ae2430ea921cf5a881eec2b91af939907de5534a19a72c2dd265a22b6879b99e88068e2e8e62164daeae84f9fbdd5"
              "8fa4443c2d027c8b62d3eaf6a8a5cb7c",
}
SCHEMA_FILES = ("artemis-server.xsd", "artemis-configuration.xsd", "xml.xsd")


def _sha512(path: Path) -> str:
    digest = hashlib.sha512()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_jar(version: str, downloads: Path) -> Path:
    """The verified jar in `downloads` (downloaded once; a file with the wrong checksum is fetched again)."""
    want = JAR_SHA512[version]
    jar = downloads / f"artemis-server-{version}.jar"
    if jar.exists() and _sha512(jar) == want:
        return jar
    downloads.mkdir(parents=True, exist_ok=True)
    tmp = jar.with_suffix(".part")
    with urllib.request.urlopen(f"{MAVEN}/{version}/{jar.name}", timeout=120) as resp, open(tmp, "wb") as out:
        while chunk := resp.read(1 << 20):
            out.write(chunk)
    got = _sha512(tmp)
    if got != want:
        tmp.unlink()
        raise SystemExit(f"{jar.name}: sha512 {got} does not match the pinned {want}")
    tmp.replace(jar)
    return jar


def extract(version: str, downloads: Path, out: Path) -> Path:
    target = out / version
    if all((target / name).exists() for name in SCHEMA_FILES):
        return target
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(fetch_jar(version, downloads)) as jar:
        for name in SCHEMA_FILES:
            (target / name).write_bytes(jar.read(f"schema/{name}"))
    return target


def root() -> Path:
    """Where the tests read the schemas (ARTEMIS_SCHEMA_ROOT overrides build/schemas)."""
    import os

    return Path(os.environ.get("ARTEMIS_SCHEMA_ROOT") or REPO / "build" / "schemas")


def path(version: str) -> Path:
    """The extracted schema directory of one version; a clear error when `make schemas` has not run."""
    target = root() / version
    if not all((target / name).exists() for name in SCHEMA_FILES):
        raise FileNotFoundError(f"no Artemis {version} schema at {target}: run `make schemas` "
                                "(python -m continuity_lab.schemas)")
    return target


def versions() -> list[str]:
    """Every version of the matrix; a clear error when one is missing."""
    for version in JAR_SHA512:
        path(version)
    return list(JAR_SHA512)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m continuity_lab.schemas", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=REPO / "build" / "schemas")
    p.add_argument("--downloads", type=Path, default=REPO / "build" / "downloads")
    args = p.parse_args(argv)
    for version in JAR_SHA512:
        print(f"{version}: {extract(version, args.downloads, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
