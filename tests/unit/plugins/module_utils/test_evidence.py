"""Unit tests for plugins/module_utils/evidence.py (builders, validation, writer)."""

from __future__ import annotations

import copy
import inspect
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import zipfile
from pathlib import Path

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import evidence as ev

ROOT = Path(__file__).resolve().parents[4]
SCHEMA = json.loads((ROOT / "schemas" / "evidence-v1.schema.json").read_text())
RID = "test-run-1"


def one_of_each(run_id: str = RID) -> list[dict]:
    t = 1_700_000_000.0
    return [
        ev.run_record(run_id, "start", "swapover", sites={"dc1": "active"}, targets={"rpo_seconds": 0},
                      params={"rate": 500}),
        ev.sent_record(run_id, "p0", 0, "m-1", "orders", "dc1", t, t + 0.01, "accepted", durable=True, size=128),
        ev.sent_record(run_id, "p0", 1, "m-2", "orders", "dc1", t, None, "in_doubt", error="connection lost"),
        ev.received_record(run_id, "c0", "m-1", "orders", "dc1", t + 0.02, t + 0.03, 0, producer="p0", seq=0,
                           ack_mode="per-message"),
        ev.ledger_end_record(run_id, "sent", "p0", 2, True, "stopped"),
        ev.lag_sample_record(run_id, "agent", "dc1", True, peer="dc2", backlog=12, pending_acks=None,
                             notes=["pending_acks needs 2.40"]),
        ev.canary_record(run_id, "c-1", "dc1", "dc2", "canary", t, t + 0.25, "seen"),
        ev.canary_record(run_id, "c-2", "dc1", "dc2", "canary", t, None, "timeout"),
        ev.phase_record(run_id, "swapover", "drain", t, t + 1, "pass", roles_before={"dc1": "active"},
                        roles_after={"dc1": "fenced"}, gate_samples=[{"backlog": 0}], data={"k": 1}),
        ev.incident_record(run_id, "dc1", "dc2", t, detected_ts=t + 3, at_risk_events=42),
    ]


def _allows_null(schema: dict, prop: dict) -> bool:
    if "$ref" in prop:
        prop = schema["$defs"][prop["$ref"].rsplit("/", 1)[1]]
    types = prop.get("type")
    return types == "null" or (isinstance(types, list) and "null" in types)


def _builder_fields(kind: str) -> set[str]:
    params = set(inspect.signature(ev.BUILDERS[kind]).parameters) - {"run_id", "ts", "extra", "fields"}
    return params | (set(ev.LAG_SAMPLE_FIELDS) if kind == "lag_sample" else set())


def drift(schema: dict) -> list[str]:
    """Where evidence.py's tables and builders differ from the JSON Schema ``schema``: [] = none."""
    problems = []
    if tuple(schema["properties"]["kind"]["enum"]) != ev.KINDS:
        problems.append("KINDS differ from the schema's kind enum")
    if schema["properties"]["schema"]["const"] != ev.SCHEMA_ID:
        problems.append("SCHEMA_ID differs from the schema's const")
    for kind in schema["properties"]["kind"]["enum"]:
        spec = schema["$defs"][kind]
        props = spec["properties"]
        if tuple(props) != ev.FIELDS.get(kind):
            problems.append(f"{kind}: FIELDS {ev.FIELDS.get(kind)} != schema properties {tuple(props)}")
        if tuple(spec["required"]) != ev.REQUIRED.get(kind):
            problems.append(f"{kind}: REQUIRED differs from the schema's required list")
        not_null = {f for f, p in props.items() if f not in spec["required"] and not _allows_null(schema, p)}
        if not_null != set(ev.NOT_NULL.get(kind, ())):
            problems.append(f"{kind}: NOT_NULL should be {sorted(not_null)}")
        if _builder_fields(kind) != set(props):
            problems.append(f"{kind}: builder parameters {sorted(_builder_fields(kind) ^ set(props))} differ")
        enums = {(kind, f): tuple(p["enum"]) for f, p in props.items() if "enum" in p}
        if enums != {k: v for k, v in ev.ENUMS.items() if k[0] == kind}:
            problems.append(f"{kind}: ENUMS differ from the schema's enums")
    return problems


def test_evidence_py_follows_the_schema():
    # The built-in tables and the builders must not drift from the schema file (the source of the format).
    assert drift(SCHEMA) == []


def test_the_drift_check_reports_a_field_added_to_the_schema():
    changed = copy.deepcopy(SCHEMA)
    changed["$defs"]["sent"]["properties"]["priority"] = {"type": "integer"}
    problems = drift(changed)
    assert any(p.startswith("sent: FIELDS") for p in problems), problems
    assert any("sent: builder parameters ['priority']" in p for p in problems), problems


@pytest.mark.parametrize("backend", ["jsonschema", "builtin"])
def test_every_builder_output_is_valid(backend):
    records = one_of_each()
    assert {r["kind"] for r in records} == set(ev.KINDS)
    for rec in records:
        assert ev.validate(rec, backend=backend) == [], rec


def test_jsonschema_is_the_default_backend_here():
    assert ev.validation_backend() == "jsonschema"


def test_unknown_values_are_null_and_non_nullable_optionals_are_omitted():
    lag = ev.lag_sample_record(RID, "module", "dc2", False)
    assert lag["backlog"] is None and lag["pending_acks"] is None and lag["lag_seconds"] is None
    assert "queue_diffs" not in lag and "notes" not in lag
    sent = ev.sent_record(RID, "p", 0, "m", "a", "dc1", 1.0, None, "error")
    assert sent["confirm_ts"] is None and "durable" not in sent and "size" not in sent
    phase = ev.phase_record(RID, "failover", "confirm", 1.0, None, "fail", reason="probe failed")
    assert "roles_before" not in phase and "data" not in phase and phase["end_ts"] is None


def test_derived_fields():
    rec = ev.received_record(RID, "c", "m", "a", "dc1", 2.0, None, 2)
    assert rec["redelivered"] is True and rec["delivery_count"] == 2
    assert ev.received_record(RID, "c", "m", "a", "dc1", 2.0, None, 0)["redelivered"] is False
    can = ev.canary_record(RID, "x", "dc1", "dc2", "a", 10.0, 10.5, "seen")
    assert can["latency_seconds"] == pytest.approx(0.5)


@pytest.mark.parametrize("backend", ["jsonschema", "builtin"])
@pytest.mark.parametrize("mutate, needle", [
    (lambda r: r.pop("msg_id"), "msg_id"),
    (lambda r: r.update(outcome="lost"), "lost"),
    (lambda r: r.update(schema="continuity.artemis.evidence/2"), "schema"),
    (lambda r: r.pop("run_id"), "run_id"),
    (lambda r: r.update(ts=-1), "ts"),
])
def test_invalid_records_are_reported(backend, mutate, needle):
    rec = ev.sent_record(RID, "p0", 0, "m-1", "orders", "dc1", 1.0, 1.1, "accepted")
    mutate(rec)
    problems = ev.validate(rec, backend=backend)
    assert problems and needle in " ".join(problems)
    with pytest.raises(ev.EvidenceError):
        ev.check(rec, backend=backend)


def test_schema_catches_type_errors_the_builtin_check_does_not():
    rec = ev.sent_record(RID, "p0", 0, "m-1", "orders", "dc1", 1.0, 1.1, "accepted")
    rec["seq"] = "zero"
    assert ev.validate(rec, backend="builtin") == []  # documented limit of the fallback
    assert any("seq" in p for p in ev.validate(rec, backend="jsonschema"))


def test_builder_guards():
    with pytest.raises(ev.EvidenceError):
        ev.build("nope", RID)
    with pytest.raises(ev.EvidenceError):
        ev.lag_sample_record(RID, "agent", "dc1", True, backlogg=3)
    with pytest.raises(ev.EvidenceError):
        ev.sent_record(RID, "p", 0, "m", "a", "dc1", 1.0, None, "error", extra={"kind": "x"})
    with pytest.raises(ev.EvidenceError):
        ev.base_record("run", "")
    rec = ev.build("incident", RID, lost_site="dc1", survivor_site="dc2", incident_ts=5.0)
    assert ev.validate(rec) == []
    assert ev.sent_record(RID, "p", 0, "m", "a", "dc1", 1.0, None, "error", extra={"host": "h1"})["host"] == "h1"


def test_run_ids(tmp_path):
    rid = ev.new_run_id("rehearsal dc1", ts=0)
    assert rid.startswith("rehearsal_dc1-19700101T000000Z-") and ev.is_valid_run_id(rid)
    assert ev.new_run_id() != ev.new_run_id()
    for bad in ["", "../x", "a/b", "-x", "x" * 129, None]:
        assert not ev.is_valid_run_id(bad)
        with pytest.raises(ev.EvidenceError):
            ev.check_run_id(bad)
    path = ev.ledger_path(tmp_path, rid, "sent", "producer/0")
    assert path == str(tmp_path / rid / "sent-producer_0.jsonl") and (tmp_path / rid).is_dir()


def test_writer_ledger_end_and_roundtrip(tmp_path):
    path = tmp_path / "r" / "sent-p0.jsonl"
    with ev.EvidenceWriter(path, run_id=RID, ledger="sent", writer="p0", validate=True) as w:
        for i in range(3):
            w.write(ev.sent_record(RID, "p0", i, f"m-{i}", "q", "dc1", 1.0, 1.1, "accepted"))
    recs = ev.read_records(path, validate_records=True)
    assert [r["kind"] for r in recs] == ["sent"] * 3 + ["ledger_end"]
    assert recs[-1]["records"] == 3 and recs[-1]["clean"] is True and recs[-1]["writer"] == "p0"
    with pytest.raises(ev.EvidenceError):
        w.write(recs[0])


def test_writer_unclean_exit_marks_ledger(tmp_path):
    path = tmp_path / "received-c0.jsonl"
    with pytest.raises(RuntimeError):
        with ev.EvidenceWriter(path, run_id=RID, ledger="received", writer="c0") as w:
            w.write(ev.received_record(RID, "c0", "m", "q", "dc1", 1.0, 1.0, 0))
            raise RuntimeError("boom")
    end = ev.read_records(path)[-1]
    assert end["kind"] == "ledger_end" and end["clean"] is False and "boom" in end["reason"]


def test_writer_validate_rejects(tmp_path):
    w = ev.EvidenceWriter(tmp_path / "x.jsonl", validate=True)
    with pytest.raises(ev.EvidenceError):
        w.write({"kind": "sent"})
    w.close()
    assert ev.read_records(tmp_path / "x.jsonl") == []


def test_writer_is_thread_safe(tmp_path):
    path = tmp_path / "t.jsonl"
    w = ev.EvidenceWriter(path, run_id=RID, ledger="sent", writer="many")

    def produce(n):
        for i in range(2000):
            w.write(ev.sent_record(RID, f"p{n}", i, f"m-{n}-{i}", "q", "dc1", 1.0, 1.0, "accepted"))

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close()
    recs = ev.read_records(path)
    assert len(recs) == 8001 and recs[-1]["records"] == 8000
    assert len({r["msg_id"] for r in recs[:-1]}) == 8000


def test_writer_flushes_within_a_second_without_close(tmp_path):
    path = tmp_path / "f.jsonl"
    w = ev.EvidenceWriter(path, flush_interval=1.0)
    w.write(ev.run_record(RID, "start", "s"))
    assert path.read_text() == ""  # buffered: proves the next assertion is the timer's doing
    deadline = time.time() + 1.5
    while time.time() < deadline and not path.read_text():
        time.sleep(0.05)
    assert path.read_text().count("\n") == 1
    w.close()


def test_kill_9_loses_at_most_the_last_second(tmp_path):
    """A child writes continuously and is SIGKILLed: everything written >1 s before the kill is on disk."""
    path = tmp_path / "k.jsonl"
    code = textwrap.dedent(f"""
        import sys, time
        from ansible_collections.continuity.artemis.plugins.module_utils import evidence as ev
        w = ev.EvidenceWriter({str(path)!r}, run_id="k", ledger="sent", writer="p")
        i = 0
        while True:
            w.write(ev.sent_record("k", "p", i, "m%d" % i, "q", "dc1", time.time(), None, "in_doubt"))
            i += 1
            time.sleep(0.001)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code])
    time.sleep(3.0)
    os.kill(proc.pid, signal.SIGKILL)
    killed_at = time.time()
    proc.wait()
    recs = list(ev.iter_records(path))  # a torn last line is tolerated
    assert recs, "nothing was flushed in 3 s"
    last_send = recs[-1][1]["send_ts"]
    assert killed_at - last_send <= 1.2, "lost %.2f s of records" % (killed_at - last_send)
    assert all(r["kind"] == "sent" for _, r in recs)  # no ledger_end: the ledger shows it was cut off


def test_reader_reports_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    good = json.dumps(ev.run_record(RID, "start", "s"))
    path.write_text(good + "\n" + "{not json}\n" + good + "\n")
    with pytest.raises(ev.EvidenceError, match=r"bad.jsonl:2"):
        ev.read_records(path)
    path.write_text(good + "\n" + json.dumps(dict(json.loads(good), schema="other/1")) + "\n")
    with pytest.raises(ev.EvidenceError, match=r"bad.jsonl:2: schema"):
        ev.read_records(path)
    path.write_text(good + "\n" + good[:10])  # torn last line after a kill -9
    assert len(ev.read_records(path)) == 1


def test_append_records_checks_every_record_before_writing_any(tmp_path):
    records = [{"kind": "run", "event": "start", "scenario": "swapover"}, {"kind": "run", "event": "end"}]
    with pytest.raises(ev.EvidenceError, match=r"records\[1\] \(run\)"):
        ev.append_records(tmp_path, RID, "run.jsonl", records)
    assert not (tmp_path / RID / "run.jsonl").exists()  # the valid first record was not written either
    out = ev.append_records(tmp_path, RID, "run.jsonl", records[:1])
    assert out["written"] == 1 and ev.read_records(out["evidence_file"])[0]["scenario"] == "swapover"


def test_append_records_refuses_paths_and_missing_kinds_and_writes_nothing_in_check_mode(tmp_path):
    with pytest.raises(ev.EvidenceError, match="plain file name"):
        ev.append_records(tmp_path, RID, "../run.jsonl", [])
    with pytest.raises(ev.EvidenceError, match=r"records\[0\] has no kind"):
        ev.append_records(tmp_path, RID, "run.jsonl", [{"event": "start"}])
    out = ev.append_records(tmp_path, RID, "run.jsonl", [{"kind": "run", "event": "start", "scenario": "s"}],
                            check_mode=True)
    assert out["written"] == 1 and not (tmp_path / RID).exists()


def test_columns_name_and_order_fields_like_the_builders():
    cols = ev.columns("sent", RID, [1.0, 2.0], outcome=["accepted", "in_doubt"], attempt=[1, 1], seq=[0, 1],
                      producer=["p0", "p0"], msg_id=["a", "b"], address="q", site="dc1", send_ts=[1.0, 2.0],
                      confirm_ts=[1.0, None])
    built = ev.sent_record(RID, "p0", 0, "a", "q", "dc1", 1.0, 1.0, "accepted")
    assert [k for k in cols] == [k for k in built if k != "error"]
    assert cols["schema"] == ev.SCHEMA_ID and cols["kind"] == "sent" and cols["ts"] == [1.0, 2.0]
    with pytest.raises(ev.EvidenceError, match=r"unknown \['sequence'\]"):
        ev.columns("sent", RID, 1.0, **{k: v for k, v in cols.items() if k not in ev.COMMON_FIELDS}, sequence=1)
    with pytest.raises(ev.EvidenceError, match=r"missing \['ack_ts'\]"):
        ev.columns("received", RID, 1.0, consumer="c", msg_id="m", address="q", site="dc1", recv_ts=1.0,
                   delivery_count=0, redelivered=False)


def test_write_lines_counts_records_and_truncate_replaces_the_file(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(ev.os, "fsync", synced.append)
    path = tmp_path / "sent-00000.jsonl"
    path.write_text("stale\n")
    lines = "".join(json.dumps(ev.sent_record(RID, "p", i, f"m{i}", "q", "dc1", 1.0, 1.0, "accepted")) + "\n"
                    for i in range(3))
    w = ev.EvidenceWriter(path, flush_interval=0, truncate=True, fsync=False)
    w.write_lines(lines.rstrip("\n"), 3)  # a missing last newline is added: the next write starts a line
    w.write(ev.run_record(RID, "end", "s"))
    w.close()
    recs = ev.read_records(path, validate_records=True)
    assert w.records == 4 and [r["kind"] for r in recs] == ["sent"] * 3 + ["run"]
    assert synced == []  # regenerable output: no fsync; real evidence is synced on close
    ev.EvidenceWriter(tmp_path / "real.jsonl", flush_interval=0).close()
    assert len(synced) == 1


def test_schema_is_read_from_a_zip(tmp_path):
    """spark-submit --py-files: evidence.py and the schema both inside one zip (continuity_pipeline.package)."""
    pkg = "ansible_collections/continuity/artemis"
    archive = tmp_path / "p.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for part in ("ansible_collections", "ansible_collections/continuity", pkg, f"{pkg}/plugins",
                     f"{pkg}/plugins/module_utils"):
            zf.writestr(f"{part}/__init__.py", "")
        zf.write(ev.__file__, f"{pkg}/plugins/module_utils/evidence.py")
        zf.write(ROOT / "schemas" / ev.SCHEMA_FILE, f"{pkg}/schemas/{ev.SCHEMA_FILE}")
    code = ("import json, sys; from ansible_collections.continuity.artemis.plugins.module_utils import evidence;"
            "assert '.zip' in evidence.__file__, evidence.__file__; print(json.dumps(evidence.load_schema()))")
    out = subprocess.run([sys.executable, "-S", "-c", code], env={"PYTHONPATH": str(archive)},
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == SCHEMA
