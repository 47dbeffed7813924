"""Pipeline test layer: ONE SparkSession for the whole session (local[2], 2 shuffle partitions, no UI), and one
pipeline run over generated evidence shared by the tests that check its outputs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
for extra in (ROOT / "pipeline", ROOT / "build" / "collections"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

ARTIFACTS = ROOT / "build" / "test-artifacts"

# Two runs with known faults: a failover (JSON lines) and a swapover (Parquet), in one evidence tree.
FAILOVER = dict(run_id="t-failover", messages=3000, producers=3, consumers=2, lost=7, duplicated=5, redelivered=4,
                reorder=6, in_doubt=5, late=3, failover_at=1.5, seed=11, fmt="jsonl", chunk=1000,
                target_rpo_messages=10, target_rpo_seconds=1.0, target_rto_seconds=5.0)
SWAPOVER = dict(run_id="t-swapover", messages=3000, producers=2, consumers=2, lost=2, duplicated=3, redelivered=1,
                reorder=2, in_doubt=1, late=0, swapover_at=1.0, seed=12, fmt="parquet", chunk=800,
                target_rpo_messages=0, target_rto_seconds=5.0)


@pytest.fixture(scope="session")
def spark():
    from continuity_pipeline import spark as sparkmod

    session = sparkmod.session("local[2]", app_name="continuity-pipeline-tests", shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def evidence_tree(tmp_path_factory):
    from continuity_pipeline.generate import GenParams, generate

    root = tmp_path_factory.mktemp("evidence")
    truths = []
    for spec in (FAILOVER, SWAPOVER):
        truths += generate(GenParams(out=str(root), **spec))
    return root, {t["run_id"]: t for t in truths}


@pytest.fixture(scope="session")
def pipeline_result(spark, evidence_tree, tmp_path_factory):
    from continuity_pipeline import jobs

    root, truths = evidence_tree
    out = tmp_path_factory.mktemp("out")
    result = jobs.run_pipeline(spark, [str(root)], str(out), {}, jobs.Progress(quiet=True))
    return out, result, truths
