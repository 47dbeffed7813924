#!/usr/bin/env bash
# `make demo`: bring up the two-site lab with the collection's own roles, run the DR rehearsal (swapover, swap
# back, failover drill with failback), run the Spark pipeline, print the verdict and the path of the HTML report.
# Re-running works: the lab converges, the rehearsal starts from whichever site is active.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export ANSIBLE_CONFIG="$root/ansible.cfg" ANSIBLE_COLLECTIONS_PATH="$root/build/collections"
run_id="rehearsal-$(date -u +%Y%m%dT%H%M%SZ)"
evidence="${CONTINUITY_EVIDENCE_DIR:-$root/build/evidence}"
echo "== 1/2 lab: two real Apache Artemis ${LAB_ARTEMIS_VERSION:-2.44.0} sites deployed by playbooks/deploy.yml"
bash lab/lab-up.sh
echo "== 2/2 rehearsal $run_id: swapover, swap back, failover drill, failback, pipeline"
set +e
"$root/.venv/bin/ansible-playbook" -i inventories/lab/hosts.yml playbooks/rehearsal.yml \
  -e continuity_run_id="$run_id" -e continuity_evidence_dir="$evidence" \
  -e continuity_rehearsal_failover_drill=true -e continuity_rehearsal_confirm_failover_drill=lab "$@"
rc=$?
set -e
summary="$evidence/$run_id/report/summary.json"
echo
if [ -f "$summary" ]; then
  "$root/.venv/bin/python" - "$summary" <<'PY'
import json, sys

s = json.load(open(sys.argv[1]))


def num(v, unit="", nd=2):
    return "-" if v is None else (f"{v:.{nd}f}{unit}" if isinstance(v, float) else f"{v}{unit}")


print(f"verdict: {s.get('verdict')}")
for r in s.get("runs", []):
    print(f"  run {r['run_id']}: {num(r.get('sent_messages'))} messages, lost {num(r.get('lost'))}, "
          f"duplicated {num(r.get('duplicated'))}, in doubt {num(r.get('in_doubt'))}, "
          f"RPO {num(r.get('rpo_messages_observed'))} msgs / {num(r.get('rpo_seconds_observed'), ' s')}")
for w in s.get("switches", []):
    checks = w.get("checks") or {}
    print(f"  {w.get('kind', '?'):<9} {w.get('switch_id')}: RTO observed {num(w.get('rto_seconds_observed'), ' s')}, "
          f"estimated {num(w.get('rto_seconds_estimated'), ' s')}, target {num(w.get('target_rto_seconds'), ' s')} "
          f"({checks.get('rto_seconds', 'n/a')}); RPO {num(w.get('rpo_messages_observed'))} msgs")
PY
fi
echo "report:   $evidence/$run_id/report/report.html"
echo "evidence: $evidence/$run_id"
echo "(make lab-down stops the lab)"
exit $rc
