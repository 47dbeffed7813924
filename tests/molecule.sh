#!/usr/bin/env bash
# Run the molecule scenarios of the broker and mirror roles (extensions/molecule/*) on the local lab hosts:
# driver `default`, no containers. The brokers are real Apache Artemis (downloaded once into build/downloads).
#   bash tests/molecule.sh                 # every scenario
#   bash tests/molecule.sh broker_single   # one
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="$root/.venv/bin:$PATH"
export ANSIBLE_CONFIG="$root/ansible.cfg"
# The scenarios' place, said once. Before every run molecule 26 also loads the `default` scenario of that glob
# (extensions/molecule/default/molecule.yml, where a collection keeps what its scenarios share): this collection's
# is an empty stub (no platforms, no steps), kept so that lookup finds a file instead of logging "CRITICAL
# '.../default/molecule.yml' glob failed". It is not run below.
export MOLECULE_GLOB="extensions/molecule/*/molecule.yml"

# A free block of loopback ports per scenario (each scenario uses base+{161,616,617} and +100 for a 2nd site): the
# lab's own allocator (continuity_lab.labctl), below the kernel's ephemeral ports, and within the slot's share when
# this runs as a stream of the integration queue (LAB_PORT_SHARE, tests/run-side-by-side.sh) beside other labs.
free_base() {
  "$root/.venv/bin/python" - "$@" <<'PY'
import os, sys
from continuity_lab import labctl
taken = {int(x) for x in sys.argv[1:]}
lo, hi = labctl.auto_range(os.environ)
for _ in range(20):
    base = labctl.free_port_base(lo, hi)
    if base not in taken:
        print(base)
        break
else:
    sys.exit(f"no free port block in {lo}-{hi} besides {sorted(taken)}")
PY
}

scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  mapfile -t scenarios < <(find extensions/molecule -mindepth 2 -maxdepth 2 -name molecule.yml -printf '%h\n' \
    | xargs -n1 basename | grep -vx default | sort)
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/continuity-molecule.XXXXXX")
trap 'rm -rf "$work"' EXIT
# molecule's own state (inventory, state.yml; one directory per scenario, the default stub's included) goes under
# ANSIBLE_HOME/tmp, here the temporary directory, not ~/.ansible. Not MOLECULE_EPHEMERAL_DIRECTORY: that one
# directory would be shared by the scenario and the default stub (one state.yml for both, and molecule warns that
# the scenario config file "has been modified since the scenario was created").
export ANSIBLE_HOME="$work/ansible-home"
used=()
for s in "${scenarios[@]}"; do
  base=$(free_base "${used[@]}")
  used+=("$base")
  echo "=== molecule test -s $s (ports from $base, instances under $work/$s)"
  MOLECULE_LAB_ROOT="$work/$s" MOLECULE_LAB_PORT_BASE="$base" molecule test -s "$s"
done
echo "molecule: ${#scenarios[@]} scenario(s) passed"
