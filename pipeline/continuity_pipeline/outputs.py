"""Outputs: Parquet tables (deterministic: repartitioned by key, sorted), summary.json, metrics.prom."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from continuity_pipeline import reconcile
from continuity_pipeline import schemas as sc
from continuity_pipeline.spark import local_frame

MAX_BAD_EXAMPLES = 1000

RECONCILIATION = T.StructType(
    [T.StructField("run_id", T.StringType(), False), T.StructField("address", T.StringType(), True)]
    + [T.StructField(c, T.LongType(), True) for c in reconcile.COUNT_COLUMNS])
SWITCHES = T.StructType([T.StructField(n, t, True) for n, t in [
    ("run_id", T.StringType()), ("switch_id", T.StringType()), ("kind", T.StringType()), ("start_ts", T.DoubleType()),
    ("old_site", T.StringType()), ("new_site", T.StringType()), ("first_recv_ts", T.DoubleType()),
    ("rto_seconds_observed", T.DoubleType()), ("client_send_rate", T.DoubleType()), ("sample_ts", T.DoubleType()),
    ("backlog", T.LongType()), ("add_rate", T.DoubleType()), ("drain_rate", T.DoubleType()),
    ("rpo_messages_estimated", T.DoubleType()), ("rpo_seconds_estimated", T.DoubleType()),
    ("rto_seconds_estimated", T.DoubleType()), ("rpo_basis", T.StringType()), ("rto_basis", T.StringType()),
    ("duplicates_at_risk_ack_batching", T.LongType()), ("duplicates_at_risk_estimated", T.DoubleType()),
    ("replication_latency_p99_seconds", T.DoubleType()), ("sample_interval_seconds", T.DoubleType()),
    ("client_receive_rate", T.DoubleType()), ("duplicates_observed", T.LongType()),
    ("duplicates_observed_redelivery", T.LongType()), ("duplicates_observed_distinct", T.LongType()),
    ("duplicates_error", T.DoubleType()), ("duplicates_tolerance_messages", T.DoubleType()),
    ("duplicates_within_tolerance", T.BooleanType()), ("duplicates_judgement", T.StringType())]])
CANARIES = T.StructType([T.StructField(n, t, True) for n, t in [
    ("run_id", T.StringType()), ("origin_site", T.StringType()), ("target_site", T.StringType()),
    ("canaries", T.LongType()), ("seen", T.LongType()), ("timeout", T.LongType()), ("error", T.LongType()),
    ("p50", T.DoubleType()), ("p90", T.DoubleType()), ("p99", T.DoubleType()), ("max", T.DoubleType())]])


def write_table(df: DataFrame, path: str, partition_by: list[str], sort_by: list[str]) -> None:
    """Deterministic Parquet: one task per partition value, rows sorted inside it, overwrite."""
    (df.repartition(*partition_by).sortWithinPartitions(*sort_by)
     .write.mode("overwrite").partitionBy(*partition_by).parquet(path))


def write_small_table(df: DataFrame, path: str, partition_by: list[str], sort_by: list[str]) -> None:
    """Deterministic Parquet for a table built on the driver: one task sorts it (partition columns first, which
    is the order the partitioned writer needs) and writes one file per partition value; no shuffle."""
    (df.coalesce(1).sortWithinPartitions(*dict.fromkeys([*partition_by, *sort_by]))
     .write.mode("overwrite").partitionBy(*partition_by).parquet(path))


def _typed(row: dict, schema: T.StructType) -> tuple:
    out = []
    for f in schema.fields:
        v = row.get(f.name)
        if v is not None and isinstance(f.dataType, T.DoubleType):
            v = float(v)
        elif v is not None and isinstance(f.dataType, T.LongType):
            v = int(v)
        out.append(v)
    return tuple(out)


def _small(spark: SparkSession, rows: list[dict], schema: T.StructType) -> DataFrame:
    return local_frame(spark, [_typed(r, schema) for r in rows], schema)


def small_table_writes(spark: SparkSession, out: str, result: dict) -> list[Callable[[], None]]:
    """The tables built on the driver from ``result``, as independent writes (the caller may run them in
    parallel)."""
    t = os.path.join(out, "tables")
    specs = [("reconciliation", result["reconciliation"], RECONCILIATION, ["run_id", "address"]),
             ("runs", result["runs"], sc.RUN_SUMMARY, ["run_id"]),
             ("switches", result["switches"], SWITCHES, ["run_id", "start_ts"]),
             ("phases", result["phases"], sc.PHASE_ROW, ["run_id", "start_ts", "runbook", "phase"]),
             ("canary_latency", result["canaries"], CANARIES, ["run_id", "origin_site", "target_site"])]

    def write(name: str, rows: list[dict], schema: T.StructType, sort_by: list[str]) -> Callable[[], None]:
        return lambda: write_small_table(_small(spark, rows, schema), os.path.join(t, name), ["run_id"], sort_by)

    return [write(*spec) for spec in specs]


def write_bad(bad: DataFrame, out: str, known: int | None = None) -> dict:
    """All bad input rows to Parquet; counts and the first examples (sorted) to bad_records.json.

    ``known`` is the number of bad rows and file problems the reader already counted: when it is 0 the three
    passes over the input below are skipped (an empty table is still written).
    """
    write = write_table
    if known == 0:
        bad, write = bad.limit(0), write_small_table
    write(bad.withColumn("_p", F.lit(0)), os.path.join(out, "tables", "bad_records"), ["_p"],
          ["file", "line", "reason"])
    counts: dict = {}
    examples: list = []
    if known != 0:
        counts = {r["severity"]: r["n"] for r in bad.groupBy("severity").agg(F.count(F.lit(1)).alias("n")).collect()}
        examples = [r.asDict() for r in bad.orderBy("severity", "file", "line").limit(MAX_BAD_EXAMPLES).collect()]
    summary = {"errors": int(counts.get("error", 0)), "warnings": int(counts.get("warning", 0)),
               "examples": examples, "examples_truncated": sum(counts.values()) > MAX_BAD_EXAMPLES}
    with open(os.path.join(out, "bad_records.json"), "w", encoding="utf-8") as fh:
        json.dump(summary, fh, indent=1, sort_keys=True)
    return summary


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return None if not math.isfinite(obj) else round(obj, 6)
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def write_summary(out: str, result: dict) -> None:
    """summary.json: sorted keys, rounded floats, no wall-clock time: the same evidence gives the same bytes."""
    with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as fh:
        json.dump(_clean(result), fh, indent=1, sort_keys=True, default=str)
        fh.write("\n")


# --- Prometheus text format ------------------------------------------------------------------------------------

METRICS = [
    # name, help, type, source key in a run row
    ("continuity_run_sent_messages", "Messages with at least one sent record", "sent_messages"),
    ("continuity_run_confirmed_messages", "Messages with an accepted send", "confirmed_messages"),
    ("continuity_run_received_messages", "Messages received at least once", "received_messages"),
    ("continuity_run_lost_messages", "Accepted messages never received", "lost"),
    ("continuity_run_in_doubt_messages", "Messages only sent in doubt/error (never counted as lost)", "in_doubt"),
    ("continuity_run_late_messages", "Messages first received after the failback/run end", "late"),
    ("continuity_run_out_of_order_messages", "Messages received after a higher seq of their producer",
     "out_of_order"),
    ("continuity_run_rpo_messages_observed", "Messages confirmed on the lost site never received",
     "rpo_messages_observed"),
    ("continuity_run_rpo_seconds_observed", "Seconds of data lost (first to last send of lost messages)",
     "rpo_seconds_observed"),
    ("continuity_run_rto_seconds_observed", "Switch start to first receive on the new active site",
     "rto_seconds_observed"),
    ("continuity_run_rpo_messages_estimated", "RPO messages estimated from the last lag sample",
     "rpo_messages_estimated"),
    ("continuity_run_rpo_seconds_estimated", "RPO seconds estimated from the last lag sample", "rpo_seconds_estimated"),
    ("continuity_run_rto_seconds_estimated", "RTO estimated from the last lag sample", "rto_seconds_estimated"),
    ("continuity_run_canary_latency_p99_seconds", "Worst direction's canary latency p99", "canary_p99"),
]


def _label(v: Any) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def prometheus_text(result: dict) -> str:
    lines: list[str] = []

    def family(name: str, help_: str, samples: list[tuple[dict, Any]]) -> None:
        lines.append(f"# HELP {name} {help_}")
        lines.append(f"# TYPE {name} gauge")
        for labels, value in samples:
            if value is None:
                continue
            lab = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
            lines.append(f"{name}{{{lab}}} {float(value):.10g}")

    runs = result["runs"]
    for name, help_, key in METRICS:
        family(name, help_, [({"run_id": r["run_id"]}, r.get(key)) for r in runs])
    family("continuity_run_duplicated_messages", "Messages received more than once, by kind",
           [({"run_id": r["run_id"], "kind": k}, r.get(f"duplicated_{k}")) for r in runs
            for k in ("redelivery", "distinct")])
    family("continuity_run_sla_pass", "1 if the run met every configured target, 0 if one failed",
           [({"run_id": r["run_id"]}, 1 if r["verdict"] == "PASS" else 0) for r in runs
            if r["verdict"] in ("PASS", "FAIL")])
    family("continuity_run_target", "Configured SLA targets",
           [({"run_id": r["run_id"], "target": t}, r.get(f"target_{t}")) for r in runs
            for t in ("rpo_messages", "rpo_seconds", "rto_seconds")])
    family("continuity_address_lost_messages", "Lost messages per run and address",
           [({"run_id": c["run_id"], "address": c["address"]}, c["lost"]) for c in result["reconciliation"]])
    family("continuity_address_duplicated_messages", "Duplicated messages per run and address",
           [({"run_id": c["run_id"], "address": c["address"]}, c["duplicated"]) for c in result["reconciliation"]])
    family("continuity_phase_duration_seconds", "Runbook phase durations",
           [({"run_id": p["run_id"], "runbook": p["runbook"], "execution": p["execution"], "phase": p["phase"]},
             p["duration_seconds"]) for p in result["phases"]])
    family("continuity_bad_input_records", "Bad evidence records or files, by severity",
           [({"severity": "error"}, result["bad_input"]["errors"]),
            ({"severity": "warning"}, result["bad_input"]["warnings"])])
    return "\n".join(lines) + "\n"


def write_metrics(out: str, result: dict) -> None:
    with open(os.path.join(out, "metrics.prom"), "w", encoding="utf-8") as fh:
        fh.write(prometheus_text(result))
