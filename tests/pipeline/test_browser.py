"""The HTML report opens in headless Chromium without script errors and shows its charts."""

from __future__ import annotations

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
