#!/usr/bin/env bash
# Start the two-site lab with the collection itself: WAN links, then playbooks/deploy.yml (roles broker + mirror:
# real Apache Artemis from Maven Central, mirrors through the WAN links), then playbooks/initial_roles.yml (dc1
# active, dc2 passive), then build/lab/endpoints.json. A second run converges (no restart, roles kept).
# Env: LAB_ARTEMIS_VERSION (2.44.0), LAB_ROOT (build/lab), LAB_PORT_BASE (20000, or auto). See docs/lab.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exec "$root/.venv/bin/python" -m continuity_lab.labctl up "$@"
