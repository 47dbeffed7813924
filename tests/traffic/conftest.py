"""Fixtures of the traffic layer: a private two-site lab of real Artemis brokers (continuity_lab.labctl: the
collection deploys them; free ports, its own root).

The lab is started once per session in a temporary directory so these tests never touch a lab someone else
brought up with `make lab-up` (build/lab): they cut and slow its WAN links. TRAFFIC_LAB_ENDPOINTS=<endpoints.json>
points them at a running lab instead.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Lab:
    root: Path
    endpoints: dict[str, Any]

    def site(self, name: str) -> dict[str, Any]:
        return self.endpoints["sites"][name]

    def url(self, name: str) -> str:
        return self.site(name)["amqp_url"]

    def mirror_url(self, name: str) -> str:
        """The site's mirror acceptor: how a probe reaches a passive site, whose client acceptor is fenced."""
        return f"amqp://127.0.0.1:{self.site(name)['acceptors']['mirror']}"

    @property
    def user(self) -> str:
        return self.site("dc1")["credentials"]["user"]

    @property
    def password(self) -> str:
        return self.site("dc1")["credentials"]["password"]

    def wan(self, action: str, link: str = "dc1-dc2", **args: Any) -> dict[str, Any]:
        from continuity_lab.wan import control

        return control(self.endpoints["wan"][link]["control_url"], action, **args)

    def jolokia(self, site: str, payload: dict[str, Any]) -> Any:
        s = self.site(site)
        token = base64.b64encode(f"{s['credentials']['user']}:{s['credentials']['password']}".encode()).decode()
        req = urllib.request.Request(s["jolokia_url"], data=json.dumps(payload).encode(), method="POST", headers={
            "Authorization": f"Basic {token}", "Origin": s["jolokia_origin"], "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = json.loads(resp.read())
        assert body.get("status") == 200, body
        return body.get("value")

    def queue_count(self, site: str, queue: str) -> int:
        broker = self.site(site)["broker_name"]
        mbean = (f'org.apache.activemq.artemis:broker="{broker}",component=addresses,address="{queue}",'
                 f'subcomponent=queues,routing-type="anycast",queue="{queue}"')
        return int(self.jolokia(site, {"type": "read", "mbean": mbean, "attribute": "MessageCount"}))

    def acceptor(self, site: str, name: str, op: str) -> None:
        broker = self.site(site)["broker_name"]
        mbean = f'org.apache.activemq.artemis:broker="{broker}",component=acceptors,name="{name}"'
        # Artemis 2.43+ re-reads a changed broker.xml within 5 s and recreates a changed acceptor (the lab's initial
        # fence changes it): for that moment its MBean is gone (404). Wait it out rather than fail the test.
        deadline = time.monotonic() + 15
        while True:
            try:
                self.jolokia(site, {"type": "exec", "mbean": mbean, "operation": op, "arguments": []})
                return
            except AssertionError as exc:
                if "InstanceNotFoundException" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def guard(self, site: str, role: str) -> None:
        """Set the continuity plugin's site role (the lab installs the plugin): a passive site refuses clients
        even through an open acceptor, so a switch by hand sets it as the runbooks do."""
        broker = self.site(site)["broker_name"]
        mbean = f'org.apache.activemq.artemis:broker="{broker}",component=continuity'
        self.jolokia(site, {"type": "exec", "mbean": mbean, "operation": "setSiteRole(java.lang.String)",
                            "arguments": [role]})


def _labctl(action: str, root: Path, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "LAB_ROOT": str(root), "LAB_PORT_BASE": "auto"}
    return subprocess.run([sys.executable, "-m", "continuity_lab.labctl", action], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    existing = os.environ.get("TRAFFIC_LAB_ENDPOINTS")
    if existing:
        # a lab someone started (e.g. `make lab-up`): used as is, never stopped here; the tests cut its WAN links
        yield Lab(Path(existing).parent, json.loads(Path(existing).read_text()))
        return
    root = tmp_path_factory.mktemp("traffic-lab")
    up = _labctl("up", root, 900)
    try:
        assert up.returncode == 0, f"labctl up failed:\n{up.stdout}\n{up.stderr}"
        yield Lab(root, json.loads((root / "endpoints.json").read_text()))
    finally:
        _labctl("down", root, 120)
