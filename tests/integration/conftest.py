"""Fixtures that several integration modules share."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fault_support import VERSIONS, runs_on
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


@pytest.fixture(scope="session")
def site_lab(tmp_path_factory):
    """One two-site lab (Artemis 2.44.0, lab-up's defaults) for the modules of run-queue.sh's 'site' stream, one after
    the other: test_runner_lane, test_runbooks_swapover, test_runbooks_failover, test_plugin_lab (which ends in a
    failover, so it goes last). Each takes it through fault_support.start_state (dc1 active, in sync). One deploy
    instead of four: ~75 CPU-s each on a CPU-bound queue. A module run by itself gets a lab of its own, as before."""
    with Lab(tmp_path_factory.mktemp("site-lab")).running(active=None) as the_lab:
        yield the_lab


@pytest.fixture(scope="session")
def ha_lab(tmp_path_factory):
    """One HA lab (LAB_TOPOLOGY=ha: dc1 a replicated primary/backup pair, dc2 one broker) for test_ha_lab and then
    test_ha_agent in run-queue.sh's 'ha' stream; test_ha_agent takes it through fault_support.ha_start_state (the pair
    restarted as deployed when test_ha_lab left it otherwise). Three brokers' deploy fewer: ~135 s of a slot."""
    with Lab(tmp_path_factory.mktemp("ha-lab"), topology="ha").running(active=None) as the_lab:
        yield the_lab


def pytest_collection_modifyitems(config, items):
    """Tests marked case_per_version: their parametrized case n (in the order of its parametrize list) runs on
    VERSIONS[n % 2] only (fault_support.runs_on says why; FAULTS_EVERY_VERSION=1 runs every case on every version).
    The others are deselected, not skipped: on the other version they run."""
    keep, drop = [], []
    for item in items:
        spec = getattr(item, "callspec", None)
        if spec is None or item.get_closest_marker("case_per_version") is None:
            keep.append(item)
            continue
        case = case_index(item)
        (keep if runs_on(spec.params["fault_lab"], case) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def case_index(item) -> int:
    """The position of an item's case in its parametrize list (pytest's own indices count across versions)."""
    mark = item.get_closest_marker("parametrize")
    names = [n.strip() for n in mark.args[0].split(",")] if isinstance(mark.args[0], str) else list(mark.args[0])
    values = tuple(item.callspec.params[n] for n in names)
    cases = [tuple(v) if len(names) > 1 else (v,) for v in mark.args[1]]
    return cases.index(values)
