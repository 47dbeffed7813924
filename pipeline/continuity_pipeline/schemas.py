"""Explicit Spark schemas for evidence v1 (schemas/evidence-v1.schema.json) and for the pipeline's outputs.

The reader parses every line with ONE flat record schema: the union of the fields of all kinds. Fields the
JSON Schema types as free-form objects or arrays of objects (``sites``, ``params``, ``data``, ``last_known``,
``queue_diffs``, ``gate_samples``) are kept as their JSON text (Spark stores a nested value in a string field
as raw JSON), so a writer adding keys inside them never breaks parsing. In Parquet evidence those fields are
JSON text columns.
"""

from __future__ import annotations

from pyspark.sql import types as T

from ansible_collections.continuity.artemis.plugins.module_utils import evidence as ev

SCHEMA_ID: str = ev.SCHEMA_ID
KINDS: tuple[str, ...] = tuple(ev.KINDS)
REQUIRED: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in ev.REQUIRED.items()}
ENUMS: dict[tuple[str, str], tuple[str, ...]] = {k: tuple(v) for k, v in ev.ENUMS.items()}
LEDGER_KINDS = ("sent", "received")
SMALL_KINDS = ("run", "ledger_end", "phase", "incident")

S, L, D, B = T.StringType(), T.LongType(), T.DoubleType(), T.BooleanType()

TARGETS = T.StructType([
    T.StructField("rpo_seconds", D),
    T.StructField("rpo_messages", L),
    T.StructField("rto_seconds", D),
])
ROLES = T.MapType(S, S)

# name -> type. Where kinds share a field name they share its type (checked by tests/pipeline/test_schemas.py).
RECORD_FIELDS: list[tuple[str, T.DataType]] = [
    ("schema", S), ("kind", S), ("run_id", S), ("ts", D),
    # run
    ("event", S), ("scenario", S), ("sites", S), ("targets", TARGETS), ("params", S), ("outcome", S),
    # sent / received
    ("producer", S), ("seq", L), ("msg_id", S), ("address", S), ("site", S), ("send_ts", D), ("confirm_ts", D),
    ("attempt", L), ("durable", B), ("size", L), ("error", S),
    ("consumer", S), ("recv_ts", D), ("ack_ts", D), ("delivery_count", L), ("redelivered", B), ("ack_mode", S),
    # ledger_end
    ("ledger", S), ("writer", S), ("records", L), ("clean", B), ("reason", S),
    # lag_sample
    ("source", S), ("peer", S), ("connection", S), ("reachable", B), ("started", B), ("connected", B),
    ("backlog", L), ("pending_acks", L), ("add_rate", D), ("drain_rate", D), ("lag_seconds", D),
    ("queue_diff_count", L), ("queue_diffs", S), ("passive_consumers", L), ("rpo_messages_est", D),
    ("rpo_seconds_est", D), ("rto_seconds_est", D), ("role", S), ("notes", T.ArrayType(S)),
    # canary
    ("canary_id", S), ("origin_site", S), ("target_site", S), ("sent_ts", D), ("seen_ts", D),
    ("latency_seconds", D),
    # phase
    ("runbook", S), ("phase", S), ("start_ts", D), ("end_ts", D), ("roles_before", ROLES), ("roles_after", ROLES),
    ("decision", S), ("gate_samples", S), ("data", S),
    # incident
    ("lost_site", S), ("survivor_site", S), ("incident_ts", D), ("detected_ts", D), ("at_risk_events", L),
    ("at_risk_seconds", D), ("last_known", S),
]

RECORD = T.StructType([T.StructField(n, t, True) for n, t in RECORD_FIELDS])
CORRUPT_COL = "_corrupt"
RECORD_WITH_CORRUPT = T.StructType([*RECORD.fields, T.StructField(CORRUPT_COL, S, True)])

# Fields the JSON Schema requires but allows to be null: after parsing, "missing" and "null" look the same, so
# presence of these is not enforced (documented in docs/pipeline.md).
NULLABLE_REQUIRED = frozenset({
    ("sent", "confirm_ts"), ("received", "ack_ts"), ("canary", "seen_ts"), ("canary", "latency_seconds"),
    ("phase", "end_ts"),
})

FIELD_TYPES: dict[str, T.DataType] = dict(RECORD_FIELDS)

BAD_RECORD = T.StructType([
    T.StructField("file", S, False),
    T.StructField("line", L, True),  # 1-based line (JSON lines) or row (Parquet); null = the whole file
    T.StructField("severity", S, False),  # error | warning
    T.StructField("reason", S, False),
    T.StructField("kind", S, True),
    T.StructField("run_id", S, True),
    T.StructField("excerpt", S, True),
])

PHASE_ROW = T.StructType([
    T.StructField("run_id", S, False),
    T.StructField("execution", L, False),
    T.StructField("runbook", S, False),
    T.StructField("phase", S, False),
    T.StructField("start_ts", D, False),
    T.StructField("end_ts", D, True),
    T.StructField("duration_seconds", D, True),
    T.StructField("decision", S, True),
    T.StructField("reason", S, True),
])

RUN_SUMMARY_FIELDS: list[tuple[str, T.DataType]] = [
    ("run_id", S), ("scenario", S), ("start_ts", D), ("end_ts", D),
    ("sent_messages", L), ("confirmed_messages", L), ("received_messages", L), ("received_records", L),
    ("lost", L), ("in_doubt", L), ("in_doubt_received", L), ("not_accepted", L), ("unexpected", L),
    ("duplicated", L), ("duplicated_redelivery", L), ("duplicated_distinct", L), ("late", L), ("out_of_order", L),
    ("rpo_messages_observed", L), ("rpo_seconds_observed", D), ("rto_seconds_observed", D),
    ("rpo_messages_estimated", D), ("rpo_seconds_estimated", D), ("rto_seconds_estimated", D),
    ("rpo_messages_error", D), ("rpo_seconds_error", D), ("rto_seconds_error", D),
    ("target_rpo_messages", L), ("target_rpo_seconds", D), ("target_rto_seconds", D),
    ("canary_p50", D), ("canary_p99", D), ("verdict", S),
]
RUN_SUMMARY = T.StructType([T.StructField(n, t, True) for n, t in RUN_SUMMARY_FIELDS])
