"""security-settings checks (most specific match wins, as Artemis' HierarchicalRepository)."""

from __future__ import annotations

from artemis_lab.core.matching import best_match
from artemis_lab.model import BrokerConfig


def allowed(cfg: BrokerConfig, roles: frozenset[str], permission: str, address: str) -> bool:
    if not cfg.security_enabled:
        return True
    setting = best_match(cfg.security_settings, address)
    if setting is None:
        return False
    return bool(roles & setting.permissions.get(permission, frozenset()))
