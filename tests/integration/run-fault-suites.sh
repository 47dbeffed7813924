#!/usr/bin/env bash
# The fault suites given as arguments (the Makefile's FAULT_SUITES: test_faults.py, test_faults_jolokia.py, every
# task boundary of every runbook, a third of the integration layer's time) once per Artemis version of
# fault_support.VERSIONS, the versions side by side: each run has its own labs, its own share of the lab port blocks
# (LAB_PORT_SHARE, runbook_support.free_port_base), its own temporary directory and its own JUnit file
# (build/test-results/faults-<version>.xml). pytest-xdist cannot do
# this: its loadgroup mode no longer keeps a group on one worker under pytest 9.2 (xdist 3.8 renames the test ids
# through an attribute pytest 9.2 no longer reads), and a module's tests of one version must share one lab.
# Prints each run's output when both ended; fails when either failed.
set -uo pipefail
if [ $# -eq 0 ]; then echo "usage: $0 TEST_FILE..." >&2; exit 2; fi
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
py="$root/.venv/bin/python"
read -r -a versions <<< "$("$py" -c 'import sys; sys.path.insert(0, "tests/integration")
import fault_support; print(" ".join(fault_support.VERSIONS))')"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
for i in "${!versions[@]}"; do
  v=${versions[$i]}
  LAB_PORT_SHARE="$i/${#versions[@]}" bash tests/run-pytest.sh "faults-$v" -k "$v" --basetemp="$logs/tmp-$v" "$@" \
    > "$logs/$v.log" 2>&1 &
  pids+=($!)
done
rc=0
for i in "${!versions[@]}"; do
  wait "${pids[$i]}" || rc=1
  echo "=== fault suites on Artemis ${versions[$i]}"
  cat "$logs/${versions[$i]}.log"
done
exit $rc
