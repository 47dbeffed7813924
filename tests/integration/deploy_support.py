"""A private deploy lab for the deploy tests (test_deploy_lab.py, test_jolokia_tls.py): a copy of inventories/lab
on its own instance root and free block of loopback ports, playbooks run against it, raw Jolokia reads of its
brokers, and a stop of only the brokers it started."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VERSION = os.environ.get("LAB_ARTEMIS_VERSION", "2.44.0")
ADMIN = ("admin", "lab-admin-secret")  # inventories/lab/group_vars/artemis.yml
PORT_OFFSETS = {"dc1": 0, "dc2": 100}  # inventories/lab/group_vars/dc*.yml


class DeployLab:
    scheme = "http"

    def __init__(self, root: Path, base: int):
        self.root = root
        self.base = base
        self.inventory = root / "inventory"
        shutil.copytree(ROOT / "inventories" / "lab", self.inventory)
        # the inventory is copied, so the plugin jar (found relative to the inventory) is named explicitly
        self.env = dict(os.environ, LAB_ROOT=str(root / "lab"), LAB_PORT_BASE=str(base), LAB_ARTEMIS_VERSION=VERSION,
                        LAB_PLUGIN_JAR=str(ROOT / "plugin" / "target" / "continuity-artemis-plugin-0.1.0.jar"),
                        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0")

    def playbook(self, path, *extra) -> subprocess.CompletedProcess:
        cmd = [str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", str(self.inventory / "hosts.yml"), str(path),
               *extra]
        return subprocess.run(cmd, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=900)

    def deploy(self, *extra) -> subprocess.CompletedProcess:
        return self.playbook(ROOT / "playbooks" / "deploy.yml", *extra)

    @staticmethod
    def recap(out: str) -> dict:
        return {m.group(1): {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
                for m in re.finditer(r"^(\S+)\s+:\s+(ok=.*)$", out, re.M)}

    def instance(self, site: str) -> Path:
        return self.root / "lab" / site

    def pid(self, site: str) -> str:
        return (self.instance(site) / "data" / "artemis.pid").read_text().strip()

    def jolokia(self, site: str, body: dict, scheme: str | None = None, context=None) -> dict:
        scheme = scheme or self.scheme
        port = self.base + 161 + PORT_OFFSETS[site]
        req = urllib.request.Request(
            f"{scheme}://127.0.0.1:{port}/console/jolokia/", data=json.dumps(body).encode(), method="POST",
            headers={"Origin": f"{scheme}://127.0.0.1:{port}", "Content-Type": "application/json",
                     "Authorization": "Basic " + base64.b64encode(":".join(ADMIN).encode()).decode()})
        with urllib.request.urlopen(req, timeout=10, context=context) as resp:
            return json.loads(resp.read())

    def stop(self) -> None:
        for site in PORT_OFFSETS:
            service = self.instance(site) / "bin" / "artemis-service"
            if service.exists():
                subprocess.run([str(service), "stop"], capture_output=True, timeout=60)
