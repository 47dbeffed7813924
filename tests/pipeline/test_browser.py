"""The HTML report opens in headless Chromium without script errors, shows its charts, and fits a 1,280 px wide
window: nothing is cut off (page, tables, cells, chart text), the first screen holds the verdict, the headline
counts and the per-switch RTO/RPO table, headers are words with units, every chart has axis titles."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts"

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def chromium():
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (make browser installs it)")
    return CHROMIUM


def test_report_renders_charts_in_chromium(chromium, pipeline_result, tmp_path):
    out, _result, _truths = pipeline_result
    report = out / "report.html"
    url = report.resolve().as_uri()
    dom = subprocess.run([chromium, *FLAGS, f"--user-data-dir={tmp_path / 'p1'}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert 'data-report-ready="' in re.search(r"<body([^>]*)>", dom).group(1), "the report script did not run"
    body = re.search(r"<body([^>]*)>", dom).group(1)
    assert "data-script-error" not in body, body  # set by the report's error handler
    assert '<div id="script-error"' not in dom
    charts = re.findall(r'<svg class="chart" data-chart="(\w+)"', dom)
    assert {"lag", "phases", "estimate", "trend"} <= set(charts)
    assert len(re.findall(r'<polyline class="series"', dom)) >= 4  # 2 runs x 2 sites of lag lines
    assert int(re.search(r'data-report-ready="(\d+)"', dom).group(1)) == len(charts)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    png = ARTIFACTS / "pipeline-report.png"
    if png.exists():
        png.unlink()
    subprocess.run([chromium, *FLAGS, f"--user-data-dir={tmp_path / 'p2'}", f"--screenshot={png}",
                    "--window-size=1280,2000", url], capture_output=True, timeout=120, check=True)
    assert png.exists() and png.stat().st_size > 10_000
    shutil.copy(report, ARTIFACTS / "pipeline-report.html")


# Injected after the report's own script into a copy of the page (the report's CSP allows inline scripts): opens
# every <details>, then measures the layout and writes what it found into <body data-layout="...">.
LAYOUT_CHECK = """<script>(function(){
  document.querySelectorAll('details').forEach(function(d){ d.open = true; });
  var W = document.documentElement.clientWidth, problems = [];
  function name(el){ return el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
      (el.getAttribute('class') ? '.' + el.getAttribute('class').split(' ').join('.') : '') +
      ' "' + (el.textContent || '').trim().slice(0, 40) + '"'; }
  if (document.documentElement.scrollWidth > W) problems.push('page is ' + document.documentElement.scrollWidth +
      ' px wide, window ' + W);
  document.querySelectorAll('body *').forEach(function(el){
    if (el.closest('#hover') || el.closest('svg')) return;
    var r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) return;
    if (r.right > W + 0.5 || r.left < -0.5) problems.push(name(el) + ' spans x ' + Math.round(r.left) + '..' +
        Math.round(r.right));
    if ((el.tagName === 'TD' || el.tagName === 'TH' || getComputedStyle(el).overflowX !== 'visible')
        && el.scrollWidth > el.clientWidth + 1) problems.push(name(el) + ' content wider than its box');
  });
  document.querySelectorAll('svg.chart').forEach(function(svg){
    var s = svg.getBoundingClientRect();
    svg.querySelectorAll('text').forEach(function(t){
      var r = t.getBoundingClientRect();
      if (r.left < s.left - 0.5 || r.right > s.right + 0.5 || r.top < s.top - 0.5 || r.bottom > s.bottom + 0.5)
        problems.push(svg.getAttribute('data-chart') + ' chart: text "' + t.textContent + '" outside the chart');
    });
  });
  var bottom = {};
  ['verdict', 'headline', 'switches'].forEach(function(id){
    var el = document.getElementById(id); bottom[id] = el ? Math.round(el.getBoundingClientRect().bottom) : null; });
  document.body.setAttribute('data-layout', JSON.stringify({window: window.innerWidth, width: W, problems: problems,
      bottom: bottom}));
})();</script>"""


def _dump(chromium: str, url: str, profile, width: int = 1280, height: int = 800) -> str:
    return subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                           "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True).stdout


def test_report_fits_1280_px_and_first_screen_has_the_headline(chromium, pipeline_result, tmp_path):
    out, result, _truths = pipeline_result
    page = (out / "report.html").read_text()
    checked = tmp_path / "report-checked.html"
    checked.write_text(page.replace("</body>", LAYOUT_CHECK + "</body>"))
    dom = _dump(chromium, checked.resolve().as_uri(), tmp_path / "p3")
    body = re.search(r"<body([^>]*)>", dom).group(1)
    assert "data-script-error" not in body, body
    layout = json.loads(html.unescape(re.search(r'data-layout="([^"]*)"', body).group(1)))
    # a 1,280 px window; the page must fit what is left beside a vertical scrollbar
    assert layout["window"] == 1280 and 1240 <= layout["width"] <= 1280, layout
    assert layout["problems"] == [], "\n".join(layout["problems"])
    # the first screen (1,280 x 800): verdict, headline counts and every switch's RTO/RPO row
    assert all(v is not None and v <= 800 for v in layout["bottom"].values()), layout["bottom"]
    switch_rows = re.search(r"<table id=\"switches\".*?</table>", dom, re.S).group(0)
    assert switch_rows.count("<tr>") == 1 + len(result["switches"])
    # headers are words with units, never field names
    headers = [html.unescape(re.sub(r"<[^>]+>", "", h)) for h in re.findall(r"<th>(.*?)</th>", dom, re.S)]
    assert headers and not [h for h in headers if "_" in h], [h for h in headers if "_" in h]
    # late is defined on the page and kept apart from the exceptions list
    assert re.search(r"<dt>Late</dt><dd>[^<]*not loss", dom.replace("<i>", "").replace("</i>", ""))
    # every chart titles its axes; every switch start is a named marker on the run's charts
    for svg in re.findall(r'<svg class="chart".*?</svg>', dom, re.S):
        assert "axis-title" in svg, svg[:120]
    for s in result["switches"]:
        lag = re.search(rf'<svg class="chart" data-chart="lag" data-run="{s["run_id"]}".*?</svg>', dom, re.S)
        assert lag and f'{s["kind"]}' in "".join(re.findall(r'class="l swl">([^<]*)<', lag.group(0))), s
    png = ARTIFACTS / "pipeline-report-1280.png"
    subprocess.run([chromium, *FLAGS, f"--user-data-dir={tmp_path / 'p4'}", f"--screenshot={png}",
                    "--window-size=1280,800", (out / "report.html").resolve().as_uri()], capture_output=True,
                   timeout=120, check=True)
    assert png.exists() and png.stat().st_size > 10_000
