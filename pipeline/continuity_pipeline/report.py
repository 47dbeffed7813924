"""Self-contained HTML report: inline SVG charts, inline CSS, a few lines of inline JS, no network access.

Charts (each an ``<svg class="chart" data-chart="...">``): lag over time per run, phase timeline per run,
estimate vs observed (RPO messages, RPO seconds, RTO seconds), trends across runs. The script only adds hover
read-outs and marks the page ready (``data-report-ready="1"`` on body); a script error sets
``data-script-error`` and shows a red banner, which the browser test looks for.
"""

from __future__ import annotations

import datetime
import html
from typing import Any

W, H, PAD = 900, 220, 48
COLORS = {"dc1": "#1f77b4", "dc2": "#d62728"}
PHASE_COLORS = {"pass": "#2ca02c", "done": "#1f77b4", "skipped": "#9e9e9e", "fail": "#d62728", "rollback": "#ff7f0e"}


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v))


def _fmt(v: Any, nd: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def _ts(v: float | None) -> str:
    if v is None:
        return "-"
    return datetime.datetime.fromtimestamp(v, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _scale(v: float, lo: float, hi: float, a: float, b: float) -> float:
    if hi <= lo:
        return (a + b) / 2
    return a + (v - lo) * (b - a) / (hi - lo)


def _axes(title: str, x_label: str, y_label: str, y_max: float) -> str:
    return (f'<text x="{PAD}" y="16" class="t">{_e(title)}</text>'
            f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 10}" y2="{H - PAD}" class="ax"/>'
            f'<line x1="{PAD}" y1="24" x2="{PAD}" y2="{H - PAD}" class="ax"/>'
            f'<text x="{W - 10}" y="{H - 12}" text-anchor="end" class="l">{_e(x_label)}</text>'
            f'<text x="4" y="34" class="l">{_e(y_label)} (max {_fmt(float(y_max), 1)})</text>')


def lag_chart(run_id: str, points: list[dict], switches: list[dict]) -> str:
    pts = [p for p in points if p["run_id"] == run_id]
    if not pts:
        return f'<p class="none">no lag samples for {_e(run_id)}</p>'
    t0, t1 = min(p["ts"] for p in pts), max(p["ts"] for p in pts)
    y_max = max([float(p["backlog"] or 0) for p in pts] + [1.0])
    parts = [f'<svg class="chart" data-chart="lag" data-run="{_e(run_id)}" viewBox="0 0 {W} {H}" '
             f'width="{W}" height="{H}" role="img">', _axes(f"mirror backlog over time — {run_id}",
                                                            f"{_fmt(t1 - t0, 1)} s", "events", y_max)]
    for site in sorted({p["site"] for p in pts}):
        sp = sorted((p for p in pts if p["site"] == site), key=lambda p: p["ts"])
        coords = " ".join(f"{_scale(p['ts'], t0, t1, PAD, W - 10):.1f},"
                          f"{_scale(float(p['backlog'] or 0), 0, y_max, H - PAD, 24):.1f}"
                          for p in sp if p["reachable"] != 0)
        color = COLORS.get(site, "#555")
        parts.append(f'<polyline class="series" data-site="{_e(site)}" points="{coords}" fill="none" '
                     f'stroke="{color}" stroke-width="1.5"><title>{_e(site)} backlog</title></polyline>')
        gaps = [p for p in sp if p["reachable"] == 0]
        if gaps:
            x = _scale(gaps[0]["ts"], t0, t1, PAD, W - 10)
            parts.append(f'<text x="{x:.1f}" y="{H - PAD - 4}" class="l" fill="{color}">{_e(site)} unreachable</text>')
    for s in switches:
        if s["run_id"] == run_id and t0 <= s["start_ts"] <= t1:
            x = _scale(s["start_ts"], t0, t1, PAD, W - 10)
            parts.append(f'<line x1="{x:.1f}" y1="24" x2="{x:.1f}" y2="{H - PAD}" class="sw"><title>'
                         f'{_e(s["switch_id"])} at {_e(_ts(s["start_ts"]))}</title></line>')
    legend = "".join(f'<tspan fill="{COLORS.get(s, "#555")}">&#9632; {_e(s)} </tspan>'
                     for s in sorted({p["site"] for p in pts}))
    parts.append(f'<text x="{W - 10}" y="16" text-anchor="end" class="l">{legend}</text></svg>')
    return "".join(parts)


def phase_chart(run_id: str, phases: list[dict]) -> str:
    ph = [p for p in phases if p["run_id"] == run_id]
    if not ph:
        return f'<p class="none">no phase records for {_e(run_id)}</p>'
    t0 = min(p["start_ts"] for p in ph)
    t1 = max((p["end_ts"] or p["start_ts"]) for p in ph)
    row_h = 18
    height = 40 + row_h * len(ph) + 20
    parts = [f'<svg class="chart" data-chart="phases" data-run="{_e(run_id)}" viewBox="0 0 {W} {height}" '
             f'width="{W}" height="{height}" role="img">',
             f'<text x="{PAD}" y="16" class="t">phase timeline — {_e(run_id)} ({_fmt(t1 - t0, 3)} s)</text>']
    for i, p in enumerate(ph):
        y = 30 + i * row_h
        x0 = _scale(p["start_ts"], t0, t1, 220, W - 10)
        x1 = _scale(p["end_ts"] or p["start_ts"], t0, t1, 220, W - 10)
        color = PHASE_COLORS.get(p.get("decision") or "", "#555")
        label = f"{p['runbook']}#{p['execution']} {p['phase']}"
        parts.append(f'<text x="4" y="{y + 12}" class="l">{_e(label)}</text>'
                     f'<rect class="bar" x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 1.5):.1f}" height="{row_h - 4}" '
                     f'fill="{color}"><title>{_e(label)}: {_fmt(p["duration_seconds"])} s, {_e(p.get("decision"))}'
                     f'</title></rect>')
    parts.append("</svg>")
    return "".join(parts)


def estimate_chart(runs: list[dict]) -> str:
    metrics = [("RPO messages", "rpo_messages"), ("RPO seconds", "rpo_seconds"), ("RTO seconds", "rto_seconds")]
    groups = []
    for r in runs:
        for label, key in metrics:
            obs, est = r.get(f"{key}_observed"), r.get(f"{key}_estimated")
            if obs is not None or est is not None:
                groups.append((f"{r['run_id']} {label}", obs, est))
    if not groups:
        return '<p class="none">no estimates or observations</p>'
    height = 40 + 26 * len(groups) + 20
    parts = [f'<svg class="chart" data-chart="estimate" viewBox="0 0 {W} {height}" width="{W}" height="{height}" '
             'role="img"><text x="4" y="16" class="t">estimated (orange) vs observed (blue), each row on its own '
             'scale</text>']
    for i, (label, obs, est) in enumerate(groups):
        y = 30 + i * 26
        # each row has its own scale: messages and seconds are not comparable
        rmax = max([float(v) for v in (obs, est) if v is not None] + [1e-9])
        parts.append(f'<text x="4" y="{y + 14}" class="l">{_e(label)}</text>')
        if obs is not None:
            parts.append(f'<rect class="bar obs" x="300" y="{y}" width="{_scale(float(obs), 0, rmax, 0, 480):.1f}" '
                         f'height="10" fill="#1f77b4"><title>observed {_fmt(obs)}</title></rect>'
                         f'<text x="790" y="{y + 9}" class="l">obs {_e(_fmt(obs))}</text>')
        if est is not None:
            parts.append(f'<rect class="bar est" x="300" y="{y + 11}" width="{_scale(float(est), 0, rmax, 0, 480):.1f}"'
                         f' height="10" fill="#ff7f0e" opacity="0.7"><title>estimated {_fmt(est)}</title></rect>'
                         f'<text x="790" y="{y + 20}" class="l">est {_e(_fmt(est))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def trend_chart(runs: list[dict]) -> str:
    rs = [r for r in runs if r.get("start_ts") is not None]
    if len(rs) < 2:
        return '<p class="none">trends need two or more runs</p>'
    series = [("lost", "#d62728"), ("duplicated", "#ff7f0e"), ("rto_seconds_observed", "#1f77b4")]
    parts = [f'<svg class="chart" data-chart="trend" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img">',
             _axes("trends across runs (each series scaled to its own maximum)", f"{len(rs)} runs", "relative", 1.0)]
    for key, color in series:
        vals = [float(r.get(key) or 0) for r in rs]
        vmax = max([*vals, 1e-09])
        coords = " ".join(f"{_scale(i, 0, len(rs) - 1, PAD, W - 10):.1f},{_scale(v, 0, vmax, H - PAD, 24):.1f}"
                          for i, v in enumerate(vals))
        parts.append(f'<polyline class="series" data-series="{key}" points="{coords}" fill="none" stroke="{color}" '
                     f'stroke-width="2"><title>{key} (max {_fmt(vmax)})</title></polyline>')
    parts.append("</svg>")
    return "".join(parts)


def _table(rows: list[dict], cols: list[str], cls: str = "") -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{_e(_fmt(r.get(c)))}</td>" for c in cols) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


CSS = """body{font:14px system-ui,sans-serif;margin:24px;color:#222}h1{margin:0 0 4px}h2{margin-top:28px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td:first-child{text-align:left}.PASS{color:#2ca02c;font-weight:bold}
.FAIL{color:#d62728;font-weight:bold}.t{font-weight:bold;font-size:13px}.l{font-size:11px}.ax{stroke:#888}
.sw{stroke:#000;stroke-dasharray:4 3}.none{color:#888}#script-error{background:#d62728;color:#fff;padding:8px}
svg.chart{display:block;margin:8px 0;background:#fcfcfc;border:1px solid #eee}#hover{position:fixed;right:8px;
top:8px;background:#fff;border:1px solid #ccc;padding:4px 8px;font-size:12px}"""

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


def render(result: dict, lag_points: list[dict], exceptions: list[dict]) -> str:
    runs = result["runs"]
    verdict = result["verdict"]
    out = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
           "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'; "
           "script-src 'unsafe-inline'; img-src data:\">",
           f"<title>continuity report: {_e(verdict)}</title><style>{CSS}</style></head><body>",
           "<div id='hover'>hover a chart element</div>",
           f"<h1>Continuity report — verdict <span class='{_e(verdict)}'>{_e(verdict)}</span></h1>",
           f"<p>{len(runs)} run(s), {result['inputs']['files']} evidence file(s), "
           f"{result['inputs']['records']:,} valid records; bad input: {result['bad_input']['errors']} error(s), "
           f"{result['bad_input']['warnings']} warning(s); truncated ledgers: {len(result['truncated_ledgers'])}.</p>",
           "<h2>Verdict per run</h2>"]
    cols = ["run_id", "scenario", "verdict", "rpo_messages_observed", "target_rpo_messages", "rpo_seconds_observed",
            "target_rpo_seconds", "rto_seconds_observed", "target_rto_seconds"]
    vrows = "".join("<tr>" + "".join(
        f"<td class='{_e(r['verdict']) if c == 'verdict' else ''}'>{_e(_fmt(r.get(c)))}</td>" for c in cols) + "</tr>"
                    for r in runs)
    out.append("<table id='verdicts'><thead><tr>" + "".join(f"<th>{_e(c)}</th>" for c in cols)
               + f"</tr></thead><tbody>{vrows}</tbody></table>")
    out.append("<h2>Loss and duplicates</h2>")
    out.append(_table(runs, ["run_id", "sent_messages", "confirmed_messages", "received_messages", "lost",
                             "in_doubt", "in_doubt_received", "duplicated", "duplicated_redelivery",
                             "duplicated_distinct", "late", "out_of_order", "unexpected"], "losstable"))
    out.append(_table(result["reconciliation"], ["run_id", "address", "sent_messages", "received_records", "lost",
                                                 "in_doubt", "duplicated", "late", "out_of_order"], "addresstable"))
    if exceptions:
        out.append(f"<details><summary>first {len(exceptions)} message exceptions (all in "
                   "tables/message_exceptions)</summary>")
        out.append(_table(exceptions, ["run_id", "address", "msg_id", "status", "duplicate", "late", "out_of_order",
                                       "send_site", "first_recv_site", "n_recv"]))
        out.append("</details>")
    out.append("<h2>Estimated vs observed</h2>")
    out.append(estimate_chart(runs))
    out.append(_table(runs, ["run_id", "rpo_messages_estimated", "rpo_messages_observed", "rpo_messages_error",
                             "rpo_seconds_estimated", "rpo_seconds_observed", "rpo_seconds_error",
                             "rto_seconds_estimated", "rto_seconds_observed", "rto_seconds_error"]))
    out.append("<h2>Lag over time and phase timeline</h2>")
    for r in runs:
        out.append(lag_chart(r["run_id"], lag_points, result["switches"]))
        out.append(phase_chart(r["run_id"], result["phases"]))
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
