"""Rendering of engine snapshots: a live block on a terminal, one log line otherwise (pure functions)."""

from __future__ import annotations

from typing import Any


def rates(prev: dict[str, Any] | None, cur: dict[str, Any]) -> tuple[float, float]:
    """(accepted sends/s, received/s) between two snapshots."""
    if not prev:
        return 0.0, 0.0
    dt = max(1e-6, cur["elapsed"] - prev["elapsed"])
    sent = (cur["sent"].get("accepted", 0) - prev["sent"].get("accepted", 0)) / dt
    recv = (cur["received"] - prev["received"]) / dt
    return sent, recv


def _sites(snap: dict[str, Any]) -> str:
    counts: dict[str, int] = {}
    for site in snap["sites"].values():
        key = site or "-"
        counts[key] = counts.get(key, 0) + 1
    return " ".join(f"{k}:{v}" for k, v in sorted(counts.items())) or "-"


def log_line(prev: dict[str, Any] | None, snap: dict[str, Any]) -> str:
    s_rate, r_rate = rates(prev, snap)
    sent = snap["sent"]
    last_err = snap["errors"][-1]["message"] if snap["errors"] else ""
    return (f"[{snap['state']}] t={snap['elapsed']:.0f}s sent={sent.get('accepted', 0)} ({s_rate:.0f}/s) "
            f"in_doubt={sent.get('in_doubt', 0)} inflight={snap['in_flight']} recv={snap['received']} "
            f"({r_rate:.0f}/s) redelivered={snap['redelivered']} backlog~{snap['backlog_estimate']} "
            f"clients@{_sites(snap)} disconnects={snap['disconnects']}" + (f" last_error={last_err}" if last_err
                                                                               else ""))


def live_block(prev: dict[str, Any] | None, snap: dict[str, Any], width: int = 100) -> list[str]:
    s_rate, r_rate = rates(prev, snap)
    sent = snap["sent"]
    lines = [
        f"continuity-traffic  run {snap['run_id']}  [{snap['state']}]  {snap['elapsed']:.0f}s"
        + (f" / {snap['duration']:.0f}s" if snap["duration"] else ""),
        f"  send  {s_rate:8.0f}/s  accepted {sent.get('accepted', 0):>9}  in-flight {snap['in_flight']:>6}  "
        f"in-doubt {sent.get('in_doubt', 0):>5}  resends {snap['resends']:>5}  rejected {sent.get('rejected', 0)}",
        f"  recv  {r_rate:8.0f}/s  received {snap['received']:>9}  acked {snap['acked']:>9}  "
        f"redelivered {snap['redelivered']:>5}  backlog~{snap['backlog_estimate']}",
        f"  clients by site: {_sites(snap)}   disconnects {snap['disconnects']}",
    ]
    for err in snap["errors"][-3:]:
        lines.append(f"  ! {err['client']}: {err['message']}"[:width])
    return [line[:width] for line in lines]
