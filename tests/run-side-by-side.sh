#!/usr/bin/env bash
# Run pytest streams side by side, each a test layer of its own (tests/run-pytest.sh: its own JUnit file
# build/test-results/<name>.xml) with its own share of the lab port blocks (LAB_PORT_SHARE "i/n",
# labctl.auto_range) and its own temporary directory, so the labs of one stream never meet another's.
# Each argument is one stream, "NAME ARGS..." (word-split: test paths and options without spaces). Prints each
# stream's output when all ended, in the order given; fails when any failed.
# Why not pytest-xdist: a module's tests must share one lab, and its loadgroup mode no longer keeps a group on one
# worker under pytest 9.2 (xdist 3.8 renames the test ids through an attribute pytest 9.2 no longer reads).
set -uo pipefail
if [ $# -eq 0 ]; then echo "usage: $0 'NAME ARGS...'..." >&2; exit 2; fi
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
names=() pids=()
for spec in "$@"; do
  read -r -a stream <<< "$spec"
  name=${stream[0]}
  LAB_PORT_SHARE="${#names[@]}/$#" bash tests/run-pytest.sh "$name" --basetemp="$logs/tmp-$name" "${stream[@]:1}" \
    > "$logs/$name.log" 2>&1 &
  names+=("$name")
  pids+=($!)
done
rc=0
for i in "${!names[@]}"; do
  wait "${pids[$i]}" || rc=1
  echo "=== ${names[$i]}"
  cat "$logs/${names[$i]}.log"
done
exit $rc
