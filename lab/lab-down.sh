#!/usr/bin/env bash
# Stop everything lab-up started (brokers via artemis-service, then by pid; WAN links by pid).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exec "$root/.venv/bin/python" -m continuity_lab.labctl down "$@"
