"""Bad input is reported with file and line, never dropped silently; wrong schema versions are rejected."""

from __future__ import annotations

import json

from continuity_pipeline import reader

GOOD = {"schema": "continuity.artemis.evidence/1", "kind": "sent", "run_id": "bad1", "ts": 1.0, "producer": "p0",
        "seq": 0, "msg_id": "m0", "address": "q", "site": "dc1", "send_ts": 1.0, "confirm_ts": 1.1,
        "outcome": "accepted", "attempt": 1}


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines))


def test_bad_records_reported_with_file_and_line(spark, tmp_path):
    d = tmp_path / "ev" / "bad1"
    d.mkdir(parents=True)
    wrong_version = dict(GOOD, schema="continuity.artemis.evidence/2", msg_id="m1")
    missing = {k: v for k, v in GOOD.items() if k != "msg_id"}
    wrong_type = dict(GOOD, seq="seven", msg_id="m3")
    _write(d / "sent-a.jsonl", [json.dumps(GOOD), json.dumps(wrong_version), "", "{not json",
                                json.dumps(missing), json.dumps(wrong_type), json.dumps(dict(GOOD, msg_id="m9"))])
    (d / "empty.jsonl").write_text("")
    (d / "broken.parquet").write_bytes(b"PAR1 this is not parquet")
    ev = reader.read(spark, [str(tmp_path / "ev")])
    bad = sorted((r["file"].rsplit("/", 1)[-1], r["line"], r["severity"], r["reason"])
                 for r in ev.bad.collect())
    by_line = {(f, line): (sev, reason) for f, line, sev, reason in bad}
    assert by_line[("sent-a.jsonl", 2)][0] == "error"
    assert "schema is 'continuity.artemis.evidence/2'" in by_line[("sent-a.jsonl", 2)][1]
    assert "not valid JSON" in by_line[("sent-a.jsonl", 4)][1]
    assert "missing field(s): msg_id" in by_line[("sent-a.jsonl", 5)][1]
    assert "seq must be an integer" in by_line[("sent-a.jsonl", 6)][1]
    assert by_line[("empty.jsonl", None)][0] == "warning"
    assert "unreadable Parquet" in by_line[("broken.parquet", None)][1]
    assert len(bad) == 6
    # the two good records survive, the blank line is neither a record nor an error
    assert sorted(r["msg_id"] for r in ev.records.collect()) == ["m0", "m9"]


def test_torn_last_line_is_a_warning(spark, tmp_path):
    d = tmp_path / "torn"
    d.mkdir()
    (d / "sent.jsonl").write_text(json.dumps(GOOD) + "\n" + json.dumps(dict(GOOD, msg_id="m2"))[:40])
    ev = reader.read(spark, [str(d)])
    rows = ev.bad.collect()
    assert [(r["line"], r["severity"]) for r in rows] == [(2, "warning")]
    assert rows[0]["reason"].startswith("torn last line")


def test_cli_exit_codes_for_bad_input(spark, tmp_path):
    from continuity_pipeline.__main__ import main

    d = tmp_path / "cli"
    d.mkdir()
    _write(d / "sent.jsonl", [json.dumps(GOOD), json.dumps(dict(GOOD, schema="other/9"))])
    assert main(["run", "--evidence", str(d), "--out", str(tmp_path / "o1"), "--quiet", "--no-html"]) == 2
    report = json.loads((tmp_path / "o1" / "bad_records.json").read_text())
    assert report["errors"] == 1 and report["examples"][0]["line"] == 2
    # accepted on request and still counted; the one good message was never received: with an RPO target of
    # 0 messages from the command line the run fails (exit 1)
    assert main(["run", "--evidence", str(d), "--out", str(tmp_path / "o2"), "--quiet", "--no-html",
                 "--allow-bad-records", "--rpo-messages", "0"]) == 1
    assert json.loads((tmp_path / "o2" / "bad_records.json").read_text())["errors"] == 1

