# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
"""Evidence records (docs/evidence.md, schemas/evidence-v1.schema.json): builders, writer, validation.

Standard library only: the agent, the traffic tool and the pipeline import this file without ansible-core.
Every writer of evidence goes through here so the format has one implementation.

- ``*_record(...)`` build one record of each kind. A value that is unknown is ``None`` (JSON null) where the
  schema allows null; optional fields the schema does not allow to be null are left out instead.
- ``columns(kind, ...)`` builds many records of one kind column-wise (the synthetic generator's ledgers), with
  the same field names and order; ``EvidenceWriter.write_lines`` appends them once encoded.
- ``EvidenceWriter`` appends JSON lines, flushes at least once a second (from a background thread, so a
  ``kill -9`` loses at most the last second) and on close, is thread-safe, and ends a ledger with a
  ``ledger_end`` record when it is closed.
- ``validate(record)`` returns a list of problems: JSON Schema validation when ``jsonschema`` is importable and
  the schema file is found, the built-in required-fields check otherwise.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os
import re
import threading
import time
import uuid

SCHEMA_ID = "continuity.artemis.evidence/1"
SCHEMA_FILE = "evidence-v1.schema.json"
KINDS = ("run", "sent", "received", "ledger_end", "lag_sample", "canary", "phase", "incident")
COMMON_FIELDS = ("schema", "kind", "run_id", "ts")

# The JSON Schema (schemas/evidence-v1.schema.json) is the source of the format. The tables below repeat what
# the builders and the built-in check need, because modules run where the file is not shipped (an AnsiballZ
# payload); tests/unit/plugins/module_utils/test_evidence.py fails when they differ from the schema.
# FIELDS: each kind's fields after the common ones, in the schema's order (the order of a built record).
FIELDS = {
    "run": ("event", "scenario", "sites", "targets", "params", "outcome"),
    "sent": ("producer", "seq", "msg_id", "address", "site", "send_ts", "confirm_ts", "outcome", "attempt",
             "durable", "size", "error"),
    "received": ("consumer", "msg_id", "producer", "seq", "address", "site", "recv_ts", "ack_ts",
                 "delivery_count", "redelivered", "ack_mode"),
    "ledger_end": ("ledger", "writer", "records", "clean", "reason"),
    "lag_sample": ("source", "site", "peer", "connection", "reachable", "started", "connected", "backlog",
                   "pending_acks", "add_rate", "drain_rate", "lag_seconds", "queue_diff_count", "queue_diffs",
                   "passive_consumers", "rpo_messages_est", "rpo_seconds_est", "rto_seconds_est",
                   "duplicates_at_risk_est", "replication_latency_p99_seconds", "role", "notes"),
    "canary": ("canary_id", "origin_site", "target_site", "address", "sent_ts", "seen_ts", "latency_seconds",
               "outcome", "error"),
    "phase": ("runbook", "phase", "start_ts", "end_ts", "roles_before", "roles_after", "decision", "reason",
              "gate_samples", "data"),
    "incident": ("lost_site", "survivor_site", "incident_ts", "detected_ts", "at_risk_events", "at_risk_seconds",
                 "last_known"),
}
# Optional fields whose schema type does not allow null: a builder leaves them out when they are None (every
# other field is always present, None written as null).
NOT_NULL = {
    "run": ("sites", "targets", "params"),
    "sent": ("durable", "size"),
    "received": ("ack_mode",),
    "lag_sample": ("queue_diffs", "notes"),
    "phase": ("roles_before", "roles_after", "gate_samples", "data"),
}
REQUIRED = {
    "run": ("event", "scenario"),
    "sent": ("producer", "seq", "msg_id", "address", "site", "send_ts", "confirm_ts", "outcome", "attempt"),
    "received": ("consumer", "msg_id", "address", "site", "recv_ts", "ack_ts", "delivery_count", "redelivered"),
    "ledger_end": ("ledger", "writer", "records", "clean"),
    "lag_sample": ("source", "site", "reachable"),
    "canary": ("canary_id", "origin_site", "target_site", "address", "sent_ts", "seen_ts", "latency_seconds",
               "outcome"),
    "phase": ("runbook", "phase", "start_ts", "end_ts", "decision"),
    "incident": ("lost_site", "survivor_site", "incident_ts"),
}
# Enumerations the built-in check also enforces (the values a consumer of the evidence branches on).
ENUMS = {
    ("run", "event"): ("start", "end"),
    ("sent", "outcome"): ("accepted", "rejected", "released", "modified", "in_doubt", "error"),
    ("received", "ack_mode"): ("per-message", "batch", "transacted"),
    ("ledger_end", "ledger"): ("sent", "received"),
    ("lag_sample", "source"): ("module", "agent", "runbook"),
    ("canary", "outcome"): ("seen", "timeout", "error"),
    ("phase", "runbook"): ("status", "swapover", "failover", "failback", "rehearsal", "deploy"),
    ("phase", "decision"): ("pass", "fail", "rollback", "skipped", "done"),
}
SENT_OUTCOMES = ENUMS[("sent", "outcome")]
ACK_MODES = ENUMS[("received", "ack_mode")]
CANARY_OUTCOMES = ENUMS[("canary", "outcome")]
PHASE_DECISIONS = ENUMS[("phase", "decision")]

_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_FILE_PART_RE = re.compile(r"[^A-Za-z0-9._-]+")


class EvidenceError(ValueError):
    """A record that does not follow the evidence format, or a bad run id."""


# --- run ids and paths ------------------------------------------------------------------------------------

def now():
    """Epoch seconds (UTC) as a float: the time base of every record."""
    return time.time()


def new_run_id(prefix=None, ts=None):
    """A sortable, unique run id usable as a directory name: ``[prefix-]YYYYmmddTHHMMSSZ-xxxxxx``."""
    stamp = datetime.datetime.fromtimestamp(now() if ts is None else ts, tz=datetime.timezone.utc)
    rid = "%s-%s" % (stamp.strftime("%Y%m%dT%H%M%SZ"), uuid.uuid4().hex[:6])
    if prefix:
        rid = "%s-%s" % (safe_name(prefix), rid)
    return check_run_id(rid)


def is_valid_run_id(run_id):
    """1-128 characters, letters/digits/``._-``, not starting with a dot or dash (it names a directory)."""
    return isinstance(run_id, str) and bool(_RUN_ID_RE.match(run_id))


def check_run_id(run_id):
    if not is_valid_run_id(run_id):
        raise EvidenceError("invalid run id %r: use 1-128 characters [A-Za-z0-9._-], starting with a letter "
                            "or digit" % (run_id,))
    return run_id


def safe_name(name):
    """A writer name (producer, consumer) made safe for a file name."""
    cleaned = _FILE_PART_RE.sub("_", str(name)).strip("._-")
    return cleaned or "unnamed"


def run_dir(evidence_dir, run_id, create=True):
    """``<evidence_dir>/<run_id>``, created when asked."""
    path = os.path.join(str(evidence_dir), check_run_id(run_id))
    if create:
        os.makedirs(path, exist_ok=True)
    return path


def ledger_path(evidence_dir, run_id, ledger, writer, create=True):
    """By convention ``sent-<producer>.jsonl`` / ``received-<consumer>.jsonl`` in the run directory."""
    if ledger not in ("sent", "received"):
        raise EvidenceError("ledger must be 'sent' or 'received', not %r" % (ledger,))
    return os.path.join(run_dir(evidence_dir, run_id, create), "%s-%s.jsonl" % (ledger, safe_name(writer)))


# --- record builders -----------------------------------------------------------------------------------------

def base_record(kind, run_id, ts=None):
    if kind not in KINDS:
        raise EvidenceError("unknown evidence kind %r (known: %s)" % (kind, ", ".join(KINDS)))
    if not isinstance(run_id, str) or not run_id:
        raise EvidenceError("run_id must be a non-empty string")
    return {"schema": SCHEMA_ID, "kind": kind, "run_id": run_id, "ts": now() if ts is None else float(ts)}


_NOT_NULL = {kind: frozenset(NOT_NULL.get(kind, ())) for kind in KINDS}


def _record(kind, run_id, ts, values, extra):
    """Assemble a record from ``values`` (a builder's ``locals()``: its parameters are named after the fields):
    the kind's ``FIELDS`` in order, None as null except the ``NOT_NULL`` ones, which are left out. ``extra``
    adds fields the schema leaves open, never overriding ours."""
    rec = base_record(kind, run_id, ts)
    not_null = _NOT_NULL[kind]
    for key in FIELDS[kind]:
        value = values.get(key)
        if value is not None or key not in not_null:
            rec[key] = value
    if extra:
        clash = sorted(set(extra) & set(rec))
        if clash:
            raise EvidenceError("extra fields may not override record fields: %s" % ", ".join(clash))
        rec.update(extra)
    return rec


# Each builder's parameters are the kind's FIELDS (plus run_id, ts, extra); the unit tests check that they match.
def run_record(run_id, event, scenario, sites=None, targets=None, params=None, outcome=None, ts=None,
               extra=None):
    return _record("run", run_id, ts, locals(), extra)


def sent_record(run_id, producer, seq, msg_id, address, site, send_ts, confirm_ts, outcome, attempt=1,
                durable=None, size=None, error=None, ts=None, extra=None):
    seq, attempt = int(seq), int(attempt)
    return _record("sent", run_id, ts, locals(), extra)


def received_record(run_id, consumer, msg_id, address, site, recv_ts, ack_ts, delivery_count, producer=None,
                    seq=None, redelivered=None, ack_mode=None, ts=None, extra=None):
    """``redelivered`` defaults to ``delivery_count > 0`` (docs/evidence.md)."""
    delivery_count = int(delivery_count or 0)
    redelivered = delivery_count > 0 if redelivered is None else bool(redelivered)
    return _record("received", run_id, ts, locals(), extra)


def ledger_end_record(run_id, ledger, writer, records, clean, reason=None, ts=None, extra=None):
    records, clean = int(records), bool(clean)
    return _record("ledger_end", run_id, ts, locals(), extra)


# The lag_sample fields that are null when unknown (every one but source, site, reachable, queue_diffs, notes).
LAG_SAMPLE_FIELDS = tuple(f for f in FIELDS["lag_sample"]
                          if f not in ("source", "site", "reachable") and f not in NOT_NULL["lag_sample"])


def lag_sample_record(run_id, source, site, reachable, queue_diffs=None, notes=None, ts=None, extra=None,
                      **fields):
    """Keyword ``fields`` are the nullable lag fields (``LAG_SAMPLE_FIELDS``); missing ones are null."""
    unknown = sorted(set(fields) - set(LAG_SAMPLE_FIELDS))
    if unknown:
        raise EvidenceError("unknown lag_sample field(s): %s" % ", ".join(unknown))
    fields.update(source=source, site=site, reachable=bool(reachable), queue_diffs=queue_diffs, notes=notes)
    return _record("lag_sample", run_id, ts, fields, extra)


def canary_record(run_id, canary_id, origin_site, target_site, address, sent_ts, seen_ts, outcome,
                  latency_seconds=None, error=None, ts=None, extra=None):
    """``latency_seconds`` defaults to ``seen_ts - sent_ts`` when both are known."""
    if latency_seconds is None and seen_ts is not None and sent_ts is not None:
        latency_seconds = max(0.0, seen_ts - sent_ts)
    return _record("canary", run_id, ts, locals(), extra)


def phase_record(run_id, runbook, phase, start_ts, end_ts, decision, reason=None, roles_before=None,
                 roles_after=None, gate_samples=None, data=None, ts=None, extra=None):
    return _record("phase", run_id, ts, locals(), extra)


def incident_record(run_id, lost_site, survivor_site, incident_ts, detected_ts=None, at_risk_events=None,
                    at_risk_seconds=None, last_known=None, ts=None, extra=None):
    return _record("incident", run_id, ts, locals(), extra)


def columns(kind, run_id, ts, **cols):
    """Records of one kind column-wise, for bulk writers (the synthetic generator writes millions): the same
    field names and order as the kind's builder, as ``{field: column}``. A column is a sequence of one value
    per record (list, numpy or Arrow array) or a single value for every record (``schema``, ``kind``,
    ``run_id`` are); ``ts`` is a column or a value. Every required field must be given; the others may be
    left out. Encoding is the caller's (:meth:`EvidenceWriter.write_lines` appends the JSON lines)."""
    if kind not in KINDS:
        raise EvidenceError("unknown evidence kind %r (known: %s)" % (kind, ", ".join(KINDS)))
    unknown = sorted(set(cols) - set(FIELDS[kind]))
    missing = [key for key in REQUIRED[kind] if key not in cols]
    if unknown or missing:
        raise EvidenceError("%s columns: unknown %s, missing %s" % (kind, unknown or "none", missing or "none"))
    out = {"schema": SCHEMA_ID, "kind": kind, "run_id": check_run_id(run_id), "ts": ts}
    for key in FIELDS[kind]:
        if key in cols:
            out[key] = cols[key]
    return out


BUILDERS = {
    "run": run_record, "sent": sent_record, "received": received_record, "ledger_end": ledger_end_record,
    "lag_sample": lag_sample_record, "canary": canary_record, "phase": phase_record,
    "incident": incident_record,
}


def build(kind, run_id, **fields):
    """``build("phase", rid, runbook=..., ...)``: the builder of ``kind`` by name (for playbooks/filters)."""
    if kind not in BUILDERS:
        raise EvidenceError("unknown evidence kind %r (known: %s)" % (kind, ", ".join(KINDS)))
    return BUILDERS[kind](run_id, **fields)


# --- validation ----------------------------------------------------------------------------------------------

_validator_lock = threading.Lock()
_validator_cache = {}


def schema_path():
    """The schema file: ``$CONTINUITY_EVIDENCE_SCHEMA`` or ``<collection root>/schemas/`` next to this file."""
    env = os.environ.get("CONTINUITY_EVIDENCE_SCHEMA")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(os.path.dirname(os.path.dirname(here)), "schemas", SCHEMA_FILE)


def load_schema(path=None):
    """The JSON Schema as a dict. When this module was imported from a zip (``spark-submit --py-files``), the
    file inside that zip is read through the module's loader: ``open()`` cannot read into a zip."""
    path = path or schema_path()
    try:
        with open(path, "r", encoding="utf-8") as fh:
            return json.load(fh)
    except OSError:
        get_data = getattr(globals().get("__loader__"), "get_data", None)
        if get_data is None:
            raise
        try:
            data = get_data(path)
        except OSError:
            raise EvidenceError("evidence schema not found: %s (set CONTINUITY_EVIDENCE_SCHEMA)" % path) from None
        return json.loads(data.decode("utf-8"))


def _jsonschema_validator(path=None):
    """A cached jsonschema validator, or None when jsonschema or the schema file is not available."""
    path = path or schema_path()
    with _validator_lock:
        if path in _validator_cache:
            return _validator_cache[path]
        validator = None
        try:
            import jsonschema  # noqa: F401 - optional: modules run on hosts without it
            from jsonschema import Draft202012Validator

            if os.path.isfile(path):
                validator = Draft202012Validator(load_schema(path))
        except ImportError:
            validator = None
        _validator_cache[path] = validator
        return validator


def validation_backend():
    """``"jsonschema"`` or ``"builtin"``: which check ``validate`` uses here."""
    return "jsonschema" if _jsonschema_validator() is not None else "builtin"


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def builtin_problems(record):
    """The minimal check: common fields, the kind's required fields, and the enumerations in ``ENUMS``."""
    if not isinstance(record, dict):
        return ["record is not a JSON object"]
    problems = []
    for key in COMMON_FIELDS:
        if key not in record:
            problems.append("missing required field %r" % key)
    if "schema" in record and record["schema"] != SCHEMA_ID:
        problems.append("schema is %r, expected %r" % (record["schema"], SCHEMA_ID))
    if "run_id" in record and (not isinstance(record["run_id"], str) or not 0 < len(record["run_id"]) <= 128):
        problems.append("run_id must be a string of 1-128 characters")
    if "ts" in record and (not _is_number(record["ts"]) or record["ts"] < 0):
        problems.append("ts must be a number >= 0")
    kind = record.get("kind")
    if "kind" in record and kind not in KINDS:
        problems.append("unknown kind %r" % (kind,))
        return problems
    for key in REQUIRED.get(kind, ()):
        if key not in record:
            problems.append("%s: missing required field %r" % (kind, key))
    for (enum_kind, key), allowed in ENUMS.items():
        if enum_kind == kind and key in record and record[key] not in allowed:
            problems.append("%s: %s is %r, expected one of %s" % (kind, key, record[key], ", ".join(allowed)))
    return problems


def validate(record, backend=None):
    """Problems with ``record`` as a list of strings (empty = valid). ``backend`` forces "builtin"."""
    validator = None if backend == "builtin" else _jsonschema_validator()
    if validator is None:
        if backend == "jsonschema":
            raise EvidenceError("jsonschema validation requested but jsonschema or %s is not available"
                                % schema_path())
        return builtin_problems(record)
    problems = []
    for err in sorted(validator.iter_errors(record), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in err.absolute_path) or "(record)"
        problems.append("%s: %s" % (where, err.message))
    return problems


def check(record, backend=None):
    """``record`` unchanged when valid, else EvidenceError listing every problem."""
    problems = validate(record, backend)
    if problems:
        kind = record.get("kind") if isinstance(record, dict) else "?"
        raise EvidenceError("invalid %s record: %s" % (kind, "; ".join(problems)))
    return record


# --- reading --------------------------------------------------------------------------------------------------

def iter_records(path, validate_records=False):
    """Yield ``(line_number, record)`` for every JSON line in ``path``. A bad line raises EvidenceError with the
    file and line, except a torn last line (a writer killed mid-write), which is skipped."""
    with open(path, "r", encoding="utf-8") as fh:  # streamed: ledgers can hold millions of lines
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as exc:
                if not line.endswith("\n"):
                    return  # only the last line can lack its newline: torn by a kill -9 mid-write
                raise EvidenceError("%s:%d: not JSON: %s" % (path, number, exc)) from None
            _check_read(path, number, rec, validate_records)
            yield number, rec


def _check_read(path, number, rec, validate_records):
    """Raise EvidenceError (file:line) for a record of another schema version or an invalid one."""
    if not isinstance(rec, dict) or rec.get("schema") != SCHEMA_ID:
        raise EvidenceError("%s:%d: schema is %r, expected %r" % (
            path, number, rec.get("schema") if isinstance(rec, dict) else None, SCHEMA_ID))
    if validate_records:
        problems = validate(rec)
        if problems:
            raise EvidenceError("%s:%d: %s" % (path, number, "; ".join(problems)))


def read_records(path, validate_records=False):
    return [rec for _line, rec in iter_records(path, validate_records)]


# --- writer -----------------------------------------------------------------------------------------------------

def append_records(evidence_dir, run_id, file_name, records, check_mode=False):
    """Build, check and append runbook records (``[{kind: ..., fields...}]``) to ``<evidence_dir>/<run_id>/<file>``.

    All records are checked before anything is written: one invalid record raises :class:`EvidenceError` (its
    index and kind in the message) and writes nothing. Returns ``{"evidence_file", "written", "records"}``.
    The ``evidence`` module and its controller-side action plugin both call this.
    """
    if os.path.basename(str(file_name)) != file_name or not str(file_name).endswith(".jsonl"):
        raise EvidenceError("file must be a plain file name ending in .jsonl, not %r" % (file_name,))
    check_run_id(run_id)
    built = []
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise EvidenceError("records[%d] must be a dict, not %s" % (i, type(rec).__name__))
        fields = dict(rec)
        kind = fields.pop("kind", None)
        if kind is None:
            raise EvidenceError("records[%d] has no kind (one of: %s)" % (i, ", ".join(KINDS)))
        try:
            record = build(kind, run_id, **fields)
            check(record)
        except TypeError as exc:
            raise EvidenceError("records[%d] (%s): %s" % (i, kind, exc)) from exc
        except EvidenceError as exc:
            raise EvidenceError("records[%d] (%s): %s" % (i, kind, exc)) from exc
        built.append(record)
    path = os.path.join(run_dir(evidence_dir, run_id, create=not check_mode), file_name)
    if not check_mode:
        writer = EvidenceWriter(path, flush_interval=0)
        try:
            writer.write_many(built)
        finally:
            writer.close()
    return {"evidence_file": path, "written": len(built), "records": built}


class EvidenceWriter:
    """Append-only JSON-lines writer.

    Every evidence file is written through this class: runbooks (``append_records``), the agent, the traffic
    tool, and the synthetic generator (its bulk ledgers through :meth:`write_lines`).

    ``ledger`` ("sent"/"received") and ``writer`` (producer/consumer name) make it a ledger: ``close()`` then
    appends a ``ledger_end`` record with the number of records written. ``validate=True`` checks every record
    before writing (raises EvidenceError; used by tests and low-rate writers; the traffic tool builds its
    records with the builders above and leaves it off for speed).

    Thread-safe. Flushes every ``flush_interval`` seconds from a daemon thread, and on ``flush()``/``close()``.
    """

    def __init__(self, path, run_id=None, ledger=None, writer=None, validate=False, flush_interval=1.0,
                 create_dirs=True, truncate=False, fsync=True):
        if ledger is not None and ledger not in ("sent", "received"):
            raise EvidenceError("ledger must be 'sent', 'received' or None, not %r" % (ledger,))
        if ledger is not None and (not run_id or not writer):
            raise EvidenceError("a ledger writer needs run_id and writer (for its ledger_end record)")
        self.path = str(path)
        self.run_id = run_id
        self.ledger = ledger
        self.writer = writer
        self.validate = validate
        self.flush_interval = float(flush_interval)
        # fsync on close: evidence of a real run must survive a crash after it. fsync=False is for files that can
        # be regenerated (the synthetic generator): syncing hundreds of MiB per file costs seconds.
        self.fsync = fsync
        self.records = 0
        self.closed = False
        self._dirty = False
        self._lock = threading.Lock()
        if create_dirs and os.path.dirname(self.path):
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
        # Line buffering would flush every record (slow at thousands/s); a 1 MiB buffer plus the timer bounds
        # both the syscalls and the loss window.
        # truncate: a file written whole in one go (the generator), not a ledger appended to across restarts.
        self._fh = open(self.path, "w" if truncate else "a", encoding="utf-8", buffering=1024 * 1024)
        self._stop = threading.Event()
        self._thread = None
        if self.flush_interval > 0:
            self._thread = threading.Thread(target=self._flusher, name="evidence-flush:%s" % os.path.basename(
                self.path), daemon=True)
            self._thread.start()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close(clean=True, reason="closed")
        else:
            self.close(clean=False, reason="%s: %s" % (exc_type.__name__, exc))
        return False

    def _flusher(self):
        # Wakes twice per interval so a record never waits much more than one interval.
        half = self.flush_interval / 2.0
        while not self._stop.wait(half):
            self.flush(only_if_dirty=True)

    def write(self, record):
        """Append one record (a dict from a builder). Returns the record."""
        if self.validate:
            check(record)
        line = json.dumps(record, separators=(",", ":"), sort_keys=False, allow_nan=False) + "\n"
        with self._lock:
            if self.closed:
                raise EvidenceError("evidence writer %s is closed" % self.path)
            self._fh.write(line)
            self.records += 1
            self._dirty = True
        return record

    def write_many(self, records):
        for rec in records:
            self.write(rec)

    def write_lines(self, text, count):
        """Append ``count`` records already encoded as JSON lines (the fast path of bulk writers, which build
        their records with :func:`columns` and encode them column-wise). Not validated here."""
        if text and not text.endswith("\n"):
            text += "\n"
        with self._lock:
            if self.closed:
                raise EvidenceError("evidence writer %s is closed" % self.path)
            self._fh.write(text)
            self.records += int(count)
            self._dirty = True

    def flush(self, only_if_dirty=False):
        with self._lock:
            if self.closed or (only_if_dirty and not self._dirty):
                return
            self._fh.flush()
            self._dirty = False

    def close(self, clean=True, reason=None):
        """Flush and close; a ledger gets its ``ledger_end`` (``clean`` false = stopped by an error)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        with self._lock:
            if self.closed:
                return
            if self.ledger is not None:
                end = ledger_end_record(self.run_id, self.ledger, self.writer, self.records, clean, reason)
                self._fh.write(json.dumps(end, separators=(",", ":")) + "\n")
            self._fh.flush()
            try:
                if self.fsync:
                    os.fsync(self._fh.fileno())
            except OSError:
                pass  # not every file system supports fsync (pipes, some FUSE mounts); the flush is done
            self._fh.close()
            self.closed = True
