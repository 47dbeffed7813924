"""continuity_agent: continuous mirror lag, RPO/RTO estimates and SLA signals for Prometheus (docs/agent.md)."""

__version__ = "0.1.0"
