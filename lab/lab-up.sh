#!/usr/bin/env bash
# Start the two-site lab with the collection's own deploy playbook: WAN links first, then
# playbooks/deploy.yml (roles broker + mirror, mirrors through the WAN links), then the initial roles
# (dc1 active, dc2 passive), then build/lab/endpoints.json. A second run converges (changed=0).
# Env: LAB_ARTEMIS_VERSION (2.44.0), LAB_ROOT (build/lab), LAB_PORT_BASE (20000), LAB_DIST_DIR. See docs/lab.md.
# `lab-up.sh --script` starts the same lab without Ansible (artemis create + a generated broker.xml).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py="$root/.venv/bin/python"
export PYTHONPATH="$root/lab${PYTHONPATH:+:$PYTHONPATH}"
# Free ports (LAB_PORT_BASE=auto, used by tests) cannot be expressed in the inventory: script mode.
if [ "${1:-}" = "--script" ] || [ "${LAB_PORT_BASE:-}" = "auto" ]; then
  [ "${1:-}" = "--script" ] && shift
  exec "$py" -m artemis_lab.labctl up "$@"
fi
export LAB_USE_WAN=true ANSIBLE_CONFIG="$root/ansible.cfg" ANSIBLE_COLLECTIONS_PATH="$root/build/collections"
"$py" -m artemis_lab.labctl wan-up
"$root/.venv/bin/ansible-playbook" -i "$root/inventories/lab/hosts.yml" "$root/playbooks/deploy.yml"
"$root/.venv/bin/ansible-playbook" -i "$root/inventories/lab/hosts.yml" "$root/playbooks/initial_roles.yml"
exec "$py" -m artemis_lab.labctl register "$@"
