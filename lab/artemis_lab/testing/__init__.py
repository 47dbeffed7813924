"""Test doubles for the management layer (never used by `artemis run` unless ARTEMIS_LAB_ENGINE selects them)."""
