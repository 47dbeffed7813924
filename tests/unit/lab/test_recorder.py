"""The recorder (lab/continuity_lab/record.py, `make record`) and the recordings committed in
tests/unit/fixtures/recorded/<version>/ agree: every scenario the recorder defines has its file, every file is one
of its scenarios (a stale or hand-made file is caught), and what a file says it is matches the scenario."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from continuity_lab import record

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "recorded"
VERSIONS = sorted(p.name for p in RECORDED.iterdir() if p.is_dir()) if RECORDED.is_dir() else []
LAB_PASSWORDS = ("lab-admin-secret", "lab-mirror-secret")


def test_the_default_version_is_recorded():
    assert record.labctl.DEFAULT_VERSION in VERSIONS, (
        f"no recordings of Artemis {record.labctl.DEFAULT_VERSION} in {RECORDED}: run `make record`")


def test_scenario_names_are_unique_and_phases_known():
    names = [s.name for s in record.SCENARIOS]
    assert len(names) == len(set(names))
    assert all(s.phase in record.PHASES and s.auth in ("admin", "wrong-password", "no-role")
               for s in record.SCENARIOS)


@pytest.mark.parametrize("version", VERSIONS)
def test_folder_matches_the_recorders_scenarios(version):
    folder = RECORDED / version
    files = sorted(p.name for p in folder.iterdir() if p.name != "README.md")
    expected = record.scenario_files()
    missing = sorted(set(expected) - set(files))
    stale = sorted(set(files) - set(expected))
    assert not missing and not stale, (
        f"{folder} is out of step with lab/continuity_lab/record.py: missing {missing}, not a scenario {stale}; "
        f"run `make record RECORD_VERSION={version}`")
    readme = (folder / "README.md").read_text()
    assert all(f"`{name}`" in readme for name in expected), "README.md does not list every recording"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("scenario", record.SCENARIOS, ids=lambda s: s.name)
def test_each_recording_is_its_scenario(version, scenario):
    path = RECORDED / version / f"{scenario.name}.json"
    text = path.read_text()
    doc = json.loads(text)
    assert doc["scenario"] == scenario.title and doc["group"] == scenario.group
    assert doc["artemis_version"] == version
    assert doc["http"]["body"] == scenario.body  # the request the recorder sends today
    assert doc["http"]["headers"].get("Authorization", None) is None
    assert ("Origin" in doc["http"]["headers"]) == (scenario.origin is not None)
    assert isinstance(doc["response"]["status_code"], int) and doc["response"]["body_kind"] in ("json", "text")
    for secret in LAB_PASSWORDS:
        assert secret not in text
    assert "/tmp/" not in text and str(record.REPO) not in text  # machine paths are neutralised


def _lab(base: int = 23000) -> record.LabAccess:
    site = {"credentials": {"user": "admin", "password": "lab-admin-secret"},
            "mirror_credentials": {"user": "mirror", "password": "lab-mirror-secret"}}
    return record.LabAccess({"lab_root": "/tmp/continuity-record-x", "sites": {"dc1": site, "dc2": site}}, base)


def test_neutralise_maps_ports_and_paths():
    doc = {"url": "http://127.0.0.1:23161/console/jolokia/", "uri": "tcp://127.0.0.1:23901",
           "path": "/tmp/continuity-record-x/dc1/data", "other": "127.0.0.1:5672"}
    assert record.neutralise(doc, _lab()) == {"url": "http://127.0.0.1:20161/console/jolokia/",
                                              "uri": "tcp://127.0.0.1:20901", "path": "<lab_root>/dc1/data",
                                              "other": "127.0.0.1:5672"}


@pytest.mark.parametrize("leak", ["lab-admin-secret", "YWRtaW46bGFiLWFkbWluLXNlY3JldA=="])
def test_neutralise_refuses_a_credential(leak):
    with pytest.raises(SystemExit, match="credential"):
        record.neutralise({"x": f"Basic {leak}"}, _lab())


def test_request_headers_and_credentials():
    lab = _lab()
    assert lab.credentials("no-role") == ("mirror", "lab-mirror-secret")
    assert lab.credentials("wrong-password")[1] != "lab-admin-secret"
    headers = dict(record.request_headers("http://127.0.0.1:23161/console/jolokia/", b"{}", None, ("a", "b")))
    assert headers["Host"] == "127.0.0.1:23161" and "Origin" not in headers and headers["Content-Length"] == "2"
