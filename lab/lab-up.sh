#!/usr/bin/env bash
# Start the two-site lab (dc1, dc2, dual mirror through the WAN emulator); writes build/lab/endpoints.json.
# Env: LAB_ARTEMIS_VERSION (2.44.0), LAB_ROOT (build/lab), LAB_PORT_BASE (20000|auto), LAB_DIST_DIR. See docs/lab.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
PYTHONPATH="$root/lab${PYTHONPATH:+:$PYTHONPATH}" exec "$root/.venv/bin/python" -m artemis_lab.labctl up "$@"
