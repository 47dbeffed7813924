#!/usr/bin/env bash
# Run one pytest layer. A layer that collects no test fails: an empty layer would pass CI without proving anything.
set -euo pipefail
layer=$1; shift
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/build/test-results"
set +e
"$root/.venv/bin/python" -m pytest -q -p no:cacheprovider --durations=15 --junitxml="$root/build/test-results/$layer.xml" "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "test layer '$layer': no tests were collected from $*" >&2; exit 1; fi
exit "$rc"
