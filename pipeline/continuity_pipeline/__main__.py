"""Command line: ``python -m continuity_pipeline {run,generate,package,prepare}``.

Also the spark-submit entry point: ``spark-submit --py-files continuity_pipeline.zip
pipeline/continuity_pipeline/__main__.py run ...``. Run as a plain script, this file is not inside its package,
so it puts the directory holding the package on sys.path (only if the package is not importable already, for
example from the --py-files zip).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

if __package__ in (None, ""):  # executed as a file by spark-submit or python path/to/__main__.py
    try:
        import continuity_pipeline  # noqa: F401  (from --py-files)
    except ImportError:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="evidence -> reconciliation, RPO/RTO, verdict, report")
    p.add_argument("--evidence", nargs="+", required=True, help="evidence files or directory trees (JSONL/Parquet)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--rpo-seconds", type=float, help="RPO target in seconds (overrides the run record's)")
    p.add_argument("--rpo-messages", type=int, help="RPO target in messages (overrides the run record's)")
    p.add_argument("--rto-seconds", type=float, help="RTO target in seconds (overrides the run record's)")
    p.add_argument("--master", help="Spark master for a plain python run (default local[2]); ignored under "
                                    "spark-submit, which sets its own")
    p.add_argument("--shuffle-partitions", type=int, default=8)
    p.add_argument("--driver-memory", default=None, help="e.g. 2g (plain python runs only)")
    p.add_argument("--allow-bad-records", action="store_true",
                   help="exit 0 despite bad input records (they are still counted and reported)")
    p.add_argument("--no-html", action="store_true", help="skip report.html")
    p.add_argument("--quiet", action="store_true", help="no progress lines, only the verdict table")


def _add_generate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="synthetic evidence with injected faults")
    p.add_argument("--out", required=True)
    p.add_argument("--run-id", default="gen")
    p.add_argument("--runs", type=int, default=1, help="number of runs (run ids <run-id>-001...)")
    p.add_argument("--messages", type=int, default=10_000)
    p.add_argument("--producers", type=int, default=4)
    p.add_argument("--consumers", type=int, default=2)
    p.add_argument("--addresses", type=int, default=1)
    p.add_argument("--lost", type=int, default=0)
    p.add_argument("--duplicated", type=int, default=0, help="messages delivered twice (distinct deliveries)")
    p.add_argument("--redelivered", type=int, default=0, help="messages redelivered by the broker")
    p.add_argument("--reorder", type=int, default=0, help="pairs of messages received out of order")
    p.add_argument("--in-doubt", type=int, default=0)
    p.add_argument("--late", type=int, default=0, help="messages arriving after the run end")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--failover-at", type=float, help="seconds after the start: dc1 lost, dc2 takes over")
    g.add_argument("--swapover-at", type=float, help="seconds after the start: planned switch dc1 -> dc2")
    p.add_argument("--outage", type=float, help="seconds without service at the switch (default 3 / 0.35)")
    p.add_argument("--rate", type=float, default=1000.0, help="messages per second")
    p.add_argument("--format", dest="fmt", choices=("jsonl", "parquet"), default="jsonl")
    p.add_argument("--chunk", type=int, default=1_000_000, help="messages per ledger file")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--target-rpo-seconds", type=float)
    p.add_argument("--target-rpo-messages", type=int)
    p.add_argument("--target-rto-seconds", type=float)
    p.add_argument("--ack-batch", type=int, default=1)
    p.add_argument("--quiet", action="store_true")


def _add_package(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("package", help="build the --py-files zip for spark-submit")
    p.add_argument("--out", default="build/continuity_pipeline.zip")


def _add_prepare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prepare", help="write the driver JVM's class archive once; later runs start faster")
    p.add_argument("--force", action="store_true", help="write it again even if one is in place")
    p.add_argument("--quiet", action="store_true")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="continuity_pipeline", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    _add_run(sub)
    _add_generate(sub)
    _add_package(sub)
    _add_prepare(sub)
    args = parser.parse_args(argv)
    if args.cmd == "generate":
        from continuity_pipeline.generate import GenerateError, GenParams, generate

        values = {k: v for k, v in vars(args).items() if k not in ("cmd", "quiet")}
        gp = GenParams(**values)
        started = time.monotonic()
        try:
            truths = generate(gp, None if args.quiet else lambda m: print(f"[generate] {m}", flush=True))
        except GenerateError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for t in truths:
            print(f"[generate] {t['run_id']}: {t['sent_records']:,} sent + {t['received_records']:,} received "
                  f"records, lost={t['lost']} in_doubt={t['in_doubt']} duplicated={t['duplicated']} "
                  f"reordered={t['out_of_order']} late={t['late']}")
        print(f"[generate] done in {time.monotonic() - started:.1f}s -> {args.out}")
        return 0
    if args.cmd == "package":
        from continuity_pipeline.package import build_zip

        path = build_zip(args.out)
        print(path)
        return 0
    if args.cmd == "prepare":
        from continuity_pipeline.prepare import prepare

        return prepare(force=args.force, quiet=args.quiet)
    from continuity_pipeline.jobs import run_cli

    return run_cli(args)


if __name__ == "__main__":
    sys.exit(main())
