"""Which BrokerAPI implementation `artemis run` starts.

The real one is `artemis_lab.core.broker.Broker`. `ARTEMIS_LAB_ENGINE=module:Class` selects another (the
management-layer tests use `artemis_lab.testing.fake_broker:FakeBroker` while the core is not available).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

DEFAULT_ENGINE = "artemis_lab.core.broker:Broker"


def engine_spec() -> str:
    return os.environ.get("ARTEMIS_LAB_ENGINE") or DEFAULT_ENGINE


def load_engine(spec: str | None = None) -> Any:
    module_name, _, cls = (spec or engine_spec()).partition(":")
    return getattr(importlib.import_module(module_name), cls or "Broker")


def core_available() -> bool:
    try:
        importlib.import_module("artemis_lab.core.broker")
    except ImportError:
        return False
    return True
