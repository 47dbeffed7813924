"""Self-contained HTML report: inline SVG charts, inline CSS, a few lines of inline JS, no network access.

The first screen: the verdict and why, headline counts (sent, lost, duplicated, in doubt; late apart, defined on
the page), and one row per switch with RTO and RPO observed, estimated and against the targets. Charts (each an
``<svg class="chart" data-chart="...">``, every axis titled with its unit, switch starts marked and named): lag
over time per run, phase timeline per run, estimate vs observed per switch, trends across runs. The script only
adds hover read-outs and marks the page ready (``data-report-ready="1"`` on body); a script error sets
``data-script-error`` and shows a red banner, which the browser test looks for.
"""

from __future__ import annotations

import datetime
import html
from typing import Any

W, H = 900, 250
LEFT, RIGHT, TOP, BOTTOM = 70, 16, 40, 46  # plot margins inside a chart: y tick labels, axis titles, markers
COLORS = {"dc1": "#1f77b4", "dc2": "#d62728"}
PHASE_COLORS = {"pass": "#2ca02c", "done": "#1f77b4", "skipped": "#9e9e9e", "fail": "#d62728", "rollback": "#ff7f0e"}


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v))


def _fmt(v: Any, nd: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _ts(v: float | None) -> str:
    if v is None:
        return "-"
    return datetime.datetime.fromtimestamp(v, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _clock(v: float | None) -> str:
    if v is None:
        return "-"
    return datetime.datetime.fromtimestamp(v, datetime.UTC).strftime("%H:%M:%S") + " UTC"


def _scale(v: float, lo: float, hi: float, a: float, b: float) -> float:
    if hi <= lo:
        return (a + b) / 2
    return a + (v - lo) * (b - a) / (hi - lo)


def _tick(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}".rstrip("0").rstrip(".")
    return f"{v:.2f}".rstrip("0").rstrip(".")


def _frame(title: str, x_label: str, y_label: str, x_range: tuple[float, float], y_range: tuple[float, float] | None,
           height: int, left: int = LEFT, y_fmt=_tick) -> str:
    """Title, both axes with 5 labelled ticks each and both axis titles (the y title rotated along its axis)."""
    x0, x1 = x_range
    bottom = height - BOTTOM
    parts = [f'<text x="{left}" y="16" class="t">{_e(title)}</text>',
             f'<line x1="{left}" y1="{bottom}" x2="{W - RIGHT}" y2="{bottom}" class="ax"/>',
             f'<text x="{(left + W - RIGHT) / 2:.0f}" y="{height - 6}" text-anchor="middle" class="l axis-title">'
             f'{_e(x_label)}</text>']
    for i in range(5):
        v = x0 + (x1 - x0) * i / 4
        x = _scale(v, x0, x1, left, W - RIGHT)
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        parts.append(f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" class="ax"/>'
                     f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="{anchor}" class="l tick">{_tick(v)}</text>')
    if y_range is not None:
        y0, y1 = y_range
        parts.append(f'<line x1="{left}" y1="{TOP}" x2="{left}" y2="{bottom}" class="ax"/>'
                     f'<text transform="translate(14 {(TOP + bottom) / 2:.0f}) rotate(-90)" text-anchor="middle" '
                     f'class="l axis-title">{_e(y_label)}</text>')
        for i in range(3):
            v = y0 + (y1 - y0) * i / 2
            y = _scale(v, y0, y1, bottom, TOP)
            parts.append(f'<line x1="{left - 4}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}" class="ax"/>'
                         f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="l tick">{y_fmt(v)}</text>')
    return "".join(parts)


def _switch_markers(run_id: str, switches: list[dict], t0: float, t1: float, left: int, top: int,
                    bottom: int) -> str:
    """A dashed vertical line per switch start with its name above the plot (staggered when they are close)."""
    parts, last_x, row = [], -1e9, 0
    for s in sorted((s for s in switches if s["run_id"] == run_id and t0 <= s["start_ts"] <= t1),
                    key=lambda s: s["start_ts"]):
        x = _scale(s["start_ts"], t0, t1, left, W - RIGHT)
        row = row + 1 if x - last_x < 110 else 0
        last_x = x
        label = switch_label(s)
        anchor = "end" if x > W - RIGHT - 100 else "start"
        dx = -3 if anchor == "end" else 3
        parts.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{bottom}" class="sw"><title>'
                     f'{_e(s["switch_id"])} started at {_e(_ts(s["start_ts"]))}</title></line>'
                     f'<text x="{x + dx:.1f}" y="{top - 8 + 10 * (row % 2)}" text-anchor="{anchor}" '
                     f'class="l swl">{_e(label)} &#x25BE;</text>')
    return "".join(parts)


def lag_chart(run_id: str, points: list[dict], switches: list[dict]) -> str:
    pts = [p for p in points if p["run_id"] == run_id]
    if not pts:
        return f'<p class="none">no lag samples for {_e(run_id)}</p>'
    t0, t1 = min(p["ts"] for p in pts), max(p["ts"] for p in pts)
    y_max = max([float(p["backlog"] or 0) for p in pts] + [1.0])
    bottom = H - BOTTOM
    sites = sorted({p["site"] for p in pts})
    parts = [f'<svg class="chart" data-chart="lag" data-run="{_e(run_id)}" viewBox="0 0 {W} {H}" '
             f'width="{W}" height="{H}" role="img">',
             _frame(f"Mirror backlog of each site — {run_id}", "seconds since the first lag sample",
                    "backlog (messages)", (0.0, t1 - t0), (0.0, y_max), H)]
    for site in sites:
        sp = sorted((p for p in pts if p["site"] == site), key=lambda p: p["ts"])
        coords = " ".join(f"{_scale(p['ts'], t0, t1, LEFT, W - RIGHT):.1f},"
                          f"{_scale(float(p['backlog'] or 0), 0, y_max, bottom, TOP):.1f}"
                          for p in sp if p["reachable"] != 0)
        color = COLORS.get(site, "#555")
        parts.append(f'<polyline class="series" data-site="{_e(site)}" points="{coords}" fill="none" '
                     f'stroke="{color}" stroke-width="1.5"><title>{_e(site)} backlog</title></polyline>')
        gaps = [p for p in sp if p["reachable"] == 0]
        if gaps:
            x = _scale(gaps[0]["ts"], t0, t1, LEFT, W - RIGHT)
            anchor = "end" if x > W - RIGHT - 120 else "start"
            parts.append(f'<text x="{x:.1f}" y="{bottom - 4}" text-anchor="{anchor}" class="l" fill="{color}">'
                         f'{_e(site)} unreachable</text>')
    parts.append(_switch_markers(run_id, switches, t0, t1, LEFT, TOP, bottom))
    legend = "".join(f'<tspan fill="{COLORS.get(s, "#555")}">&#9632; {_e(s)} </tspan>' for s in sites)
    parts.append(f'<text x="{W - RIGHT}" y="16" text-anchor="end" class="l">{legend}'
                 '<tspan fill="#000">┆ switch start</tspan></text></svg>')
    return "".join(parts)


def phase_chart(run_id: str, phases: list[dict], switches: list[dict] | None = None) -> str:
    ph = [p for p in phases if p["run_id"] == run_id]
    if not ph:
        return f'<p class="none">no phase records for {_e(run_id)}</p>'
    t0 = min(p["start_ts"] for p in ph)
    t1 = max((p["end_ts"] or p["start_ts"]) for p in ph)
    row_h, left = 18, 230
    height = TOP + row_h * len(ph) + BOTTOM
    bottom = height - BOTTOM
    parts = [f'<svg class="chart" data-chart="phases" data-run="{_e(run_id)}" viewBox="0 0 {W} {height}" '
             f'width="{W}" height="{height}" role="img">',
             _frame(f"Runbook phases — {run_id} ({_fmt(t1 - t0, 1)} s)", "seconds since the first phase started",
                    "", (0.0, t1 - t0), None, height, left=left),
             f'<text x="4" y="{TOP - 6}" class="l axis-title">runbook #execution phase</text>']
    for i, p in enumerate(ph):
        y = TOP + i * row_h
        x0 = _scale(p["start_ts"], t0, t1, left, W - RIGHT)
        x1 = _scale(p["end_ts"] or p["start_ts"], t0, t1, left, W - RIGHT)
        color = PHASE_COLORS.get(p.get("decision") or "", "#555")
        label = f"{p['runbook']} #{p['execution']} {p['phase']}"
        if len(label) > 36:
            label = label[:35] + "…"
        parts.append(f'<text x="4" y="{y + 12}" class="l">{_e(label)}</text>'
                     f'<rect class="bar" x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 1.5):.1f}" height="{row_h - 4}" '
                     f'fill="{color}"><title>{_e(label)}: {_fmt(p["duration_seconds"])} s, {_e(p.get("decision"))}'
                     f'</title></rect>')
    parts.append(_switch_markers(run_id, switches or [], t0, t1, left, TOP, bottom))
    parts.append("</svg>")
    return "".join(parts)


def estimate_chart(switches: list[dict]) -> str:
    """Per switch: RTO (s) and RPO (messages) estimated vs observed, each pair of bars on its own scale."""
    metrics = [("RTO", "rto_seconds", "s"), ("RPO", "rpo_messages", "messages")]
    runs = {s["run_id"] for s in switches}
    groups = []
    for s in switches:
        for label, key, unit in metrics:
            obs, est = s.get(f"{key}_observed"), s.get(f"{key}_estimated")
            if obs is not None or est is not None:
                who = switch_label(s) if len(runs) == 1 else f"{s['run_id']} {switch_label(s)}"
                groups.append((who, f"{label} ({unit})", obs, est))
    if not groups:
        return '<p class="none">no estimates or observations</p>'
    row = 30
    height = TOP + row * len(groups) + BOTTOM
    x0, x1 = 360, W - 130
    parts = [f'<svg class="chart" data-chart="estimate" viewBox="0 0 {W} {height}" width="{W}" height="{height}" '
             'role="img"><text x="4" y="16" class="t">Estimated before the switch vs observed, per switch</text>'
             f'<text x="{W - RIGHT}" y="16" text-anchor="end" class="l"><tspan fill="#1f77b4">&#9632; observed</tspan>'
             ' <tspan fill="#ff7f0e">&#9632; estimated</tspan></text>'
             f'<text x="4" y="{TOP - 6}" class="l axis-title">run, switch and measure (unit)</text>'
             f'<line x1="{x0}" y1="{TOP - 2}" x2="{x0}" y2="{height - BOTTOM}" class="ax"/>'
             f'<line x1="{x0}" y1="{height - BOTTOM}" x2="{x1}" y2="{height - BOTTOM}" class="ax"/>'
             f'<text x="{x0}" y="{height - BOTTOM + 14}" class="l tick">0</text>'
             f'<text x="{x1}" y="{height - BOTTOM + 14}" text-anchor="end" class="l tick">the larger of the two</text>'
             f'<text x="{(x0 + x1) / 2:.0f}" y="{height - 6}" text-anchor="middle" class="l axis-title">'
             'bar length: value in the unit of its row, each row scaled to its larger value</text>']
    for i, (who, label, obs, est) in enumerate(groups):
        y = TOP + i * row
        rmax = max([float(v) for v in (obs, est) if v is not None] + [1e-9])
        parts.append(f'<text x="4" y="{y + 14}" class="l">{_e(who)} {_e(label)}</text>')
        if obs is not None:
            parts.append(f'<rect class="bar obs" x="{x0}" y="{y}" '
                         f'width="{_scale(float(obs), 0, rmax, 0, x1 - x0):.1f}" '
                         f'height="11" fill="#1f77b4"><title>observed {_fmt(obs)}</title></rect>'
                         f'<text x="{x1 + 6}" y="{y + 9}" class="l">observed {_e(_fmt(obs, 2))}</text>')
        if est is not None:
            parts.append(f'<rect class="bar est" x="{x0}" y="{y + 12}" '
                         f'width="{_scale(float(est), 0, rmax, 0, x1 - x0):.1f}" height="11" fill="#ff7f0e" '
                         f'opacity="0.8"><title>estimated {_fmt(est)}</title></rect>'
                         f'<text x="{x1 + 6}" y="{y + 21}" class="l">estimated {_e(_fmt(est, 2))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def trend_chart(runs: list[dict]) -> str:
    rs = [r for r in runs if r.get("start_ts") is not None]
    if len(rs) < 2:
        return '<p class="none">trends need two or more runs</p>'
    series = [("lost", "lost messages", "#d62728"), ("duplicated", "duplicated messages", "#ff7f0e"),
              ("rto_seconds_observed", "RTO observed (s)", "#1f77b4")]
    bottom = H - BOTTOM
    parts = [f'<svg class="chart" data-chart="trend" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img">',
             _frame("Trends across runs (each series scaled to its own maximum)",
                    f"run number, oldest to newest (1 to {len(rs)})", "% of the series' maximum",
                    (1.0, float(len(rs))), (0.0, 100.0), H)]
    legend = []
    for key, label, color in series:
        vals = [float(r.get(key) or 0) for r in rs]
        vmax = max([*vals, 1e-09])
        coords = " ".join(f"{_scale(i, 0, len(rs) - 1, LEFT, W - RIGHT):.1f},{_scale(v, 0, vmax, bottom, TOP):.1f}"
                          for i, v in enumerate(vals))
        parts.append(f'<polyline class="series" data-series="{key}" points="{coords}" fill="none" stroke="{color}" '
                     f'stroke-width="2"><title>{_e(label)} (max {_fmt(vmax)})</title></polyline>')
        legend.append(f'<tspan fill="{color}">&#9632; {_e(label)}, max {_e(_fmt(vmax, 2))} </tspan>')
    parts.append(f'<text x="{W - RIGHT}" y="32" text-anchor="end" class="l">{"".join(legend)}</text></svg>')
    return "".join(parts)


# Column headers a person reads (with units); keys are the summary's field names.
HEADERS = {
    "run_id": "Run", "scenario": "Scenario", "verdict": "Verdict", "address": "Address", "msg_id": "Message id",
    "sent_messages": "Messages sent", "confirmed_messages": "Confirmed by the broker",
    "received_messages": "Received (messages)", "received_records": "Deliveries", "lost": "Lost",
    "in_doubt": "In doubt", "in_doubt_received": "In doubt, yet received", "duplicated": "Duplicated",
    "duplicated_redelivery": "Duplicated by broker redelivery", "duplicated_distinct": "Duplicated as distinct copies",
    "late": "Late (delivered, not loss)", "out_of_order": "Out of order", "unexpected": "Received, never sent",
    "status": "Status", "duplicate": "Duplicate kind", "send_site": "Sent to site",
    "first_recv_site": "First received on site", "n_recv": "Deliveries",
    "rpo_messages_estimated": "RPO estimated (messages)", "rpo_messages_observed": "RPO observed (messages)",
    "rpo_messages_error": "RPO error (messages)", "rpo_seconds_estimated": "RPO estimated (s)",
    "rpo_seconds_observed": "RPO observed (s)", "rpo_seconds_error": "RPO error (s)",
    "rto_seconds_estimated": "RTO estimated (s)", "rto_seconds_observed": "RTO observed (s)",
    "rto_seconds_error": "RTO error (s)", "runbook": "Runbook", "execution": "Execution", "phase": "Phase",
    "duration_seconds": "Duration (s)", "decision": "Decision", "origin_site": "From site", "target_site": "To site",
    "canaries": "Canaries", "seen": "Seen", "timeout": "Timed out", "p50": "Latency p50 (s)",
    "p90": "Latency p90 (s)", "p99": "Latency p99 (s)", "max": "Latency max (s)", "ledger": "Ledger",
    "writer": "Writer", "records": "Records read", "problem": "Problem", "severity": "Severity", "file": "File",
    "line": "Line", "reason": "Reason",
}
WRAP = {"run_id", "address", "msg_id", "file", "reason", "problem", "writer"}  # long values that may break anywhere


def _table(rows: list[dict], cols: list[str], cls: str = "", nd: int = 3) -> str:
    head = "".join(f"<th>{_e(HEADERS.get(c, c))}</th>" for c in cols)
    body = "".join("<tr>" + "".join(
        f"<td{' class=wrap' if c in WRAP else ''}>{_e(_fmt(r.get(c), nd))}</td>" for c in cols) + "</tr>"
        for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


CSS = """*{box-sizing:border-box}body{font:14px system-ui,sans-serif;margin:24px;color:#222;max-width:1232px}
h1{margin:0 0 4px;font-size:26px}h2{margin-top:28px;font-size:19px}
table{border-collapse:collapse;margin:8px 0;max-width:100%}td,th{border:1px solid #ccc;padding:3px 7px;
text-align:right;vertical-align:top}th{background:#f3f3f3;font-weight:600;white-space:normal;max-width:9em}
td:first-child,th:first-child{text-align:left}td.wrap{overflow-wrap:anywhere;max-width:18em;text-align:left}
.PASS{color:#2ca02c;font-weight:bold}.FAIL,.UNKNOWN{color:#d62728;font-weight:bold}.NO-TARGET,.n\\/a{color:#666}
.t{font-weight:bold;font-size:13px}.l{font-size:11px}.ax{stroke:#888}.tick{fill:#444}.axis-title{fill:#333;
font-style:italic}.swl{fill:#000}.sw{stroke:#000;stroke-dasharray:4 3}.none{color:#888}
#script-error{background:#d62728;color:#fff;padding:8px}
svg.chart{display:block;margin:8px 0;background:#fcfcfc;border:1px solid #eee;max-width:100%;height:auto}
#hover{position:fixed;right:8px;top:8px;background:#fff;border:1px solid #ccc;padding:4px 8px;font-size:12px;
max-width:300px}
.banner{padding:10px 14px;border-radius:4px;margin:6px 0 10px}.banner.PASS{background:#e8f5e9}
.banner.FAIL{background:#fdecea}.banner.NO-TARGET{background:#f3f3f3}
.tiles{display:flex;flex-wrap:wrap;gap:10px;margin:8px 0}.tile{border:1px solid #ddd;border-radius:4px;
padding:6px 12px;min-width:130px}.tile b{display:block;font-size:24px}.tile.bad b{color:#d62728}
.tile.soft b{color:#666}.note{color:#555;max-width:1180px}dl.defs{display:grid;grid-template-columns:9em 1fr;
gap:2px 12px;max-width:1180px}dl.defs dt{font-weight:600}dl.defs dd{margin:0}
table.switches td{white-space:nowrap}table.switches td.wrap{white-space:normal;overflow-wrap:normal;
word-break:normal}td.left{text-align:left}"""

JS = """(function(){
  window.addEventListener('error', function(e){
    document.body.setAttribute('data-script-error', String(e.message));
    var d=document.createElement('div'); d.id='script-error'; d.textContent='script error: '+e.message;
    document.body.insertBefore(d, document.body.firstChild);
  });
  var hover=document.getElementById('hover');
  document.querySelectorAll('svg.chart title').forEach(function(t){
    var el=t.parentNode;
    el.addEventListener('mouseenter', function(){ hover.textContent=t.textContent; });
  });
  document.body.setAttribute('data-report-ready', String(document.querySelectorAll('svg.chart').length));
})();"""

def _check_cell(check: str | None) -> str:
    c = check or "n/a"
    return f"<td class='{_e(c)}'>{_e(c)}</td>"


def _target(v: Any, unit: str) -> str:
    return "no target" if v is None else f"≤ {_fmt(v, 2)}{unit}"


def switch_label(s: dict) -> str:
    """``swapover#2``, ``failover`` (its id carries the incident time, shown in its own column), ..."""
    return s["kind"] if s["switch_id"].startswith(f"{s['kind']}@") else s["switch_id"]


def _switch_table(switches: list[dict]) -> str:
    head = ["Run", "Switch", "From → to", "Started", "RTO observed (s)", "RTO estimated (s)", "RTO target",
            "RTO", "RPO observed (messages / s)", "RPO estimated (messages / s)", "RPO target", "RPO"]
    rows = []
    for s in switches:
        checks = s.get("checks") or {}
        rpo_checks = [checks.get("rpo_messages"), checks.get("rpo_seconds")]
        rpo = next((c for c in ("FAIL", "UNKNOWN", "PASS") if c in rpo_checks), "n/a")
        rpo_target = " and ".join(x for x in (
            None if s.get("target_rpo_messages") is None else _target(s["target_rpo_messages"], " messages"),
            None if s.get("target_rpo_seconds") is None else _target(s["target_rpo_seconds"], " s")) if x)
        rows.append(
            f"<tr><td class=wrap>{_e(s['run_id'])}</td><td class=left>{_e(switch_label(s))}</td>"
            f"<td class=left>{_e(s.get('old_site'))} → {_e(s.get('new_site'))}</td>"
            f"<td class=left>{_e(_clock(s.get('start_ts')))}</td>"
            f"<td><b>{_e(_fmt(s.get('rto_seconds_observed'), 2))}</b></td>"
            f"<td>{_e(_fmt(s.get('rto_seconds_estimated'), 2))}</td>"
            f"<td>{_e(_target(s.get('target_rto_seconds'), ' s'))}</td>{_check_cell(checks.get('rto_seconds'))}"
            f"<td><b>{_e(_fmt(s.get('rpo_messages_observed'), 0))}</b> / {_e(_fmt(s.get('rpo_seconds_observed'), 2))}"
            f"</td><td>{_e(_fmt(s.get('rpo_messages_estimated'), 1))} / {_e(_fmt(s.get('rpo_seconds_estimated'), 2))}"
            f"</td><td>{_e(rpo_target or 'no target')}</td>{_check_cell(rpo)}</tr>")
    return ("<table id='switches' class='switches'><thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


DUPLICATE_COLUMNS = [
    ("duplicates_observed", "Observed: delivered across the switch (messages)", 0),
    ("duplicates_at_risk_estimated", "Estimated by the plugin before the switch (messages)", 1),
    ("duplicates_error", "Error, estimated minus observed (messages)", 1),
    ("duplicates_tolerance_messages", "One sample interval's traffic (messages)", 0),
    ("duplicates_at_risk_ack_batching", "Ack-batching bound from the run parameters (messages)", 0),
]


def _duplicates_table(switches: list[dict]) -> str:
    """Per switch: the duplicates the ledgers observed against the plugin's estimate, with the judgement."""
    head = (["Run", "Switch", "From → to"] + [h for _c, h, _n in DUPLICATE_COLUMNS] + ["Judgement"])
    rows = []
    for s in switches:
        cells = "".join(f"<td>{_e(_fmt(s.get(c), nd))}</td>" for c, _h, nd in DUPLICATE_COLUMNS)
        within = s.get("duplicates_within_tolerance")
        cls = {True: "PASS", False: "FAIL"}.get(within, "n/a")
        rows.append(f"<tr><td class=wrap>{_e(s['run_id'])}</td><td class=left>{_e(switch_label(s))}</td>"
                    f"<td class=left>{_e(s.get('old_site'))} → {_e(s.get('new_site'))}</td>{cells}"
                    f"<td class='wrap {cls}'>{_e(s.get('duplicates_judgement') or '-')}</td></tr>")
    return ("<table id='duplicates' class='switches'><thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _verdict_text(result: dict) -> str:
    runs = result["runs"]
    names = {"rpo_messages": "RPO in messages", "rpo_seconds": "RPO in seconds", "rto_seconds": "RTO"}
    failed = []
    for r in runs:
        if r["verdict"] == "FAIL":
            # UNKNOWN fails a run too (the SLA rule, module_utils/sla.py): say it was not measured
            missed = [names[k] + (" (not measured)" if v == "UNKNOWN" else "")
                      for k, v in (r.get("checks") or {}).items() if k in names and v in ("FAIL", "UNKNOWN")]
            failed.append(f"{r['run_id']}: {', '.join(missed)}")
    if failed:
        return "missed target(s) — " + "; ".join(failed)
    if result["verdict"] == "PASS":
        return f"every run met its RPO and RTO targets ({len(runs)} run(s), {len(result['switches'])} switch(es))"
    return "no run had a target to judge against (set --rpo-seconds, --rpo-messages, --rto-seconds)"


def _sum(runs: list[dict], key: str) -> int:
    return int(sum(r.get(key) or 0 for r in runs))


def _tile(label: str, value: int, bad: bool = False, soft: bool = False, ident: str = "") -> str:
    cls = "tile bad" if bad and value else "tile soft" if soft else "tile"
    return f"<div class='{cls}' id='{ident}'><b>{value:,}</b>{_e(label)}</div>"


def render(result: dict, lag_points: list[dict], exceptions: list[dict]) -> str:
    runs = result["runs"]
    verdict = result["verdict"]
    late = _sum(runs, "late")
    out = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
           "<meta name='viewport' content='width=device-width'>",
           "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'; "
           "script-src 'unsafe-inline'; img-src data:\">",
           f"<title>continuity report: {_e(verdict)}</title><style>{CSS}</style></head><body>",
           "<div id='hover'>hover a chart element</div>",
           f"<h1>Continuity report — verdict <span class='{_e(verdict)}'>{_e(verdict)}</span></h1>",
           f"<div class='banner {_e(verdict)}' id='verdict'>{_e(_verdict_text(result))}</div>",
           "<div class='tiles' id='headline'>",
           _tile("messages sent", _sum(runs, "sent_messages"), ident="tile-sent"),
           _tile("lost", _sum(runs, "lost"), bad=True, ident="tile-lost"),
           _tile("duplicated", _sum(runs, "duplicated"), bad=True, ident="tile-duplicated"),
           _tile("in doubt", _sum(runs, "in_doubt"), bad=True, ident="tile-in-doubt"),
           _tile("late (delivered, not loss)", late, soft=True, ident="tile-late"),
           "</div>",
           "<h2>Switches: RTO and RPO against the targets</h2>",
           _switch_table(result["switches"]) if result["switches"] else "<p class='none'>no switch in the evidence</p>",
           "<p class='note'><b>RTO</b>: switch start (first runbook phase; for a failover the incident) to the first "
           "message received on the new active site. <b>RPO</b>: messages accepted on the old site since the "
           "previous switch and never received anywhere, and the seconds from the first to the last of them. "
           "<b>Estimated</b>: what the live lag signals of the old site predicted just before the switch "
           "(backlog, rates, runbook overhead).</p>",
           "<dl class='defs' id='definitions'>"
           "<dt>Lost</dt><dd>the broker confirmed the send, no consumer ever received it.</dd>"
           "<dt>Duplicated</dt><dd>confirmed and received more than once (broker redelivery, or distinct copies "
           "e.g. after a dropped mirrored acknowledgement).</dd>"
           "<dt>In doubt</dt><dd>the producer got no confirmation (timeout or error at a fence): neither lost nor "
           "duplicated, counted apart.</dd>"
           "<dt>Late</dt><dd>sent before the drill was declared over (end of the last failback, else the run's end) "
           "and first received after that: the message was still in flight or in a backlog. It <i>was</i> "
           "delivered, so it is not loss and not an exception; a large number means consumers were still catching "
           "up when the drill ended.</dd></dl>",
           f"<p class='note'>{len(runs)} run(s), {result['inputs']['files']} evidence file(s), "
           f"{result['inputs']['records']:,} valid records; bad input: {result['bad_input']['errors']} error(s), "
           f"{result['bad_input']['warnings']} warning(s); truncated ledgers: {len(result['truncated_ledgers'])}.</p>",
           "<h2>Verdict per run</h2>"]
    cols = [("run_id", "Run"), ("scenario", "Scenario"), ("verdict", "Verdict"),
            ("rpo_messages_observed", "RPO observed (messages)"), ("target_rpo_messages", "RPO target (messages)"),
            ("rpo_seconds_observed", "RPO observed (s)"), ("target_rpo_seconds", "RPO target (s)"),
            ("rto_seconds_observed", "RTO observed, slowest switch (s)"), ("target_rto_seconds", "RTO target (s)")]
    vrows = "".join("<tr>" + "".join(
        f"<td class='{_e(r['verdict']) if c == 'verdict' else 'wrap' if c == 'run_id' else ''}'>"
        f"{_e(_fmt(r.get(c)))}</td>" for c, _h in cols) + "</tr>" for r in runs)
    out.append("<table id='verdicts'><thead><tr>" + "".join(f"<th>{_e(h)}</th>" for _c, h in cols)
               + f"</tr></thead><tbody>{vrows}</tbody></table>")
    out.append("<h2>Loss and duplicates</h2>")
    out.append(_table(runs, ["run_id", "sent_messages", "confirmed_messages", "received_messages", "lost",
                             "in_doubt", "in_doubt_received", "duplicated", "duplicated_redelivery",
                             "duplicated_distinct", "out_of_order", "unexpected", "late"], "losstable"))
    out.append(_table(result["reconciliation"], ["run_id", "address", "sent_messages", "received_records", "lost",
                                                 "in_doubt", "duplicated", "out_of_order", "late"], "addresstable"))
    if exceptions:
        out.append(f"<details><summary>first {len(exceptions)} message exceptions: lost, in doubt, duplicated, "
                   "out of order, never sent (late messages are not listed here; all rows in "
                   "tables/message_exceptions)</summary>")
        out.append(_table(exceptions, ["run_id", "address", "msg_id", "status", "duplicate", "out_of_order",
                                       "send_site", "first_recv_site", "n_recv"], "exceptions"))
        out.append("</details>")
    else:
        out.append("<p class='none'>no lost, in-doubt, duplicated, out-of-order or unexpected message</p>")
    out.append("<h2>Estimated vs observed</h2>")
    out.append(estimate_chart(result["switches"]))
    out.append(_table(runs, ["run_id", "rpo_messages_estimated", "rpo_messages_observed", "rpo_messages_error",
                             "rpo_seconds_estimated", "rpo_seconds_observed", "rpo_seconds_error",
                             "rto_seconds_estimated", "rto_seconds_observed", "rto_seconds_error"]))
    out.append("<p class='note'>Error = estimated minus observed (positive: the estimate was pessimistic). "
               "Per run: RPO of the failover (else of every lost message), RTO of the slowest switch.</p>")
    if result["switches"]:
        out.append("<h3>Duplicates per switch: the plugin's estimate before it vs the ledgers</h3>")
        out.append(_duplicates_table(result["switches"]))
        out.append("<p class='note'><b>Observed</b>: messages first received on the old site after the previous "
                   "switch and received again after this one started (deliveries in flight and acknowledgements "
                   "the new site never got). <b>Estimated</b>: the continuity plugin's duplicates at risk in the "
                   "old site's last lag sample before the switch (its deliveries in flight plus its acks not yet "
                   "replicated; empty without the plugin). The estimate is judged within when it is off by at most "
                   "one sample interval's traffic: the interval between that sample and the one before it times "
                   "the old site's delivery rate over the 10 s before the switch.</p>")
    out.append("<h2>Lag over time and phase timeline</h2>")
    for r in runs:
        out.append(lag_chart(r["run_id"], lag_points, result["switches"]))
        out.append(phase_chart(r["run_id"], result["phases"], result["switches"]))
    out.append(_table(result["phases"], ["run_id", "runbook", "execution", "phase", "duration_seconds", "decision"]))
    out.append("<h2>Replication latency (canaries)</h2>")
    out.append(_table(result["canaries"], ["run_id", "origin_site", "target_site", "canaries", "seen", "timeout",
                                           "p50", "p90", "p99", "max"]))
    out.append("<h2>Trends across runs</h2>")
    out.append(trend_chart(runs))
    if result["truncated_ledgers"]:
        out.append("<h2>Ledger problems</h2>")
        out.append(_table(result["truncated_ledgers"], ["run_id", "ledger", "writer", "records", "problem"]))
    if result["bad_input"]["examples"]:
        out.append("<h2>Bad input</h2>")
        out.append(_table(result["bad_input"]["examples"][:100], ["severity", "file", "line", "reason"]))
    out.append(f"<script>{JS}</script></body></html>")
    return "\n".join(out)


def write_html(path: str, result: dict, lag_points: list[dict], exceptions: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render(result, lag_points, exceptions))
