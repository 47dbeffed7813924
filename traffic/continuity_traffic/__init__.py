"""continuity_traffic: rehearsal traffic with ledgers (``python -m continuity_traffic --help``, docs/traffic.md)."""

__version__ = "0.1.0"
