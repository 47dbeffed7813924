"""Spark schemas of evidence v1 and of the pipeline's outputs.

The evidence record is derived from the JSON Schema (schemas/evidence-v1.schema.json) when this module is
imported, through ``layout``: the reader parses every line with ONE flat record schema, the union of the fields
of all kinds. Fields the JSON Schema types as free-form objects or arrays of objects (``sites``, ``params``,
``data``, ``last_known``, ``queue_diffs``, ``gate_samples``) are kept as their JSON text (Spark stores a nested
value in a string field as raw JSON), so a writer adding keys inside them never breaks parsing. In Parquet
evidence those fields are JSON text columns.
"""

from __future__ import annotations

from pyspark.sql import types as T

from continuity_pipeline.layout import LAYOUT, FieldType, Layout

S, L, D, B = T.StringType(), T.LongType(), T.DoubleType(), T.BooleanType()
_SPARK = {"string": S, "long": L, "double": D, "boolean": B, "json": S, "string_map": T.MapType(S, S),
          "string_list": T.ArrayType(S)}


def spark_type(ftype: FieldType) -> T.DataType:
    if ftype.name == "struct":
        return T.StructType([T.StructField(n, spark_type(t), True) for n, t in ftype.fields])
    return _SPARK[ftype.name]


def record_schema(layout: Layout) -> T.StructType:
    """The flat Spark record of an evidence layout: every field nullable (a kind leaves the others' null)."""
    return T.StructType([T.StructField(n, spark_type(t), True) for n, t in layout.fields])


SCHEMA_ID: str = LAYOUT.schema_id
KINDS: tuple[str, ...] = LAYOUT.kinds
REQUIRED: dict[str, tuple[str, ...]] = LAYOUT.required
ENUMS: dict[tuple[str, str], tuple[str, ...]] = LAYOUT.enums
# Fields the JSON Schema requires but allows to be null: after parsing, "missing" and "null" look the same, so
# presence of these is not enforced (documented in docs/pipeline.md).
NULLABLE_REQUIRED: frozenset[tuple[str, str]] = LAYOUT.nullable_required
LEDGER_KINDS = ("sent", "received")
SMALL_KINDS = ("run", "ledger_end", "phase", "incident")

RECORD = record_schema(LAYOUT)
FIELD_TYPES: dict[str, T.DataType] = {f.name: f.dataType for f in RECORD.fields}
CORRUPT_COL = "_corrupt"
RECORD_WITH_CORRUPT = T.StructType([*RECORD.fields, T.StructField(CORRUPT_COL, S, True)])


def kind_columns(kinds: tuple[str, ...], leave_out: tuple[str, ...] = ()) -> list[str]:
    """``kind``, ``run_id``, ``ts`` and the fields of ``kinds`` (record order), without ``leave_out``."""
    wanted = {f for k in kinds for f in LAYOUT.kind_fields[k]} - set(leave_out)
    return ["kind", "run_id", "ts"] + [f.name for f in RECORD.fields if f.name in wanted]


# The lag_samples output table (docs/pipeline.md): its columns are part of the output format.
LAG_TABLE_COLUMNS = ("run_id", "ts", "site", "peer", "connection", "reachable", "connected", "backlog",
                     "pending_acks", "add_rate", "drain_rate", "lag_seconds", "rpo_messages_est", "rpo_seconds_est",
                     "rto_seconds_est", "duplicates_at_risk_est", "replication_latency_p99_seconds", "role")

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
