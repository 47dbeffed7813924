"""Fixtures that several integration modules share."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fault_support import VERSIONS
from runbook_support import Lab


@pytest.fixture(scope="session", params=VERSIONS)
def fault_lab(request, tmp_path_factory):
    """One two-site lab per Artemis version for both fault suites, which run as one stream per version
    (run-queue.sh): test_faults.py, then test_faults_jolokia.py on the same brokers. A lab's deploy and start cost
    ~75 CPU-s and the queue is CPU-bound, so a second deploy bought nothing: each suite starts from dc1 active and
    both sites in sync, which is what the other leaves (its last test converges and checks it).

    FAULTS_LAB_ROOT / FAULTS_LAB_BASE (/ FAULTS_LAB_VERSION, default 2.44.0): use a lab already up there instead
    (development; it is left running; the other version's cases are skipped)."""
    reuse = os.environ.get("FAULTS_LAB_ROOT")
    if reuse:
        reused_version = os.environ.get("FAULTS_LAB_VERSION", VERSIONS[0])
        if request.param != reused_version:
            pytest.skip(f"FAULTS_LAB_ROOT reuses one lab (Artemis {reused_version})")
        the_lab = Lab(Path(reuse), base=int(os.environ["FAULTS_LAB_BASE"]), version=request.param)
        the_lab.endpoints = json.loads((the_lab.root / "endpoints.json").read_text())
        yield the_lab
        return
    with Lab(tmp_path_factory.mktemp(f"faults-lab-{request.param}"), version=request.param).running() as the_lab:
        yield the_lab
