"""Pipeline benchmark: reconcile N ledger events with Spark local[2], DuckDB (two variants) and pandas, same files.

    .venv/bin/python benchmarks/pipeline_bench.py --events 10000000 [--work build/bench-pipeline] [--skip-pandas]

Generates N ledger events (N/2 messages, each sent once and received about once, Parquet, with injected faults)
unless the files exist, then runs each engine in its own subprocess (so peak memory is per engine) and prints a
Markdown row per engine: wall seconds, events/s, peak RSS, and whether the counts agree with the generator's
truth. The reconciliation is the same in all three: per message (run, msg_id) classification, lost / in doubt /
duplicated by kind, out-of-order per (run, address, consumer, producer), counts per run and address.
``duckdb-fixed`` groups and orders on the same fixed-width 64-bit codes of address/producer/consumer/site that
the Spark code uses (the fair reference for the 3x target); ``duckdb`` keeps the strings (a second reference).
The ratios of spark-core (reconciliation only) and spark (whole run) to both are printed at the end.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# {address} etc.: the string columns as they are (``duckdb``) or as 64-bit hashes (``duckdb-fixed``, the same
# fixed-width codes the Spark reconciliation shuffles instead of strings: xxhash64 there, DuckDB's hash() here).
DUCKDB_SQL = """
WITH ev AS (
  SELECT run_id, msg_id, TRUE AS is_sent, {address} AS address, {producer} AS producer, seq, {site} AS site,
         send_ts AS ev_ts, outcome, NULL::{code_type} AS consumer, NULL::BIGINT AS delivery_count,
         NULL::BOOLEAN AS redelivered
  FROM read_parquet('{{d}}/**/sent-*.parquet')
  UNION ALL
  SELECT run_id, msg_id, FALSE, {address}, {producer}, seq, {site}, recv_ts, NULL, {consumer}, delivery_count,
         redelivered
  FROM read_parquet('{{d}}/**/received-*.parquet')
), msg AS (
  SELECT run_id, msg_id,
    sum(CASE WHEN is_sent THEN 1 ELSE 0 END) AS n_sent,
    sum(CASE WHEN is_sent AND outcome = 'accepted' THEN 1 ELSE 0 END) AS n_accepted,
    sum(CASE WHEN is_sent AND outcome IN ('in_doubt', 'error') THEN 1 ELSE 0 END) AS n_uncertain,
    coalesce(max(CASE WHEN is_sent THEN address END), max(address)) AS address,
    coalesce(max(CASE WHEN is_sent THEN producer END), max(producer)) AS producer,
    coalesce(max(CASE WHEN is_sent THEN seq END), max(seq)) AS seq,
    sum(CASE WHEN NOT is_sent THEN 1 ELSE 0 END) AS n_recv,
    sum(CASE WHEN NOT is_sent AND delivery_count = 0 THEN 1 ELSE 0 END) AS n_fresh,
    min(CASE WHEN NOT is_sent THEN ev_ts END) AS first_recv_ts,
    arg_min(CASE WHEN NOT is_sent THEN consumer END, CASE WHEN NOT is_sent THEN ev_ts END) AS first_consumer
  FROM ev GROUP BY run_id, msg_id
), cls AS (
  SELECT *,
    CASE WHEN n_sent = 0 THEN 'unexpected'
         WHEN n_accepted > 0 THEN (CASE WHEN n_recv = 0 THEN 'lost' ELSE 'delivered' END)
         WHEN n_uncertain > 0 THEN 'in_doubt' ELSE 'not_accepted' END AS status,
    coalesce(first_recv_ts IS NOT NULL AND seq < max(CASE WHEN first_recv_ts IS NOT NULL THEN seq END) OVER (
      PARTITION BY run_id, address, first_consumer, producer ORDER BY first_recv_ts, seq
      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), FALSE) AS ooo
  FROM msg
)
SELECT run_id, address, count(*) AS messages,
  sum(CASE WHEN status = 'lost' THEN 1 ELSE 0 END) AS lost,
  sum(CASE WHEN status = 'in_doubt' THEN 1 ELSE 0 END) AS in_doubt,
  sum(CASE WHEN status = 'delivered' AND n_recv > 1 AND n_fresh <= 1 THEN 1 ELSE 0 END) AS duplicated_redelivery,
  sum(CASE WHEN status = 'delivered' AND n_recv > 1 AND n_fresh > 1 THEN 1 ELSE 0 END) AS duplicated_distinct,
  sum(CASE WHEN ooo THEN 1 ELSE 0 END) AS out_of_order
FROM cls GROUP BY run_id, address ORDER BY run_id, address
"""
DUCKDB_STRING_SQL = DUCKDB_SQL.format(address="address", producer="producer", site="site", consumer="consumer",
                                      code_type="VARCHAR")
DUCKDB_FIXED_SQL = DUCKDB_SQL.format(address="hash(address)", producer="hash(producer)", site="hash(site)",
                                     consumer="hash(consumer)", code_type="UBIGINT")


def peak_rss_mb() -> float:
    """Peak RSS of this process and of its already-reaped children (Linux ru_maxrss is KiB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024.0


def jvm_peak_mb() -> float:
    """VmHWM of every descendant JVM (pyspark's gateway is a child process that is not reaped before exit)."""
    me, best = os.getpid(), 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            if ppid != me:
                continue
            with open(f"/proc/{pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        best = max(best, int(line.split()[1]) / 1024.0)
        except (OSError, ValueError, IndexError):
            continue
    return best


def engine_spark(d: str, out: str) -> dict:
    from continuity_pipeline import jobs
    from continuity_pipeline import spark as sparkmod

    spark = sparkmod.session("local[2]", shuffle_partitions=16, driver_memory="3g")
    t = time.monotonic()
    result = jobs.run_pipeline(spark, [d], out, {}, jobs.Progress(quiet=False), html=True)
    wall = time.monotonic() - t
    peak = max(jvm_peak_mb(), peak_rss_mb())
    spark.stop()
    runs = {r["run_id"]: {k: r[k] for k in ("lost", "in_doubt", "duplicated_redelivery", "duplicated_distinct",
                                            "out_of_order")} for r in result["runs"]}
    return {"wall": wall, "peak_mb": peak, "counts": runs, "note": "full pipeline: validate, reconcile, all outputs"}


def engine_spark_core(d: str, out: str) -> dict:
    """The same scope as the DuckDB query: the pipeline's own reconciliation code (narrow coded events, one
    shuffle, per-message aggregation, out-of-order window) on the ledger files, counts per run; no validation,
    no other outputs."""
    import glob

    from pyspark.sql import functions as F

    from continuity_pipeline import reconcile
    from continuity_pipeline import schemas as sc
    from continuity_pipeline import spark as sparkmod

    spark = sparkmod.session("local[2]", shuffle_partitions=16, driver_memory="3g")
    t = time.monotonic()
    files = sorted(glob.glob(f"{d}/**/sent-*.parquet", recursive=True)
                   + glob.glob(f"{d}/**/received-*.parquet", recursive=True))
    events = spark.read.schema(sc.RECORD).parquet(*files)
    runinfo = sparkmod.local_frame(spark, [], reconcile.RUNINFO_DDL).select(
        "run_id", "cutoff_ts", F.xxhash64("lost_site").alias("lost_site_c"))
    msg = reconcile.message_level(reconcile.ledger_events(events).repartition("run_id", "msg_id"), runinfo)
    dup = F.col("duplicate")
    rows = msg.groupBy("run_id").agg(
        F.sum((F.col("status") == "lost").cast("long")).alias("lost"),
        F.sum((F.col("status") == "in_doubt").cast("long")).alias("in_doubt"),
        F.sum((dup == "redelivery").cast("long")).alias("duplicated_redelivery"),
        F.sum((dup == "distinct").cast("long")).alias("duplicated_distinct"),
        F.sum(F.col("out_of_order").cast("long")).alias("out_of_order")).collect()
    wall = time.monotonic() - t
    peak = max(jvm_peak_mb(), peak_rss_mb())
    spark.stop()
    counts = {r["run_id"]: {k: int(r[k] or 0) for k in ("lost", "in_doubt", "duplicated_redelivery",
                                                         "duplicated_distinct", "out_of_order")} for r in rows}
    return {"wall": wall, "peak_mb": peak, "counts": counts, "note": "reconciliation only (same scope as duckdb)"}


def _duckdb(d: str, sql: str, note: str) -> dict:
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads TO 2")
    # DuckDB spills to ./.tmp by default: keep it out of the checkout (a galaxy build reading the tree broke on it)
    con.execute(f"SET temp_directory = '{os.path.join(d, 'duckdb-spill')}'")
    t = time.monotonic()
    rows = con.execute(sql.format(d=d)).fetchall()
    wall = time.monotonic() - t
    return {"wall": wall, "peak_mb": peak_rss_mb(), "counts": _sum_rows(rows), "note": note}


def engine_duckdb(d: str, out: str) -> dict:
    return _duckdb(d, DUCKDB_STRING_SQL, "reconciliation query only, string address/producer/consumer/site")


def engine_duckdb_fixed(d: str, out: str) -> dict:
    return _duckdb(d, DUCKDB_FIXED_SQL, "reconciliation query only, the strings as 64-bit hashes (as spark-core)")


def _sum_rows(rows) -> dict:
    runs: dict = {}
    for run_id, _addr, _messages, lost, in_doubt, red, dist, ooo in rows:
        r = runs.setdefault(run_id, {"lost": 0, "in_doubt": 0, "duplicated_redelivery": 0,
                                     "duplicated_distinct": 0, "out_of_order": 0})
        for k, v in (("lost", lost), ("in_doubt", in_doubt), ("duplicated_redelivery", red),
                     ("duplicated_distinct", dist), ("out_of_order", ooo)):
            r[k] += int(v)
    return runs


def engine_pandas(d: str, out: str) -> dict:
    import glob

    import numpy as np
    import pandas as pd

    t = time.monotonic()
    cols_s = ["run_id", "msg_id", "address", "producer", "seq", "outcome"]
    cols_r = ["run_id", "msg_id", "consumer", "recv_ts", "delivery_count"]
    sent = pd.concat([pd.read_parquet(f, columns=cols_s) for f in sorted(glob.glob(f"{d}/**/sent-*.parquet",
                                                                                   recursive=True))])
    recv = pd.concat([pd.read_parquet(f, columns=cols_r) for f in sorted(glob.glob(f"{d}/**/received-*.parquet",
                                                                                   recursive=True))])
    sent["acc"] = (sent["outcome"] == "accepted").astype(np.int64)
    sent["unc"] = sent["outcome"].isin(["in_doubt", "error"]).astype(np.int64)
    s = sent.groupby(["run_id", "msg_id"], sort=False).agg(
        n_acc=("acc", "sum"), n_unc=("unc", "sum"), address=("address", "first"), producer=("producer", "first"),
        seq=("seq", "first"))
    recv["fresh"] = (recv["delivery_count"] == 0).astype(np.int64)
    recv = recv.sort_values(["recv_ts", "consumer"], kind="stable")
    r = recv.groupby(["run_id", "msg_id"], sort=False).agg(
        n_recv=("fresh", "size"), n_fresh=("fresh", "sum"), first_recv_ts=("recv_ts", "first"),
        first_consumer=("consumer", "first"))
    m = s.join(r, how="outer")
    m["n_recv"] = m["n_recv"].fillna(0)
    status = np.where(m["n_acc"] > 0, np.where(m["n_recv"] == 0, "lost", "delivered"),
                      np.where(m["n_unc"] > 0, "in_doubt", "other"))
    m["status"] = status
    rec = m[m["first_recv_ts"].notna()].reset_index().sort_values(["first_recv_ts", "seq"], kind="stable")
    prev = rec.groupby(["run_id", "address", "first_consumer", "producer"], sort=False)["seq"].transform(
        lambda x: x.cummax().shift(1))
    rec["ooo"] = rec["seq"] < prev
    ooo = rec.groupby("run_id")["ooo"].sum()
    m = m.reset_index()
    dup = (m["status"] == "delivered") & (m["n_recv"] > 1)
    runs = {}
    for run_id, g in m.groupby("run_id"):
        gd = dup[g.index]
        runs[run_id] = {"lost": int((g["status"] == "lost").sum()), "in_doubt": int((g["status"] == "in_doubt").sum()),
                        "duplicated_redelivery": int((gd & (g["n_fresh"] <= 1)).sum()),
                        "duplicated_distinct": int((gd & (g["n_fresh"] > 1)).sum()),
                        "out_of_order": int(ooo.get(run_id, 0))}
    wall = time.monotonic() - t
    return {"wall": wall, "peak_mb": peak_rss_mb(), "counts": runs, "note": "reconciliation only, all in memory"}


ENGINES = {"spark": engine_spark, "spark-core": engine_spark_core, "duckdb-fixed": engine_duckdb_fixed,
           "duckdb": engine_duckdb, "pandas": engine_pandas}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench-pipeline"))
    ap.add_argument("--engines", default="spark,spark-core,duckdb-fixed,duckdb,pandas")
    ap.add_argument("--engine", help=argparse.SUPPRESS)  # internal: run one engine in this process
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.engine:
        res = ENGINES[args.engine](args.data, os.path.join(args.work, f"out-{args.engine}"))
        print("RESULT " + json.dumps(res))
        return 0
    d = os.path.join(args.work, f"ev-{args.events}")
    truth_path = os.path.join(d, "bench", "_truth.json")
    if not os.path.exists(truth_path):
        messages = args.events // 2
        t = time.monotonic()
        subprocess.run([sys.executable, "-m", "continuity_pipeline", "generate", "--out", d, "--run-id", "bench",
                        "--messages", str(messages), "--producers", "16", "--consumers", "8", "--addresses", "4",
                        "--lost", "1000", "--duplicated", "500", "--redelivered", "500", "--reorder", "300",
                        "--in-doubt", "64", "--failover-at", str(messages / 2 / 100_000), "--rate", "100000",
                        "--format", "parquet", "--chunk", "2000000", "--seed", "42", "--quiet"], check=True)
        print(f"generated {args.events:,} events in {time.monotonic() - t:.1f}s", flush=True)
    with open(truth_path) as fh:
        truth = json.load(fh)
    expected = {k: truth[k] for k in ("lost", "in_doubt", "duplicated_redelivery", "duplicated_distinct",
                                      "out_of_order")}
    events = truth["sent_records"] + truth["received_records"]
    print(f"date {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M}Z, machine {platform.node()} "
          f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}, {events:,} ledger events")
    print("| engine | events | wall s | events/s | peak RSS MiB | counts = truth | scope |")
    print("|---|---|---|---|---|---|---|")
    walls: dict[str, float] = {}
    for name in args.engines.split(","):
        proc = subprocess.run([sys.executable, __file__, "--engine", name, "--data", d, "--work", args.work],
                              capture_output=True, text=True)
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(f"| {name} | {events:,} | failed | - | - | - | {proc.stderr.strip().splitlines()[-1:]} |")
            continue
        res = json.loads(line[7:])
        walls[name] = res["wall"]
        ok = res["counts"].get("bench") == expected
        print(f"| {name} | {events:,} | {res['wall']:.1f} | {events / res['wall']:,.0f} | {res['peak_mb']:,.0f} "
              f"| {'yes' if ok else 'NO ' + json.dumps(res['counts'])} | {res['note']} |", flush=True)
    for ref in ("duckdb-fixed", "duckdb"):
        for name in ("spark-core", "spark"):
            if ref in walls and name in walls:
                print(f"{name} / {ref}: {walls[name] / walls[ref]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
