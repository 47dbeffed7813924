#!/usr/bin/env bash
# The integration layer (`make test-integration`). On 2 cores it is CPU-bound: one fault suite alone keeps 1.25 cores
# busy with its brokers, traffic and runbooks, two side by side ~90 % of both. So:
# 1. alone first (JUnit build/test-results/integration.xml): the rehearsal, whose swapover evidence the agent layer's
#    RTO test reads (recorded without contention), and the 2.37 safety test, which kills the controller the instant a
#    fence is in a file (under contention the kill can land after the next step; a safe state, but not the one it
#    asserts);
# 2. every other module in one queue over SLOTS (default 2) side by side runs (tests/run-side-by-side.sh: each
#    stream its own labs, port share, temporary directory and JUnit file build/test-results/<stream>.xml).
#   bash tests/integration/run-queue.sh                  # the whole layer, both steps
#   bash tests/integration/run-queue.sh TEST_FILE...     # only these, queued (no step 1)
#   QUEUE_LIST=1 bash tests/integration/run-queue.sh     # print the streams in queue order, run nothing
#   ALSO_QUEUE="agent tests/agent;molecule: bash tests/molecule.sh" bash tests/integration/run-queue.sh
#      # more streams at the queue's end, ';' between them ("NAME: COMMAND" runs a command, tests/run-side-by-side.sh):
#      # `make test` queues the agent layer and molecule here (1.00 and 1.31 cores alone, for ~190 and ~160 s)
# The fault suites (test_faults.py, test_faults_jolokia.py: every task boundary of every runbook, each point on one
# of the versions in turn: fault_support.runs_on) run as one stream per Artemis version of fault_support.VERSIONS, and
# test_modules_lab (both versions too) after them in it, all on one lab (conftest.fault_lab). Four modules of the
# default 2.44.0 lab share one too, in the 'site' stream (conftest.site_lab; the order matters: test_plugin_lab ends
# in a failover). A lab deploy costs ~75 CPU-s and the queue is CPU-bound. The streams queue longest first, by their
# wall times in the fresh-clone `make test` of 2026-11-28 (benchmarks/README.md "make test"), so the two slots end
# close together; a module not listed below joins at the end by itself.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
# step 1, never in the queue (above: why)
alone=(test_rehearsal test_safety_oldest_version)
faults=(test_faults test_faults_jolokia test_modules_lab)
# a stream each ("NAME: MODULE..." for one of several), longest first. The modules of the HA labs (three and four
# brokers) share one stream: beside test_ha_shared_store, test_ha_lab's phantom test, whose traffic runs over
# deliberately small replication buffers, got 2,465 of 3,000 messages through in 90 s (8 reconnects; 2026-11-28),
# never seen while the HA modules ran in one stream; test_ha_lab and test_ha_agent in this order on one lab
# (conftest.ha_lab)
longest_first=("ha: test_ha_lab test_ha_agent test_ha_shared_store"
  "site: test_runner_lane test_runbooks_swapover test_runbooks_failover test_plugin_lab"
  test_getting_started test_deploy_lab test_jolokia_tls)

has() { local x; for x in "${@:2}"; do [ "$x" = "$1" ] && return 0; done; return 1; }
wanted=()
if [ $# -gt 0 ]; then
  for f in "$@"; do
    [ -f "$f" ] || { echo "$f: no such test file" >&2; exit 2; }
    wanted+=("$(basename "$f" .py)")
  done
else
  for f in tests/integration/test_*.py; do
    m=$(basename "$f" .py)
    has "$m" "${alone[@]}" || wanted+=("$m")
  done
fi

streams=()
fault_files=()
for m in "${faults[@]}"; do has "$m" "${wanted[@]}" && fault_files+=("tests/integration/$m.py"); done
if [ "${#fault_files[@]}" -gt 0 ]; then
  read -r -a versions <<< "$("$root/.venv/bin/python" -c 'import sys; sys.path.insert(0, "tests/integration")
import fault_support; print(" ".join(fault_support.VERSIONS))')"
  for v in "${versions[@]}"; do streams+=("faults-$v -k $v ${fault_files[*]}"); done
fi
listed=()
for group in "${longest_first[@]}"; do
  name=${group%%:*}
  [ "$name" != "$group" ] || name=${group#test_}
  read -r -a members <<< "${group#*:}"
  files=()
  for m in "${members[@]}"; do
    listed+=("$m")
    has "$m" "${wanted[@]}" && files+=("tests/integration/$m.py")
  done
  [ "${#files[@]}" -gt 0 ] && streams+=("integration-$name ${files[*]}")
done
for m in "${wanted[@]}"; do
  has "$m" "${faults[@]}" "${listed[@]}" || streams+=("integration-${m#test_} tests/integration/$m.py")
done
IFS=';' read -r -a also <<< "${ALSO_QUEUE:-}"
for spec in "${also[@]}"; do
  read -r -a words <<< "$spec"
  [ "${#words[@]}" -gt 1 ] || { echo "ALSO_QUEUE: '$spec' is not 'NAME ARGS...'" >&2; exit 2; }
  streams+=("${words[*]}")
done
if [ "${#streams[@]}" -eq 0 ]; then echo "no integration module to run" >&2; exit 2; fi
# QUEUE_LIST=1: print the streams in queue order, run nothing
if [ -n "${QUEUE_LIST:-}" ]; then printf '%s\n' "${streams[@]}"; exit 0; fi
if [ $# -eq 0 ]; then
  alone_files=()
  for m in "${alone[@]}"; do alone_files+=("tests/integration/$m.py"); done
  bash tests/run-pytest.sh integration "${alone_files[@]}" || exit 1
fi
SLOTS=${SLOTS:-2} exec bash tests/run-side-by-side.sh "${streams[@]}"
