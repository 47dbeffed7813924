#!/usr/bin/env bash
# `make bench`: every benchmark once, with the parameters of its issue's target, one after the other (they
# would distort each other in parallel on 2 cores). Results print to the terminal and into
# build/bench/<name>.log; copy the numbers into benchmarks/README.md (or the component's own file) with the
# date, the machine and the load. BENCH=name1,name2 runs a subset.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py="$root/.venv/bin/python"
out="$root/build/bench"; mkdir -p "$out"
export PYSPARK_PYTHON="$py" PYTHONPATH="$root/lab${PYTHONPATH:+:$PYTHONPATH}"
# Brokers as production runs them (both JIT compilers), not the lab's start-up setting (docs/lab.md).
export LAB_BROKER_JAVA_OPTIONS="${LAB_BROKER_JAVA_OPTIONS:-none}"
declare -A cmd=(
  [wan_mirror]="benchmarks/wan_mirror_cut.py --rate 1000 --latency-ms 20 --warmup 20 --cut 60"
  [jolokia]="benchmarks/jolokia_bench.py --queues 1000 --runs 5"
  [runbooks]="benchmarks/runbook_bench.py --queues 100 --swaps 4"
  [agent]="benchmarks/agent_bench.py --mode replay --queues 1000"
  [traffic]="benchmarks/traffic_max_rate.py --seconds 20"
  [pipeline]="benchmarks/pipeline_bench.py --events 10000000"
  [plugin_overhead]="benchmarks/plugin_overhead.py --reps 4 --max-load 1.0 --profile"
  [pipeline_100m]="benchmarks/pipeline_bench.py --events 100000000 --engines spark,spark-core,duckdb,duckdb-fixed"
)
order=(wan_mirror jolokia runbooks agent traffic plugin_overhead pipeline pipeline_100m)
IFS=, read -r -a wanted <<< "${BENCH:-$(IFS=,; echo "${order[*]}")}"
status=0
for name in "${wanted[@]}"; do
  [ -n "${cmd[$name]:-}" ] || { echo "unknown benchmark $name (known: ${order[*]})"; exit 2; }
  echo "== $name: ${cmd[$name]}  (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  (cd "$root" && $py ${cmd[$name]}) 2>&1 | tee "$out/$name.log" || status=1
done
exit $status
