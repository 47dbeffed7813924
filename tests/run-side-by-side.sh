#!/usr/bin/env bash
# Run pytest streams side by side, each a test layer of its own (tests/run-pytest.sh: its own JUnit file
# build/test-results/<name>.xml) with its own share of the lab port blocks (LAB_PORT_SHARE "i/n",
# labctl.auto_range) and its own temporary directory, so the labs of one stream never meet another's.
# Each argument is one stream, "NAME ARGS..." (word-split: test paths and options without spaces); "NAME: COMMAND..."
# runs that command instead of a pytest layer (make test queues molecule so), with the same port share and a TMPDIR
# of its own.
# SLOTS (default: one per stream) caps how many run at once: the streams queue in the order given and each starts
# in the slot, and the port share, that an ended one freed (give the longest first: the queue does not reorder).
# Prints each stream's output as it ends, with its wall time; fails when any failed.
# Why not pytest-xdist: a module's tests must share one lab, and its loadgroup mode no longer keeps a group on one
# worker under pytest 9.2 (xdist 3.8 renames the test ids through an attribute pytest 9.2 no longer reads).
set -uo pipefail
if [ $# -eq 0 ]; then echo "usage: [SLOTS=N] $0 'NAME ARGS...'..." >&2; exit 2; fi
slots=${SLOTS:-$#}
if ! [[ $slots =~ ^[1-9][0-9]*$ ]]; then echo "SLOTS=$slots: a positive integer" >&2; exit 2; fi
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
free=()
for ((i = 0; i < slots; i++)); do free+=("$i"); done
declare -A slot_of name_of began
rc=0

finish_one() {
  local pid status
  wait -n -p pid "${!slot_of[@]}"
  status=$?
  echo "=== ${name_of[$pid]} (slot ${slot_of[$pid]}, $((SECONDS - began[$pid])) s, exit $status)"
  cat "$logs/${name_of[$pid]}.log"
  [ "$status" -eq 0 ] || rc=1
  free+=("${slot_of[$pid]}")
  unset "slot_of[$pid]" "name_of[$pid]" "began[$pid]"
}

for spec in "$@"; do
  [ "${#free[@]}" -gt 0 ] || finish_one
  read -r -a stream <<< "$spec"
  name=${stream[0]}
  slot=${free[0]}
  free=("${free[@]:1}")
  if [[ $name == *: ]]; then
    name=${name%:}
    mkdir -p "$logs/tmp-$name"
    LAB_PORT_SHARE="$slot/$slots" TMPDIR="$logs/tmp-$name" "${stream[@]:1}" > "$logs/$name.log" 2>&1 &
  else
    LAB_PORT_SHARE="$slot/$slots" bash tests/run-pytest.sh "$name" --basetemp="$logs/tmp-$name" "${stream[@]:1}" \
      > "$logs/$name.log" 2>&1 &
  fi
  slot_of[$!]=$slot
  name_of[$!]=$name
  began[$!]=$SECONDS
done
while [ "${#slot_of[@]}" -gt 0 ]; do finish_one; done
exit $rc
