#!/usr/bin/env bash
# The fault suites given as arguments (the Makefile's FAULT_SUITES: test_faults.py, test_faults_jolokia.py, every
# task boundary of every runbook, a third of the integration layer's time) once per Artemis version of
# fault_support.VERSIONS, the versions side by side (tests/run-side-by-side.sh: each run its own labs, port share,
# temporary directory and JUnit file build/test-results/faults-<version>.xml). A module's tests of one version share
# one lab.
set -uo pipefail
if [ $# -eq 0 ]; then echo "usage: $0 TEST_FILE..." >&2; exit 2; fi
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
read -r -a versions <<< "$("$root/.venv/bin/python" -c 'import sys; sys.path.insert(0, "tests/integration")
import fault_support; print(" ".join(fault_support.VERSIONS))')"
streams=()
for v in "${versions[@]}"; do
  streams+=("faults-$v -k $v $*")
done
exec bash tests/run-side-by-side.sh "${streams[@]}"
