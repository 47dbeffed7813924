"""The ``run`` command: stages, Spark actions, outputs, terminal progress and the verdict table."""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from continuity_pipeline import analysis, outputs, reader, reconcile, report
from continuity_pipeline import schemas as sc
from continuity_pipeline import spark as sparkmod

LAG_POINTS = 300  # points per (run, site) in the report's lag chart


class Progress:
    def __init__(self, quiet: bool = False):
        self.quiet, self.t0, self.last = quiet, time.monotonic(), time.monotonic()

    def __call__(self, msg: str) -> None:
        now = time.monotonic()
        if not self.quiet:
            print(f"[{now - self.t0:7.1f}s] {msg}", flush=True)
        self.last = now


def _rows(df: DataFrame) -> list[dict]:
    return [r.asDict(recursive=True) for r in df.collect()]


def run_pipeline(spark: SparkSession, evidence: list[str], out: str, cli_targets: dict, progress: Progress,
                 html: bool = True) -> dict:
    os.makedirs(out, exist_ok=True)
    progress("stage 1/6 find evidence; runs, phases, incidents, ledger ends")
    prep = reader.prepare(spark, evidence)
    small = prep.parsed is not None and reader.weighted_size(prep.files.sizes) <= CACHE_INPUT_BYTES
    restore = _small_input_conf(spark) if small else {}
    cached = small and _cache_small_input(prep)
    try:
        return _run_stages(spark, out, cli_targets, progress, html, prep, cached)
    finally:
        for key, value in restore.items():
            spark.conf.set(key, value)


def _small_input_conf(spark: SparkSession) -> dict:
    """Small input: adaptive execution would make every shuffle a job of its own and re-plan after it, for data
    that small; one shuffle partition per core is enough. Returns what to restore."""
    wanted = {"spark.sql.adaptive.enabled": "false",
              "spark.sql.shuffle.partitions": str(spark.sparkContext.defaultParallelism),
              # the cached evidence is small: compressing its columns costs more than it saves
              "spark.sql.inMemoryColumnarStorage.compressed": "false"}
    before = {k: spark.conf.get(k) for k in wanted}
    for key, value in wanted.items():
        spark.conf.set(key, value)
    return before


def _run_stages(spark, out, cli_targets, progress, html, prep, cached) -> dict:
    records = prep.records
    # the small kinds' fields from the evidence schema; free-form JSON the analysis does not read stays behind
    small_cols = sc.kind_columns(sc.SMALL_KINDS, leave_out=("sites", "gate_samples", "data", "last_known"))
    small = _rows(records.filter(F.col("kind").isin(*sc.SMALL_KINDS)).select(*small_cols))
    runs = [r for r in small if r["kind"] == "run"]
    phases = [r for r in small if r["kind"] == "phase"]
    incidents = [r for r in small if r["kind"] == "incident"]
    ledger_ends = [r for r in small if r["kind"] == "ledger_end"]
    switches = analysis.switches(phases, incidents)
    # Runs known from their small records; runs that only have ledgers are added from the reconciliation's
    # counts below (they have no cutoff or lost site, which is what a left join with runinfo gives them anyway).
    run_ids = sorted({r["run_id"] for r in small} | {s["run_id"] for s in switches})
    lost_site = {s["run_id"]: s["old_site"] for s in reversed(switches) if s["kind"] == "failover"}
    runinfo = [(rid, analysis.late_cutoff(rid, runs, phases), lost_site.get(rid)) for rid in run_ids]
    switch_rows = [(s["run_id"], s["switch_id"], s["start_ts"], s["old_site"], s["new_site"]) for s in switches]
    progress(f"{len(run_ids)} run(s), {len(phases)} phase record(s), {len(switches)} switch(es)")

    progress("stage 2/6 read and validate every record (one pass, also counting per writer and switch)")
    ev = reader.statistics(spark, prep, progress, reconcile.writer_piggyback(switch_rows))
    records = ev.records
    known_bad = sum(f["bad"] for f in ev.file_stats) + len(ev.files.problems)
    # Independent Spark jobs run side by side (Spark schedules concurrent jobs from several driver threads): on a
    # small input each is mostly driver-side planning, code generation and scheduling, which then overlap.
    pool = ThreadPoolExecutor(max_workers=PARALLEL_JOBS)
    try:
        return _run_rest(spark, out, cli_targets, progress, html, pool, prep, cached, ev, known_bad, run_ids, runs,
                         phases, switches, runinfo, switch_rows, ledger_ends)
    finally:
        pool.shutdown(wait=True)


def _run_rest(spark, out, cli_targets, progress, html, pool, prep, cached, ev, known_bad, run_ids, runs, phases,
              switches, runinfo, switch_rows, ledger_ends) -> dict:
    records = ev.records
    if known_bad:
        bad_summary = outputs.write_bad(ev.bad, out, known_bad)
        progress(f"bad input: {bad_summary['errors']} error(s), {bad_summary['warnings']} warning(s)")
    else:  # nothing to look up: the empty table and bad_records.json are written while the next stage runs
        bad_write = pool.submit(outputs.write_bad, ev.bad, out, 0)
        progress("bad input: 0 error(s), 0 warning(s)")

    progress("stage 3/6 reconcile ledgers (one shuffle of the ledger events, the out-of-order window)")
    _size_shuffle(spark, sum(f["records"] for f in ev.file_stats))
    led = reconcile.reconcile(spark, records, runinfo, switch_rows, ev.extra_rows, pool)
    if not known_bad:
        bad_summary = bad_write.result()
    run_ids = sorted(set(run_ids) | {c["run_id"] for c in led.counts})
    progress(f"reconciled {sum(c['sent_records'] for c in led.counts):,} sent and "
             f"{sum(c['received_records'] for c in led.counts):,} received records")

    progress("stage 4/6 lag samples, canaries, estimates; message exceptions table")
    lag = records.filter(F.col("kind") == "lag_sample").select(*sc.LAG_TABLE_COLUMNS)
    # the report lists real exceptions; a late-only message was delivered (it is counted, not listed)
    real = (F.col("status") != "delivered") | F.col("duplicate").isNotNull() | F.col("out_of_order")
    f_last = pool.submit(_last_samples, spark, lag, switch_rows)
    f_series = pool.submit(_lag_series, lag)
    f_canary = pool.submit(_canaries, records)
    f_top = pool.submit(lambda: _rows(led.exceptions.filter(real)
                                      .orderBy("run_id", "status", "address", "msg_id").limit(200)))
    writes = [pool.submit(outputs.write_table, lag, os.path.join(out, "tables", "lag_samples"), ["run_id"],
                          ["run_id", "site", "ts"]),
              pool.submit(outputs.write_table, led.exceptions, os.path.join(out, "tables", "message_exceptions"),
                          ["run_id"], ["run_id", "address", "msg_id"])]
    last_samples, lag_series, canary, top_exceptions = (f_last.result(), f_series.result(), f_canary.result(),
                                                        f_top.result())

    progress("stage 5/6 RPO/RTO observed and estimated, verdicts")
    result = _assemble(run_ids, runs, phases, switches, led, last_samples, canary, cli_targets, ledger_ends)
    result["bad_input"] = bad_summary
    result["inputs"] = {"files": len(ev.file_stats), "records": sum(f["records"] for f in ev.file_stats),
                        "file_stats": ev.file_stats}

    progress("stage 6/6 write tables, summary.json, metrics.prom, report.html")
    writes += [pool.submit(w) for w in outputs.small_table_writes(spark, out, result)]
    for w in writes:
        w.result()
    spark_rows = 1 + len(writes)  # with bad_records (stage 2)
    led.persisted.unpersist()
    if cached:
        prep.parsed.unpersist()
    outputs.write_summary(out, result)
    outputs.write_metrics(out, result)
    if html:
        report.write_html(os.path.join(out, "report.html"), result, lag_series, top_exceptions)
    progress(f"wrote {spark_rows} table(s) and summary under {out}")
    return result


# Evidence up to this many bytes as JSON lines (``reader.weighted_size``; ~400 MiB per million ledger records) is
# parsed once and kept in memory (spilling to disk) for the later passes; bigger input is re-read by each pass.
CACHE_INPUT_BYTES = 512 * 1024 * 1024


def _cache_small_input(prep: reader.Prepared) -> bool:
    """Keep the parsed evidence after its first scan when it is small: every later pass (validation statistics,
    ledger events, lag samples, canaries) then reads memory instead of parsing the JSON again, and plans over the
    cached relation instead of the ~90-field parse and validation expressions. The queries are the same."""
    prep.parsed.persist(StorageLevel.MEMORY_AND_DISK)
    return True


PARALLEL_JOBS = 4  # Spark jobs submitted side by side where they do not depend on each other


def _last_samples(spark: SparkSession, lag: DataFrame, switch_rows: list[tuple]) -> dict:
    """The last reachable lag sample of each switch's old site before its start, with ``prev_ts``: the time of
    the reachable sample before it of the same site and connection (the sample interval)."""
    if not switch_rows:
        return {}
    sw = sparkmod.local_frame(spark, switch_rows, reconcile.SWITCH_DDL)
    w = Window.partitionBy("run_id", "site", "connection").orderBy("ts")
    lag = lag.filter(F.col("reachable")).withColumn("prev_ts", F.lag("ts").over(w))
    cols = [c for c in lag.columns if c != "run_id"]
    last = (lag.join(F.broadcast(sw), "run_id")
            .filter((F.col("site") == F.col("old_site")) & (F.col("ts") <= F.col("start_ts")) & F.col("reachable"))
            .groupBy("run_id", "switch_id").agg(F.max_by(F.struct(*cols), "ts").alias("s")))
    return {(r["run_id"], r["switch_id"]): r["s"] for r in _rows(last)}


EVENTS_PER_SHUFFLE_PARTITION = 1_000_000  # ~0.5 M messages: a per-task hash map of ~100 MiB, no spill


def _size_shuffle(spark: SparkSession, records: int) -> None:
    """Scale the shuffle partition count with the input, so the per-message hash aggregation stays in memory at
    100 M events as well as at 1,000."""
    configured = int(spark.conf.get("spark.sql.shuffle.partitions"))
    wanted = -(-records // EVENTS_PER_SHUFFLE_PARTITION)
    if wanted > configured:
        spark.conf.set("spark.sql.shuffle.partitions", str(wanted))


def _lag_series(lag: DataFrame) -> list[dict]:
    """Lag over time, at most LAG_POINTS buckets per run and site (max backlog/lag per bucket)."""
    bounds = lag.groupBy("run_id").agg(F.min("ts").alias("t_min"), F.max("ts").alias("t_max"))
    width = F.greatest((F.col("t_max") - F.col("t_min")) / F.lit(LAG_POINTS), F.lit(1e-3))
    bucketed = (lag.join(F.broadcast(bounds), "run_id")
                .withColumn("bucket", F.floor((F.col("ts") - F.col("t_min")) / width).cast("long")))
    agg = (bucketed.groupBy("run_id", "site", "bucket")
           .agg(F.min("ts").alias("ts"), F.max("backlog").alias("backlog"), F.max("lag_seconds").alias("lag_seconds"),
                F.min(F.col("reachable").cast("int")).alias("reachable")))
    # small (LAG_POINTS per run and site): sorted on the driver, no shuffle for it
    return sorted(_rows(agg), key=lambda r: (r["run_id"], r["site"] or "", r["bucket"]))


def _canaries(records: DataFrame) -> list[dict]:
    c = records.filter(F.col("kind") == "canary")
    agg = (c.groupBy("run_id", "origin_site", "target_site")
           .agg(F.count(F.lit(1)).alias("canaries"),
                F.sum(F.when(F.col("outcome") == "seen", 1).otherwise(0)).alias("seen"),
                F.sum(F.when(F.col("outcome") == "timeout", 1).otherwise(0)).alias("timeout"),
                F.sum(F.when(F.col("outcome") == "error", 1).otherwise(0)).alias("error"),
                F.percentile_approx("latency_seconds", [0.5, 0.9, 0.99], 10000).alias("p"),
                F.max("latency_seconds").alias("max")))
    out = []
    for r in sorted(_rows(agg), key=lambda r: (r["run_id"], r["origin_site"] or "", r["target_site"] or "")):
        p = r.pop("p") or [None, None, None]
        out.append({**r, "p50": p[0], "p90": p[1], "p99": p[2]})
    return out


def _sum(rows: list[dict], key: str) -> int:
    return int(sum(r.get(key) or 0 for r in rows))


def _assemble(run_ids, runs, phases, switches, led, last_samples, canary, cli_targets, ledger_ends) -> dict:
    execs = analysis.phase_executions(phases)
    rate = {(r["run_id"], r["switch_id"]): r["client_send_rate"] for r in led.send_rate}
    deliveries = {(r["run_id"], r["switch_id"]): r["client_receive_rate"] for r in led.receive_rate}
    first = {(r["run_id"], r["switch_id"]): r["first_recv_ts"] for r in led.first_receive}
    switch_out = []
    # Runbook overhead observed per switch kind, oldest first: a later switch's RTO estimate uses the earlier
    # ones (within a rehearsal and across the rehearsals of one pipeline run).
    overheads: dict[str, list[float]] = {}
    for s in sorted(switches, key=lambda x: (x["start_ts"], x["run_id"], x["switch_id"])):
        key = (s["run_id"], s["switch_id"])
        start = next((r for r in runs if r["run_id"] == s["run_id"] and r.get("event") == "start"), None)
        est = analysis.estimates(s, last_samples.get(key), rate.get(key), start, overheads.get(s["kind"]))
        fr = first.get(key)
        rto_obs = (fr - s["start_ts"]) if fr is not None else None
        observed_overhead = analysis.observed_overhead(rto_obs, est)
        if observed_overhead is not None:
            overheads.setdefault(s["kind"], []).append(observed_overhead)
        targets = analysis.targets_for(start, cli_targets)
        observed = {"rto_seconds_observed": rto_obs,
                    **led.switch_lost.get(key, {"rpo_messages_observed": None, "rpo_seconds_observed": None})}
        dups = led.switch_duplicates.get(key, {"duplicates_observed": None, "duplicates_observed_redelivery": None,
                                               "duplicates_observed_distinct": None})
        # no received record on the old site in the window: nothing was delivered there (with a ledger at all)
        delivery_rate = deliveries.get(key, 0.0 if dups["duplicates_observed"] is not None else None)
        dup_check = analysis.duplicates_check(est["duplicates_at_risk_estimated"], dups["duplicates_observed"],
                                              est["sample_interval_seconds"], delivery_rate, s["old_site"])
        switch_out.append({k: v for k, v in s.items() if k != "incident"} | {
            "first_recv_ts": fr, "rto_overhead_observed": observed_overhead, "client_send_rate": rate.get(key),
            "client_receive_rate": delivery_rate, **dups, **dup_check,
            **observed, **est, "target_rpo_messages": targets["rpo_messages"],
            "target_rpo_seconds": targets["rpo_seconds"], "target_rto_seconds": targets["rto_seconds"],
            "checks": analysis.verdict(observed, targets)})
    switch_out.sort(key=lambda x: (x["run_id"], x["start_ts"], x["switch_id"]))
    per_run = []
    for rid in run_ids:
        counts = [c for c in led.counts if c["run_id"] == rid]
        start = next((r for r in runs if r["run_id"] == rid and r.get("event") == "start"), None)
        end = next((r for r in runs if r["run_id"] == rid and r.get("event") == "end"), None)
        sws = [s for s in switch_out if s["run_id"] == rid]
        primary = next((s for s in sws if s["kind"] == "failover"), sws[0] if sws else None)
        # the run's RTO is its slowest switch (each switch is judged against the target on its own as well)
        slowest = max((s for s in sws if s["rto_seconds_observed"] is not None),
                      key=lambda s: s["rto_seconds_observed"], default=primary)
        totals = {k: _sum(counts, k) for k in reconcile.COUNT_COLUMNS}
        failover = primary is not None and primary["kind"] == "failover"
        if failover:
            rpo_msgs = totals["rpo_messages"]
            firsts = [c["rpo_first_send_ts"] for c in counts if c["rpo_first_send_ts"] is not None]
            lasts = [c["rpo_last_send_ts"] for c in counts if c["rpo_last_send_ts"] is not None]
        else:
            # no site was lost: every lost message is data loss of the run
            rpo_msgs = totals["lost"]
            firsts = [c["lost_first_send_ts"] for c in counts if c["lost_first_send_ts"] is not None]
            lasts = [c["lost_last_send_ts"] for c in counts if c["lost_last_send_ts"] is not None]
        rpo_secs = (max(lasts) - min(firsts)) if firsts else 0.0
        rto_obs = slowest["rto_seconds_observed"] if slowest else None
        observed = {"rpo_messages_observed": rpo_msgs if counts else None,
                    "rpo_seconds_observed": rpo_secs if counts else None, "rto_seconds_observed": rto_obs}
        targets = analysis.targets_for(start, cli_targets)
        estimated = {k: (primary or {}).get(k) for k in ("rpo_messages_estimated", "rpo_seconds_estimated")}
        estimated["rto_seconds_estimated"] = (slowest or {}).get("rto_seconds_estimated")
        can = [c for c in canary if c["run_id"] == rid]
        p50 = max((c["p50"] for c in can if c["p50"] is not None), default=None)
        p99 = max((c["p99"] for c in can if c["p99"] is not None), default=None)
        v = analysis.verdict(observed, targets, () if sws else ("rto_seconds",))  # no switch: no RTO to judge
        per_run.append({
            "run_id": rid, "scenario": (start or end or {}).get("scenario"),
            "start_ts": (start or {}).get("ts"), "end_ts": (end or {}).get("ts"), **totals, **observed, **estimated,
            "rpo_messages_error": analysis.error(estimated["rpo_messages_estimated"],
                                                 observed["rpo_messages_observed"]),
            "rpo_seconds_error": analysis.error(estimated["rpo_seconds_estimated"], observed["rpo_seconds_observed"]),
            "rto_seconds_error": analysis.error(estimated["rto_seconds_estimated"], observed["rto_seconds_observed"]),
            "target_rpo_messages": targets["rpo_messages"], "target_rpo_seconds": targets["rpo_seconds"],
            "target_rto_seconds": targets["rto_seconds"], "canary_p50": p50, "canary_p99": p99,
            "verdict": v["overall"], "checks": v, "switches": len(sws),
            "rto_switch_id": (slowest or {}).get("switch_id"),
        })
    per_run.sort(key=lambda r: (r["start_ts"] is None, r["start_ts"] or 0.0, r["run_id"]))
    truncated = analysis.truncated_ledgers(led.writers, ledger_ends)
    overall = ("FAIL" if any(r["verdict"] == "FAIL" for r in per_run)
               else "PASS" if any(r["verdict"] == "PASS" for r in per_run) else "NO-TARGET")
    return {"schema": "continuity.artemis.pipeline-summary/1", "verdict": overall, "runs": per_run,
            "reconciliation": led.counts, "switches": switch_out, "phases": execs, "canaries": canary,
            "truncated_ledgers": truncated}


def verdict_table(result: dict) -> str:
    head = ["run", "scenario", "lost", "in doubt", "dup (redeliv/distinct)", "late", "ooo", "RPO msgs", "RPO s",
            "RTO s", "verdict"]
    rows = []
    for r in result["runs"]:
        def f(v: Any, nd: int = 3) -> str:
            return "-" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))
        rows.append([r["run_id"], r["scenario"] or "-", f(r["lost"]), f(r["in_doubt"]),
                     f"{r['duplicated']} ({r['duplicated_redelivery']}/{r['duplicated_distinct']})", f(r["late"]),
                     f(r["out_of_order"]), f(r["rpo_messages_observed"]), f(r["rpo_seconds_observed"]),
                     f(r["rto_seconds_observed"]), r["verdict"]])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=False)]
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    bad = result["bad_input"]
    out.append(f"overall verdict: {result['verdict']}   bad input: {bad['errors']} error(s), "
               f"{bad['warnings']} warning(s)   truncated ledgers: {len(result['truncated_ledgers'])}")
    return "\n".join(out)


def run_cli(args) -> int:
    progress = Progress(args.quiet)
    progress("starting Spark")
    size = reader.local_size(args.evidence)
    spark = sparkmod.session(args.master, shuffle_partitions=args.shuffle_partitions,
                             driver_memory=args.driver_memory,
                             short_lived=size is not None and size <= CACHE_INPUT_BYTES)
    progress(f"Spark {spark.version}, master {spark.sparkContext.master}")
    cli_targets = {"rpo_seconds": args.rpo_seconds, "rpo_messages": args.rpo_messages,
                   "rto_seconds": args.rto_seconds}
    try:
        result = run_pipeline(spark, args.evidence, args.out, cli_targets, progress, html=not args.no_html)
    except Exception as exc:  # the terminal gets one line and the cause, not a JVM stack trace
        print(f"error: pipeline failed: {type(exc).__name__}: {str(exc).splitlines()[0][:500]}", file=sys.stderr)
        return 3
    print(verdict_table(result))
    bad = result["bad_input"]
    for b in bad["examples"][:20]:
        where = f"{b['file']}:{b['line']}" if b["line"] is not None else b["file"]
        print(f"  {b['severity']}: {where}: {b['reason']}", file=sys.stderr)
    if bad["errors"] and not args.allow_bad_records:
        print(f"error: {bad['errors']} bad input record(s)/file(s); see {os.path.join(args.out, 'bad_records.json')}"
              " (use --allow-bad-records to accept)", file=sys.stderr)
        return 2
    return 1 if result["verdict"] == "FAIL" else 0


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True, default=str)
