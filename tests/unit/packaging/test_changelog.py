"""The changelog (antsibull-changelog): fragments and changelog.yaml lint clean, the version in galaxy.yml is a
release of changelogs/changelog.yaml, and CHANGELOG.rst is what `antsibull-changelog generate` makes of it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def test_changelog_lints_clean():
    res = subprocess.run([str(BIN / "antsibull-changelog"), "lint"], capture_output=True, text=True, timeout=300,
                         cwd=ROOT)
    assert res.returncode == 0 and not res.stdout.strip(), res.stdout + res.stderr


def test_the_galaxy_version_is_a_release():
    version = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    releases = yaml.safe_load((ROOT / "changelogs" / "changelog.yaml").read_text())["releases"]
    assert version in releases, f"galaxy.yml {version}: no such release in changelogs/changelog.yaml"
    assert releases[version].get("release_date"), releases[version]
    assert releases[version]["changes"].get("release_summary")


def test_changelog_rst_is_generated_from_changelog_yaml(tmp_path):
    # generate in a copy: the checkout's CHANGELOG.rst must already be the generated one
    copy = tmp_path / "c"
    copy.mkdir()
    for name in ("changelogs", "galaxy.yml", "CHANGELOG.rst"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, copy / name)
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "build" / "collections")}
    res = subprocess.run([str(BIN / "antsibull-changelog"), "generate"],
                         capture_output=True, text=True, timeout=300, cwd=copy, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert (copy / "CHANGELOG.rst").read_text() == (ROOT / "CHANGELOG.rst").read_text(), (
        "CHANGELOG.rst is out of date: antsibull-changelog generate")
