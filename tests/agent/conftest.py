"""Agent test helpers: two fake Artemis sites (the unit suite's FakeArtemis, reused, not copied) and an agent
wired to them with a controllable clock."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_unit_fakes() -> Any:
    # tests/unit/conftest.py holds FakeArtemis; load it under another name so it does not clash with this
    # conftest (pytest imports each conftest as its own module).
    name = "continuity_unit_fakes"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "unit" / "conftest.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


fakes = _load_unit_fakes()


class Clock:
    def __init__(self, now: float = 1_795_314_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def base_config(**over: Any) -> dict:
    cfg: dict = {
        "interval": 1,
        "listen": {"enabled": False},
        "sites": {
            "dc1": {"jolokia": {"url": "http://dc1:8161/console/jolokia", "username": "admin",
                                "password": "secret"}, "client_acceptors": ["amqp"]},
            "dc2": {"jolokia": {"url": "http://dc2:8161/console/jolokia", "username": "admin",
                                "password": "secret"}, "client_acceptors": ["amqp"]},
        },
        "sla": {"rpo_seconds": 5, "rpo_messages": 100, "rto_seconds": 60, "lag_seconds": 5},
    }
    cfg.update(over)
    return cfg


class TwoSites:
    """dc1 (active) and dc2 (passive) fakes, mirrored both ways, and helpers to change their state."""

    def __init__(self) -> None:
        self.dc1 = fakes.FakeArtemis("site-2.44-dc1.json", "http://dc1:8161/console/jolokia")
        self.dc2 = fakes.FakeArtemis("site-2.44-dc2.json", "http://dc2:8161/console/jolokia")
        self.dc2.allowed_origins = ["http://dc2:8161"]
        self.dc2.acceptors["amqp"]["Started"] = False  # passive: client acceptor fenced
        self.clock = Clock()

    def clients(self) -> dict:
        return {"dc1": fakes.make_client(self.dc1), "dc2": fakes.make_client(self.dc2)}

    @staticmethod
    def snf(broker: Any) -> dict:
        return next(q for q in broker.queues if q["Name"].startswith("$ACTIVEMQ_ARTEMIS_MIRROR_"))

    @staticmethod
    def queue(broker: Any, name: str) -> dict:
        return next(q for q in broker.queues if q["Name"] == name)


@pytest.fixture
def two_sites() -> TwoSites:
    return TwoSites()


@pytest.fixture
def make_agent(two_sites: TwoSites, tmp_path: Path):
    from continuity_agent.config import parse
    from continuity_agent.service import Agent

    made = []

    def _make(**over: Any) -> Any:
        over.setdefault("evidence", {"dir": str(tmp_path / "evidence"), "run_id": "agent-test"})
        over.setdefault("state_dir", str(tmp_path / "state"))
        agent = Agent(parse(base_config(**over)), clients=two_sites.clients(), clock=two_sites.clock)
        made.append(agent)
        return agent

    yield _make
    for agent in made:
        agent.close()
