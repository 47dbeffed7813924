"""Pure logic on small data (no Spark): switches from phase records, RPO/RTO observed and estimated, verdicts.

Inputs are plain dicts (records as the evidence format defines them, or the small aggregates the Spark
reconciliation returns); outputs are plain dicts, so all of it is unit-testable without a JVM.
"""

from __future__ import annotations

import json
from typing import Any

from ansible_collections.continuity.artemis.plugins.module_utils import lag as lagmodel
from ansible_collections.continuity.artemis.plugins.module_utils import rto_overhead as overhead
from ansible_collections.continuity.artemis.plugins.module_utils import sla

SWITCH_RUNBOOKS = ("swapover", "failover", "failback")


def phase_executions(phases: list[dict]) -> list[dict]:
    """Every phase record with its ``execution`` number (the core's ``rto_overhead.executions``: a phase name seen
    again within a run and runbook starts the next execution) and ``duration_seconds``."""
    out = [{**p, "execution": e["execution"],
            "duration_seconds": (p["end_ts"] - p["start_ts"]) if p.get("end_ts") is not None else None}
           for e in overhead.executions(phases) for p in e["phases"]]
    return sorted(out, key=lambda r: (r["run_id"], r["start_ts"], r["runbook"], r["phase"]))


def switches(phases: list[dict], incidents: list[dict]) -> list[dict]:
    """Every switch of the active site: failover incidents and swapover/failback executions that changed it.

    ``start_ts``: the incident time (failover) or the first phase start of the execution (swapover, failback).
    ``new_site``: the survivor, or the single active site in the execution's last ``roles_after``.
    """
    found: list[dict] = []
    for inc in sorted(incidents, key=lambda r: (r["run_id"], r["incident_ts"])):
        found.append({"run_id": inc["run_id"], "switch_id": f"failover@{inc['incident_ts']:.3f}", "kind": "failover",
                      "start_ts": float(inc["incident_ts"]), "old_site": inc["lost_site"],
                      "new_site": inc["survivor_site"], "incident": inc})
    for e in overhead.executions(phases):
        if e["runbook"] not in ("swapover", "failback"):
            continue
        before, after = overhead.sites_switched(e)
        if after is None or after == before:
            continue  # rolled back or never switched: no new active site to measure
        found.append({"run_id": e["run_id"], "switch_id": f"{e['runbook']}#{e['execution']}", "kind": e["runbook"],
                      "start_ts": float(e["phases"][0]["start_ts"]), "old_site": before, "new_site": after,
                      "incident": None})
    found.sort(key=lambda s: (s["run_id"], s["start_ts"], s["switch_id"]))
    # A failback that only fences the returning site and starts it passive (the clients stay on the survivor)
    # ends with the site that the run's previous switch already made active: the clients did not move, there is
    # no RTO to measure (the returning site's own "active" before the fence is not where the clients were).
    out: list[dict] = []
    for s in found:
        prev = next((p for p in reversed(out) if p["run_id"] == s["run_id"]), None)
        if s["kind"] != "failover" and prev is not None and prev["new_site"] == s["new_site"]:
            continue
        out.append(s)
    return out


def late_cutoff(run_id: str, runs: list[dict], phases: list[dict]) -> float | None:
    """After this time an arrival is late: the end of the last failback phase, else the run's end record."""
    fb = [p.get("end_ts") for p in phases if p["run_id"] == run_id and p["runbook"] == "failback" and p.get("end_ts")]
    if fb:
        return float(max(fb))
    ends = [r["ts"] for r in runs if r["run_id"] == run_id and r.get("event") == "end"]
    return float(max(ends)) if ends else None


def _params(run_rec: dict | None) -> dict:
    raw = (run_rec or {}).get("params")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raw = None
    return raw if isinstance(raw, dict) else {}


def _number(value: Any) -> float | None:
    """A number from run parameters (rendered by Jinja, so "1.5" is as good as 1.5)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value) if isinstance(value, str) else None
    except ValueError:
        return None


def runbook_overhead(params: dict, kind: str, history: list[float | None] | None) -> tuple[float | None, str]:
    """Seconds a switch of ``kind`` spends besides draining: the core's ``rto_overhead.overhead_estimate`` over
    the same kind's earlier switches in the evidence (``history``, oldest first: the largest of the newest
    three), else the run's ``rto_overhead_seconds`` (a number, or one per kind)."""
    value = overhead.overhead_estimate(history or [])
    if value is not None:
        return value, "history"
    raw = params.get("rto_overhead_seconds")
    if isinstance(raw, dict):
        raw = raw.get(kind)
    value = _number(raw)
    return (value, "params") if value is not None else (None, "none")


def observed_overhead(rto_observed: float | None, estimate: dict) -> float | None:
    """A switch's observed runbook overhead (``rto_overhead.switch_overhead``): its observed RTO minus the drain
    time estimated for it (:func:`estimates` ``rto_drain_seconds``)."""
    return overhead.switch_overhead(rto_observed, estimate.get("rto_drain_seconds"))


def estimates(switch: dict, sample: dict | None, client_send_rate: float | None, run_start: dict | None,
              overhead_history: list[float] | None = None) -> dict:
    """RPO/RTO estimated from the last lag sample of the old site before the switch, with the shared lag model.

    The model is fed what a live system knows at that moment: backlog, add and drain rates, connection state,
    the client send rate (share of SNF events that are sends) and the runbook overhead (earlier switches of the
    same kind, else the run parameters). A planned switch (swapover, failback) waits for the drain; a failover
    does not (the lost site's backlog is the RPO) but first has to detect the loss: ``loss_probes`` x
    ``loss_probe_interval`` from the run parameters, unless the overhead comes from earlier failovers, which
    already include it. The estimate the writer recorded in the sample (``*_est`` fields) is kept next to the
    recomputed one.

    Duplicates at risk: ``duplicates_at_risk_estimated`` is the continuity plugin's estimate the writer recorded
    in the sample (``duplicates_at_risk_est``: deliveries in flight on the old site plus its acks not yet
    replicated, ``lag.duplicates_at_risk``; null without the plugin), ``duplicates_at_risk_ack_batching`` the
    ack-batching bound from the run parameters (``lag.ack_widening(consumers, ack_batch)``).
    ``sample_interval_seconds``: the sample's time minus that of the sample before it (``prev_ts``).
    """
    params = _params(run_start)
    out: dict[str, Any] = {"sample_ts": None, "backlog": None, "add_rate": None, "drain_rate": None,
                           "rpo_messages_estimated": None, "rpo_seconds_estimated": None,
                           "rto_seconds_estimated": None, "rpo_basis": None, "rto_basis": None,
                           "rto_drain_seconds": None, "rto_overhead_seconds": None, "rto_overhead_basis": None,
                           "rpo_messages_recorded": None, "rpo_seconds_recorded": None, "rto_seconds_recorded": None,
                           "duplicates_at_risk_estimated": None, "duplicates_at_risk_ack_batching": None,
                           "replication_latency_p99_seconds": None, "sample_interval_seconds": None, "notes": []}
    consumers, batch = params.get("consumers"), params.get("ack_batch")
    if isinstance(consumers, int) and isinstance(batch, int):
        out["duplicates_at_risk_ack_batching"] = lagmodel.ack_widening(consumers, batch)
    kind = switch.get("kind")
    overhead, overhead_basis = runbook_overhead(params, kind, overhead_history)
    notes: list[str] = []
    if overhead is None:
        notes.append(f"no runbook overhead for {kind} (no earlier switch, no rto_overhead_seconds): "
                     "counted as 0")
    if kind == "failover":
        if overhead_basis == "history":
            detection: float | None = 0.0  # the earlier failovers' observed overhead already includes detection
        else:
            probes, interval = _number(params.get("loss_probes")), _number(params.get("loss_probe_interval"))
            detection = probes * interval if probes is not None and interval is not None else None
        rto = lagmodel.site_loss_rto_estimate(detection, overhead or 0.0)
    if sample is None:
        out["notes"] = [*notes, "no lag sample of the old site before the switch"]
        if kind == "failover":
            out["notes"] += rto.notes
            out.update(rto_seconds_estimated=rto.seconds, rto_basis=rto.basis, rto_drain_seconds=0.0,
                       rto_overhead_seconds=rto.overhead_seconds, rto_overhead_basis=overhead_basis)
        return out
    backlog, add, drain = sample.get("backlog"), sample.get("add_rate"), sample.get("drain_rate")
    share = lagmodel.send_share(client_send_rate, add)
    rpo = lagmodel.rpo_estimate(backlog, add, share_of_sends=share, connected=sample.get("connected"))
    if kind != "failover":
        rto = lagmodel.rto_estimate(backlog, drain, overhead or 0.0)
    out.update(sample_ts=sample.get("ts"), backlog=backlog, add_rate=add, drain_rate=drain,
               rpo_messages_estimated=rpo.messages, rpo_seconds_estimated=rpo.seconds,
               rto_seconds_estimated=rto.seconds, rpo_basis=rpo.basis, rto_basis=rto.basis,
               rto_drain_seconds=rto.drain_seconds, rto_overhead_seconds=rto.overhead_seconds,
               rto_overhead_basis=overhead_basis,
               rpo_messages_recorded=sample.get("rpo_messages_est"), rpo_seconds_recorded=sample.get("rpo_seconds_est"),
               rto_seconds_recorded=sample.get("rto_seconds_est"), notes=notes + list(rpo.notes) + list(rto.notes),
               duplicates_at_risk_estimated=sample.get("duplicates_at_risk_est"),
               replication_latency_p99_seconds=sample.get("replication_latency_p99_seconds"),
               sample_interval_seconds=(sample["ts"] - sample["prev_ts"])
               if sample.get("ts") is not None and sample.get("prev_ts") is not None else None)
    return out


def duplicates_check(estimated: float | None, observed: int | None, sample_interval: float | None,
                     delivery_rate: float | None, old_site: str | None = None) -> dict:
    """The plugin's duplicates-at-risk estimate of a switch against the duplicates the ledgers observed for it.

    The estimate is read up to one sample interval before the switch, so it may miss what was delivered and
    acknowledged during that interval: it is judged *within* when ``|estimated - observed|`` is at most one
    sample interval's traffic, ``sample_interval`` seconds x ``delivery_rate`` messages/s (the old site's
    deliveries before the switch). Returns ``duplicates_error`` (estimated - observed, positive = pessimistic),
    ``duplicates_tolerance_messages``, ``duplicates_within_tolerance`` (None when it cannot be judged) and
    ``duplicates_judgement``, one sentence that says why.
    """
    err = error(estimated, observed)
    tolerance = (float(sample_interval) * float(delivery_rate)
                 if sample_interval is not None and delivery_rate is not None else None)
    within = abs(err) <= tolerance if err is not None and tolerance is not None else None
    site = f" on {old_site}" if old_site else ""
    if estimated is None:
        text = (f"no duplicates-at-risk estimate before the switch (no continuity plugin{site}, or no lag sample "
                "of it before the switch)")
    elif observed is None:
        text = "duplicates not observed: no received ledger for the run"
    else:
        head = f"estimated {estimated:.1f}, observed {observed} messages delivered twice (error {err:+.1f})"
        if tolerance is None:
            missing = "no earlier lag sample" if sample_interval is None else "no delivery rate"
            text = f"{head}; one sample interval's traffic unknown ({missing}), not judged"
        else:
            traffic = (f"one sample interval's traffic: {sample_interval:.2f} s x {delivery_rate:.1f} msg/s "
                       f"= {tolerance:.0f} messages")
            if within:
                text = f"{head}: within {traffic}"
            else:
                text = (f"{head}: outside {traffic}; the estimate was "
                        f"{'pessimistic' if err > 0 else 'optimistic'}")
    return {"duplicates_error": err, "duplicates_tolerance_messages": tolerance,
            "duplicates_within_tolerance": within, "duplicates_judgement": text}


def error(estimated: float | None, observed: float | None) -> float | None:
    """Estimate minus observation (positive = the estimate was pessimistic)."""
    if estimated is None or observed is None:
        return None
    return float(estimated) - float(observed)


def targets_for(run_start: dict | None, cli: dict) -> dict:
    """SLA targets: the command line wins over the run record's ``targets``."""
    rec = (run_start or {}).get("targets") or {}
    out = {}
    for key in ("rpo_seconds", "rpo_messages", "rto_seconds"):
        value = cli.get(key)
        out[key] = value if value is not None else rec.get(key)
    return out


#: SLA target -> the observation it is judged on.
OBSERVED = {"rpo_messages": "rpo_messages_observed", "rpo_seconds": "rpo_seconds_observed",
            "rto_seconds": "rto_seconds_observed"}


def verdict(observed: dict, targets: dict, not_applicable: tuple[str, ...] = ()) -> dict:
    """PASS / FAIL / UNKNOWN / n/a per target and overall, by the collection's one SLA rule (``sla.judge``).

    A target without an observation is UNKNOWN, and UNKNOWN fails the run like a missed target: a run whose RPO
    nobody measured (no ledger) must not read as within target. A target not set, or listed in
    ``not_applicable`` (the RTO of a run without a switch), is ``n/a``. Overall FAIL if any target fails or is
    unknown, PASS if at least one passes, else NO-TARGET."""
    values = {key: observed.get(obs_key) for key, obs_key in OBSERVED.items()}
    checks = sla.judge_all(values, {key: targets.get(key) for key in OBSERVED}, not_applicable)
    return {"overall": sla.overall(checks.values()), **checks}


def truncated_ledgers(writers: list[dict], ledger_ends: list[dict]) -> list[dict]:
    """Writers whose ledger has no ``ledger_end`` (cut off), or whose end record counts other records than read."""
    ends = {(e["run_id"], e["ledger"], e["writer"]): e for e in ledger_ends}
    out = []
    for w in writers:
        if w["writer"] is None:
            continue
        end = ends.get((w["run_id"], w["ledger"], w["writer"]))
        if end is None:
            out.append({**w, "problem": "no ledger_end record: ledger truncated at its last record",
                        "expected_records": None})
        elif end.get("records") is not None and int(end["records"]) != int(w["records"]):
            out.append({**w, "problem": f"ledger_end says {end['records']} records, {w['records']} were read",
                        "expected_records": end["records"]})
        elif end.get("clean") is False:
            out.append({**w, "problem": f"ledger closed uncleanly: {end.get('reason')}",
                        "expected_records": end.get("records")})
    return out
