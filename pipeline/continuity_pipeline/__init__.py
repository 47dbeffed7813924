"""continuity_pipeline: evidence -> reconciliation, RPO/RTO observed and estimated, SLA verdict, report.

Run ``python -m continuity_pipeline --help``. The Spark code lives in ``reader``, ``reconcile`` and ``jobs``;
pure logic (verdicts, estimates, report rendering) in ``analysis``, ``report`` and ``metrics`` so it can be
tested without a JVM.
"""

__version__ = "0.1.0"
