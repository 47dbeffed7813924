"""Ledger reconciliation on Spark: one row per (run, message), classified, then small aggregates.

Shape of the work (what makes it scale):

- Sent and received records become ONE narrow frame of fixed-width columns keyed by (run_id, msg_id). The
  low-cardinality strings a message carries (address, producer, consumer, site) travel as ``xxhash64`` codes, so
  every per-message aggregation buffer is fixed-width and Spark keeps a hash aggregate (a string or struct buffer
  would force a sort of every event). The strings come back through a small dictionary (``writer_piggyback``);
  two strings with one code stop the run instead of merging silently.
- The narrow frame is repartitioned by (run_id, msg_id) once for the per-message aggregation. Per-writer counts,
  the dictionary and the per-switch figures (first receive after a start, send rate before it) come from one
  map-side-combined aggregate whose keys include each event's switch phase (``_switch_keys``), computed in the
  reader's pass over the input: no extra scan and no second shuffle of the events.
- Out-of-order is one window over the received messages (partitioned by run, address, first consumer, producer).
- One grouped aggregate keyed by (run, address, msg_id of an exception or null) gives one row per run and address
  plus one per exception (lost, in doubt, duplicated, late, out of order); it is cached, and the counts (collected:
  small) and the exceptions table (written as Parquet, never collected) both read it.
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from continuity_pipeline import reader
from continuity_pipeline.spark import local_frame

RUNINFO_DDL = "run_id string, cutoff_ts double, lost_site string"
SWITCH_DDL = "run_id string, switch_id string, start_ts double, old_site string, new_site string"
RATE_WINDOW_SECONDS = 10.0  # client send rate before a switch: confirmed sends per second over this window

COUNT_COLUMNS = (
    "sent_messages", "sent_records", "resent_messages", "confirmed_messages", "received_messages",
    "received_records", "lost", "in_doubt", "in_doubt_received", "not_accepted", "unexpected", "duplicated",
    "duplicated_redelivery", "duplicated_distinct", "extra_deliveries_redelivered", "extra_deliveries_distinct",
    "late", "out_of_order", "rpo_messages",
)
CODED = ("address", "producer", "consumer", "site")  # strings carried as codes through the big shuffle
STATUSES = ("delivered", "lost", "in_doubt", "not_accepted", "unexpected")
DUPLICATES = ("redelivery", "distinct")  # code 0: not a duplicate

# Per-event flag bits (one int column instead of five in the shuffle).
SENT, ACCEPTED, UNCERTAIN, REDELIVERED, FRESH = 1, 2, 4, 8, 16

# First receipt of a message = smallest (receive time in microseconds, consumer code bits): a fixed-width ordering
# key, so ``min_by`` stays in the hash aggregate and ties in time resolve the same way on every run. Times are
# clamped to [0, ~2088] so the key cannot overflow a long.
_TS_BASE, _TS_MAX, _TIE_BITS = 1.5e9, 3.7e9, 4096


class ReconcileError(Exception):
    """The ledgers cannot be reconciled exactly (reported to the operator, never papered over)."""


@dataclass
class LedgerResult:
    counts: list[dict]  # per run_id, address
    exceptions: DataFrame  # per message with a problem
    first_receive: list[dict]  # per run_id, switch_id: first receive on the new site after the start
    send_rate: list[dict]  # per run_id, switch_id: accepted sends/s on the old site before the start
    writers: list[dict]  # per run_id, ledger, writer: records and last ts
    persisted: DataFrame
    # per (run_id, switch_id): lost messages accepted on the switch's old site since the run's previous switch
    switch_lost: dict = field(default_factory=dict)
    # per (run_id, switch_id): messages the switch delivered twice (``_duplicates_per_switch``)
    switch_duplicates: dict = field(default_factory=dict)
    # per run_id, switch_id: received records/s on the old site before the start (the delivery rate)
    receive_rate: list[dict] = field(default_factory=list)


def _code(c: str) -> Column:
    return F.when(F.col(c).isNotNull(), F.xxhash64(F.col(c)))


def _bit(flag: int) -> Column:
    return F.when((F.col("f").bitwiseAND(flag)) != 0, 1).otherwise(0)


def ledger_events(records: DataFrame) -> DataFrame:
    """Sent and received records as one narrow frame of fixed-width columns (plus the run/message key)."""
    kind = F.col("kind")
    is_sent = kind == "sent"
    outcome = F.col("outcome")
    flags = (F.when(is_sent, SENT).otherwise(0)
             + F.when(is_sent & (outcome == "accepted"), ACCEPTED).otherwise(0)
             + F.when(is_sent & outcome.isin("in_doubt", "error"), UNCERTAIN).otherwise(0)
             + F.when(~is_sent & F.coalesce(F.col("redelivered"), F.lit(False)), REDELIVERED).otherwise(0)
             + F.when(~is_sent & (F.col("delivery_count") == 0), FRESH).otherwise(0))
    return records.filter(kind.isin("sent", "received")).select(
        "run_id", "msg_id", flags.cast("int").alias("f"), "seq",
        F.when(is_sent, F.col("send_ts")).otherwise(F.col("recv_ts")).alias("ev_ts"),
        *[_code(c).alias(c + "_c") for c in CODED])


def _switch_keys(switch_rows: list[tuple], ts: Column) -> tuple[Column, Column]:
    """Two small per-event keys that make the per-switch figures exact from a map-side-combined aggregate:

    ``_phase``: how many switch starts of the event's run lie at or before its time (switch j of a run, in start
    order, has its first receive among events with ``_phase == j + 1``: after its start, before the next switch);
    ``_rate_mask``: bit j set when the event lies in switch j's send-rate window [start - RATE_WINDOW_SECONDS,
    start).
    """
    starts: dict[str, list[float]] = {}
    for run_id, _sid, start, _old, _new in switch_rows:
        starts.setdefault(run_id, []).append(float(start))
    phase, mask = None, None
    for run_id, run_starts in sorted(starts.items()):
        run_starts.sort()
        p = sum((F.when(ts >= F.lit(t), 1).otherwise(0) for t in run_starts), F.lit(0))
        m = sum((F.when((ts >= F.lit(t - RATE_WINDOW_SECONDS)) & (ts < F.lit(t)), 1 << j).otherwise(0)
                 for j, t in enumerate(run_starts[:62])), F.lit(0))
        cond = F.col("run_id") == F.lit(run_id)
        phase = F.when(cond, p) if phase is None else phase.when(cond, p)
        mask = F.when(cond, m) if mask is None else mask.when(cond, m)
    if phase is None or mask is None:
        return F.lit(0), F.lit(0).cast("long")
    return phase.otherwise(0), mask.otherwise(0).cast("long")


def writer_piggyback(switch_rows: list[tuple]) -> reader.PiggyBack:
    """Per run, writer and the strings behind the codes (and switch phase): records, last record time and the
    earliest event time. Computed by the reader in its one pass over the input (``reader.statistics``), over
    the valid ledger records only; small whatever the input size."""
    kind = F.col("kind")
    covered = ~F.col("_bad") & ~F.col("_blank") & kind.isin("sent", "received")
    is_sent = kind == "sent"
    ev_ts = F.when(is_sent, F.col("send_ts")).otherwise(F.col("recv_ts"))
    phase, mask = _switch_keys(switch_rows, ev_ts)

    def key(c: Column) -> Column:
        return F.when(covered, c)

    # Strings only (their codes and the writer name are added on the driver, ``_add_codes``): every extra
    # per-row key costs time on every event.
    keys = {"ledger": key(F.when(is_sent, "sent").otherwise("received")), "run_id": key(F.col("run_id")),
            **{c: key(F.col(c)) for c in CODED},
            "accepted": key(is_sent & (F.col("outcome") == "accepted")),
            "_phase": key(phase), "_rate_mask": key(mask)}
    return reader.PiggyBack(keys, {"last_ts": ("max", F.max(F.when(covered, F.col("ts")))),
                                   "first_ev_ts": ("min", F.min(F.when(covered, ev_ts)))})


def _per_switch(agg_rows: list[dict], switch_rows: list[tuple]) -> tuple[list[dict], list[dict], list[dict]]:
    """First receive on the new site after each switch start, and the old site's accepted send rate and
    delivery rate (received records, redeliveries included) over the RATE_WINDOW_SECONDS before it."""
    by_run: dict[str, list[tuple]] = {}
    for row in switch_rows:
        by_run.setdefault(row[0], []).append(row)
    first, rate, deliveries = [], [], []
    for run_id, rows in by_run.items():
        ordered = sorted(rows, key=lambda r: float(r[2]))
        index = {id(r): j for j, r in enumerate(ordered)}
        for r in rows:
            j, (_rid, switch_id, _start, old_site, new_site) = index[id(r)], r
            times = [a["first_ev_ts"] for a in agg_rows if a["run_id"] == run_id and a["ledger"] == "received"
                     and a["site"] == new_site and a["_phase"] == j + 1 and a["first_ev_ts"] is not None]
            if times:
                first.append({"run_id": run_id, "switch_id": switch_id, "first_recv_ts": min(times)})
            sends = sum(int(a["records"]) for a in agg_rows if a["run_id"] == run_id and a["ledger"] == "sent"
                        and a["accepted"] and a["site"] == old_site and (a["_rate_mask"] >> j) & 1)
            if sends:
                rate.append({"run_id": run_id, "switch_id": switch_id,
                             "client_send_rate": sends / RATE_WINDOW_SECONDS})
            received = sum(int(a["records"]) for a in agg_rows if a["run_id"] == run_id
                           and a["ledger"] == "received" and a["site"] == old_site and (a["_rate_mask"] >> j) & 1)
            if received:
                deliveries.append({"run_id": run_id, "switch_id": switch_id,
                                   "client_receive_rate": received / RATE_WINDOW_SECONDS})
    key = lambda d: (d["run_id"], d["switch_id"])  # noqa: E731
    return sorted(first, key=key), sorted(rate, key=key), sorted(deliveries, key=key)


def message_level(ev: DataFrame, runinfo: DataFrame) -> DataFrame:
    """One row per (run_id, msg_id) with its classification and the out-of-order flag (codes, not strings)."""
    is_sent = F.col("f").bitwiseAND(SENT) != 0
    recv = ~is_sent
    accepted = F.col("f").bitwiseAND(ACCEPTED) != 0
    ts = F.least(F.greatest(F.col("ev_ts"), F.lit(0.0)), F.lit(_TS_MAX))
    first_key = (F.floor((ts - F.lit(_TS_BASE)) * F.lit(1e6)).cast("long") * F.lit(_TIE_BITS)
                 + F.pmod(F.coalesce(F.col("consumer_c"), F.lit(0)), F.lit(_TIE_BITS)))
    msg = ev.groupBy("run_id", "msg_id").agg(
        F.sum(F.when(is_sent, 1).otherwise(0)).alias("n_sent"),
        F.sum(_bit(ACCEPTED)).alias("n_accepted"),
        F.sum(_bit(UNCERTAIN)).alias("n_uncertain"),
        F.sum(F.when(recv, 1).otherwise(0)).alias("n_recv"),
        F.sum(_bit(REDELIVERED)).alias("n_redelivered"),
        F.sum(_bit(FRESH)).alias("n_fresh"),
        # what the sender wrote wins over what a receiver read (a message seen only by a consumer keeps its view)
        F.coalesce(F.max(F.when(is_sent, F.col("address_c"))), F.max("address_c")).alias("address_c"),
        F.coalesce(F.max(F.when(is_sent, F.col("producer_c"))), F.max("producer_c")).alias("producer_c"),
        F.coalesce(F.max(F.when(is_sent, F.col("seq"))), F.max("seq")).alias("seq"),
        F.max(F.when(accepted, F.col("site_c"))).alias("send_site_c"),
        F.min(F.when(is_sent, F.col("ev_ts"))).alias("first_send_ts"),
        F.min(F.when(recv, F.col("ev_ts"))).alias("first_recv_ts"),
        F.max(F.when(recv, F.col("ev_ts"))).alias("last_recv_ts"),
        F.min_by(F.when(recv, F.col("consumer_c")), F.when(recv, first_key)).alias("first_consumer_c"),
        F.min_by(F.when(recv, F.col("site_c")), F.when(recv, first_key)).alias("first_recv_site_c"),
    )
    msg = msg.join(F.broadcast(runinfo), "run_id", "left")
    status = (F.when(F.col("n_sent") == 0, "unexpected")
              .when(F.col("n_accepted") > 0, F.when(F.col("n_recv") == 0, "lost").otherwise("delivered"))
              .when(F.col("n_uncertain") > 0, "in_doubt")
              .otherwise("not_accepted"))
    msg = msg.withColumn("status", status)
    dup = (F.col("status") == "delivered") & (F.col("n_recv") > 1)
    msg = (msg.withColumn("duplicate", F.when(dup, F.when(F.col("n_fresh") > 1, "distinct").otherwise("redelivery")))
           # late: in flight when the drill was declared over (sent before the cutoff, first received after it);
           # traffic that simply went on after the cutoff is neither late nor an exception
           .withColumn("late", F.coalesce((F.col("first_recv_ts") > F.col("cutoff_ts"))
                                          & (F.col("first_send_ts") <= F.col("cutoff_ts")), F.lit(False)))
           .withColumn("rpo_lost", F.coalesce((F.col("status") == "lost")
                                              & (F.col("send_site_c") == F.col("lost_site_c")), F.lit(False)))
           .drop("cutoff_ts", "lost_site_c"))
    # Out of order: the first receipt of a message came after the first receipt of a higher sequence number of the
    # same producer at the same consumer on the same address. Redeliveries and second copies are not counted
    # here (they are duplicates); ties in time are ordered by seq so equal timestamps never count. Only received
    # messages with a producer and seq take part (a message never received sorts first and adds nothing).
    ordered = F.col("first_recv_ts").isNotNull() & F.col("seq").isNotNull() & F.col("producer_c").isNotNull()
    w = (Window.partitionBy("run_id", "address_c", "first_consumer_c", "producer_c")
         .orderBy("first_recv_ts", "seq").rowsBetween(Window.unboundedPreceding, -1))
    prev_max = F.max(F.when(ordered, F.col("seq"))).over(w)
    return msg.withColumn("out_of_order", F.coalesce(ordered & (F.col("seq") < prev_max), F.lit(False)))


def _add_codes(spark: SparkSession, rows: list[dict]) -> list[dict]:
    """The writer aggregate's rows with each string's ``xxhash64`` code (computed by Spark, on the few distinct
    strings, so it is the same function the events are coded with) and the writer's name."""
    values = sorted({(c, r[c]) for r in rows for c in CODED if r[c] is not None})
    coded = {(c, v): h for c, v, h in local_frame(spark, values or [("", "")], "c string, v string")
             .select("c", "v", F.xxhash64("v").alias("h")).collect()}
    out = []
    for r in rows:
        row = {**r, "writer": r["producer"] if r["ledger"] == "sent" else r["consumer"]}
        for c in CODED:
            row[c + "_c"] = coded.get((c, r[c])) if r[c] is not None else None
        out.append(row)
    return out


def _check_codes(dictionary: list[dict]) -> None:
    for c in CODED:
        seen: dict[int, str] = {}
        for row in dictionary:
            code, value = row[c + "_c"], row[c]
            if code is None:
                continue
            if seen.setdefault(code, value) != value:
                raise ReconcileError(f"{c} values {seen[code]!r} and {value!r} share the hash code {code}; "
                                     "the reconciliation cannot tell them apart")


def _decode(df: DataFrame, spark: SparkSession, dictionary: list[dict], cols: dict[str, str]) -> DataFrame:
    """Replace code columns by their strings (``cols``: code column -> (CODED name, output column))."""
    for code_col, (coded, out) in cols.items():
        pairs = sorted({(r[coded + "_c"], r[coded]) for r in dictionary if r[coded + "_c"] is not None})
        lookup = local_frame(spark, pairs or [(0, None)], f"{code_col} long, {out} string")
        df = df.join(F.broadcast(lookup), code_col, "left").drop(code_col)
    return df


def _merge_counts(agg_rows: list[dict]) -> list[dict]:
    """Sum the rows of one (run_id, address_c) that the per-switch keys split."""
    merged: dict[tuple, dict] = {}
    for r in agg_rows:
        key = (r["run_id"], r["address_c"])
        acc = merged.get(key)
        if acc is None:
            merged[key] = {k: v for k, v in r.items()
                           if k not in ("lost_phase", "lost_site_c", "dup_phase", "dup_site_c")}
            continue
        for c in COUNT_COLUMNS:
            acc[c] = (acc[c] or 0) + (r[c] or 0)
        for c, pick in (("rpo_first_send_ts", min), ("lost_first_send_ts", min), ("first_send_ts", min),
                        ("rpo_last_send_ts", max), ("lost_last_send_ts", max), ("last_recv_ts", max)):
            values = [v for v in (acc[c], r[c]) if v is not None]
            acc[c] = pick(values) if values else None
    return list(merged.values())


def _hits_per_switch(agg_rows: list[dict], switch_rows: list[tuple], dict_rows: list[dict], phase_col: str,
                     site_col: str):
    """Yield ``(run_id, switch_id, rows)`` for every switch: the aggregate rows whose ``phase_col`` is the switch's
    index in its run (switches ordered by start) and whose ``site_col`` is the switch's old site."""
    sites = {r["site_c"]: r["site"] for r in dict_rows if r.get("site_c") is not None}
    by_run: dict[str, list[tuple]] = {}
    for row in switch_rows:
        by_run.setdefault(row[0], []).append(row)
    for run_id, rows in by_run.items():
        for j, (_rid, switch_id, _start, old_site, _new) in enumerate(sorted(rows, key=lambda r: float(r[2]))):
            yield run_id, switch_id, [r for r in agg_rows if r["run_id"] == run_id and r[phase_col] == j
                                      and sites.get(r[site_col]) == old_site]


def _lost_per_switch(agg_rows: list[dict], switch_rows: list[tuple], dict_rows: list[dict]) -> dict:
    """Per switch: messages accepted on its old site after the run's previous switch started and before it
    started, never received (messages and first-to-last send seconds). Loss after a run's last switch belongs to
    no switch (it still counts in the run's lost)."""
    out = {}
    for run_id, switch_id, hit in _hits_per_switch(agg_rows, switch_rows, dict_rows, "lost_phase", "lost_site_c"):
        firsts = [r["lost_first_send_ts"] for r in hit if r["lost_first_send_ts"] is not None]
        lasts = [r["lost_last_send_ts"] for r in hit if r["lost_last_send_ts"] is not None]
        out[(run_id, switch_id)] = {"rpo_messages_observed": sum(int(r["lost"] or 0) for r in hit),
                                    "rpo_seconds_observed": (max(lasts) - min(firsts)) if firsts else 0.0}
    return out


def _duplicates_per_switch(agg_rows: list[dict], switch_rows: list[tuple], dict_rows: list[dict]) -> dict:
    """Per switch: messages delivered across it, i.e. first received on its old site after the run's previous
    switch started and before this one started, and received again after it started (the duplicates a switch
    causes: deliveries in flight and acks the new site never got). ``duplicates_observed`` with its split by kind
    (``redelivery``/``distinct``, the reconciliation's classes); ``None`` for a run without received records."""
    has_ledger = {r["run_id"] for r in agg_rows if r.get("received_records")}
    out = {}
    for run_id, switch_id, hit in _hits_per_switch(agg_rows, switch_rows, dict_rows, "dup_phase", "dup_site_c"):
        if run_id not in has_ledger:
            out[(run_id, switch_id)] = {"duplicates_observed": None, "duplicates_observed_redelivery": None,
                                        "duplicates_observed_distinct": None}
            continue
        out[(run_id, switch_id)] = {
            "duplicates_observed": sum(int(r["duplicated"] or 0) for r in hit),
            "duplicates_observed_redelivery": sum(int(r["duplicated_redelivery"] or 0) for r in hit),
            "duplicates_observed_distinct": sum(int(r["duplicated_distinct"] or 0) for r in hit)}
    return out


def reconcile(spark: SparkSession, records: DataFrame, runinfo_rows: list[tuple], switch_rows: list[tuple],
              writer_rows: list[dict], pool: Executor | None = None) -> LedgerResult:
    """``writer_rows``: the reader's rows for ``writer_piggyback(switch_rows)``."""
    # Step 1 (already aggregated by the reader's pass): writers, the code dictionary (its strings decode
    # everything below) and the per-switch first receive and send rate.
    # (with a pool: computed while the big aggregation below runs; it is needed only after it)
    codes = pool.submit(_add_codes, spark, writer_rows) if pool is not None else None
    dict_rows = _add_codes(spark, writer_rows) if codes is None else []
    runinfo = local_frame(spark, runinfo_rows, RUNINFO_DDL).select(
        "run_id", "cutoff_ts", _code("lost_site").alias("lost_site_c"))

    # Step 2 (the big one): one shuffle of the narrow events, the aggregation per message, the out-of-order
    # window, then ONE aggregation keyed by (run, address, msg_id of an exception or null): ordinary messages
    # collapse into one row per run and address, every exception keeps a row of its own. That small result is
    # cached; the counts and the exceptions table both read it, so the big work runs once.
    ev = ledger_events(records).repartition("run_id", "msg_id")
    msg = message_level(ev, runinfo)

    def n(cond: Column) -> Column:
        return F.sum(F.when(cond, 1).otherwise(0)).cast("long")

    def code(col: str, values: tuple) -> Column:
        out = F.lit(0)
        for i, v in enumerate(values):
            out = F.when(F.col(col) == v, i + 1).otherwise(out)
        return out

    st = F.col("status")
    exceptional = (st != "delivered") | F.col("duplicate").isNotNull() | F.col("late") | F.col("out_of_order")
    grouped = msg.groupBy("run_id", "address_c", F.when(exceptional, F.col("msg_id")).alias("x_msg_id")).agg(
        n(F.col("n_sent") > 0).alias("sent_messages"),
        F.sum("n_sent").cast("long").alias("sent_records"),
        n(F.col("n_sent") > 1).alias("resent_messages"),
        n(F.col("n_accepted") > 0).alias("confirmed_messages"),
        n(F.col("n_recv") > 0).alias("received_messages"),
        F.sum("n_recv").cast("long").alias("received_records"),
        n(st == "lost").alias("lost"),
        n(st == "in_doubt").alias("in_doubt"),
        n((st == "in_doubt") & (F.col("n_recv") > 0)).alias("in_doubt_received"),
        n(st == "not_accepted").alias("not_accepted"),
        n(st == "unexpected").alias("unexpected"),
        n(F.col("duplicate").isNotNull()).alias("duplicated"),
        n(F.col("duplicate") == "redelivery").alias("duplicated_redelivery"),
        n(F.col("duplicate") == "distinct").alias("duplicated_distinct"),
        F.sum(F.when(F.col("duplicate").isNotNull(), F.col("n_redelivered") -
                     F.when(F.col("n_fresh") == 0, 1).otherwise(0)).otherwise(0)).cast("long")
        .alias("extra_deliveries_redelivered"),
        F.sum(F.when(F.col("duplicate").isNotNull(), F.greatest(F.col("n_fresh") - 1, F.lit(0))).otherwise(0))
        .cast("long").alias("extra_deliveries_distinct"),
        n(F.col("late")).alias("late"),
        n(F.col("out_of_order")).alias("out_of_order"),
        n(F.col("rpo_lost")).alias("rpo_messages"),
        F.min(F.when(F.col("rpo_lost"), F.col("first_send_ts"))).alias("rpo_first_send_ts"),
        F.max(F.when(F.col("rpo_lost"), F.col("first_send_ts"))).alias("rpo_last_send_ts"),
        F.min(F.when(st == "lost", F.col("first_send_ts"))).alias("lost_first_send_ts"),
        F.max(F.when(st == "lost", F.col("first_send_ts"))).alias("lost_last_send_ts"),
        F.min("first_send_ts").alias("first_send_ts"),
        F.max("first_recv_ts").alias("last_recv_ts"),
        # the exception's own fields: its group holds exactly one message, so max/min return its values
        *[F.max(c).alias("x_" + c) for c in ("producer_c", "seq", "n_sent", "n_recv", "n_redelivered", "n_fresh",
                                             "send_site_c", "first_recv_site_c", "first_consumer_c")],
        F.max(code("status", STATUSES)).alias("x_status"),
        F.max(code("duplicate", DUPLICATES)).alias("x_duplicate"),
        *[F.max(F.col(c).cast("int")).alias("x_" + c) for c in ("late", "out_of_order", "rpo_lost")],
        F.min("first_recv_ts").alias("x_first_recv_ts"),
        F.max("last_recv_ts").alias("x_last_recv_ts"),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    sums = [F.sum(c).cast("long").alias(c) for c in COUNT_COLUMNS]
    # Lost messages per switch, in the same small aggregate: a lost message belongs to the first switch of its
    # run that started after its send (``_switch_keys``' phase), with the site it was accepted on.
    lost_phase = F.when(F.col("x_status") == STATUSES.index("lost") + 1,
                        _switch_keys(switch_rows, F.col("first_send_ts"))[0])
    # Duplicates per switch, likewise: a duplicated message belongs to the switch it was delivered across, i.e.
    # first received in the phase before the switch (after the previous switch started) and received again after
    # the switch started, with the site of its first receipt (``_duplicates_per_switch`` keeps the old site's).
    first_phase = _switch_keys(switch_rows, F.col("x_first_recv_ts"))[0]
    dup_phase = F.when((F.col("x_duplicate") > 0)
                       & (_switch_keys(switch_rows, F.col("x_last_recv_ts"))[0] > first_phase), first_phase)
    agg_rows = [r.asDict() for r in grouped.groupBy(
        "run_id", "address_c", lost_phase.alias("lost_phase"),
        F.when(lost_phase.isNotNull(), F.col("x_send_site_c")).alias("lost_site_c"),
        dup_phase.alias("dup_phase"),
        F.when(dup_phase.isNotNull(), F.col("x_first_recv_site_c")).alias("dup_site_c")).agg(
        *sums, *[F.min(c).alias(c) for c in ("rpo_first_send_ts", "lost_first_send_ts", "first_send_ts")],
        *[F.max(c).alias(c) for c in ("rpo_last_send_ts", "lost_last_send_ts", "last_recv_ts")]).collect()]
    if codes is not None:
        dict_rows = codes.result()
    _check_codes(dict_rows)
    first_receive, send_rate, receive_rate = _per_switch(dict_rows, switch_rows)
    rows = _merge_counts(agg_rows)
    switch_lost = _lost_per_switch(agg_rows, switch_rows, dict_rows)
    switch_duplicates = _duplicates_per_switch(agg_rows, switch_rows, dict_rows)

    addresses = {r["address_c"]: r["address"] for r in dict_rows if r["address_c"] is not None}
    for r in rows:
        r["address"] = addresses.get(r["address_c"])
    count_cols = ["run_id", "address", *COUNT_COLUMNS, "rpo_first_send_ts", "rpo_last_send_ts",
                  "lost_first_send_ts", "lost_last_send_ts", "first_send_ts", "last_recv_ts"]
    counts = sorted(({c: r.get(c) for c in count_cols} for r in rows),
                    key=lambda d: tuple("" if v is None else str(v) for v in d.values()))

    def decode_enum(col: str, values: tuple) -> Column:
        return F.element_at(F.array(F.lit(None).cast("string"), *[F.lit(v) for v in values]), F.col(col) + 1)

    exc = grouped.filter(F.col("x_msg_id").isNotNull()).select(
        "run_id", "address_c", F.col("x_msg_id").alias("msg_id"), F.col("x_producer_c").alias("producer_c"),
        F.col("x_seq").alias("seq"), decode_enum("x_status", STATUSES).alias("status"),
        decode_enum("x_duplicate", DUPLICATES).alias("duplicate"),
        *[(F.col("x_" + c) == 1).alias(c) for c in ("late", "out_of_order", "rpo_lost")],
        *[F.col("x_" + c).alias(c) for c in ("n_sent", "n_recv", "n_redelivered", "n_fresh", "send_site_c")],
        "first_send_ts", F.col("x_first_recv_ts").alias("first_recv_ts"),
        *[F.col("x_" + c).alias(c) for c in ("first_recv_site_c", "first_consumer_c")])
    exc = _decode(exc, spark, dict_rows, {"address_c": ("address", "address"), "producer_c": ("producer", "producer"),
                                          "send_site_c": ("site", "send_site"),
                                          "first_recv_site_c": ("site", "first_recv_site"),
                                          "first_consumer_c": ("consumer", "first_consumer")})
    exc = exc.select("run_id", "address", "msg_id", "producer", "seq", "status", "duplicate", "late", "out_of_order",
                     "rpo_lost", "n_sent", "n_recv", "n_redelivered", "n_fresh", "send_site", "first_send_ts",
                     "first_recv_ts", "first_recv_site", "first_consumer")
    writers: dict[tuple, dict] = {}
    for r in dict_rows:
        w = writers.setdefault((r["run_id"], r["ledger"], r["writer"]), {
            "run_id": r["run_id"], "ledger": r["ledger"], "writer": r["writer"], "records": 0, "last_ts": None})
        w["records"] += int(r["records"])
        if r["last_ts"] is not None and (w["last_ts"] is None or r["last_ts"] > w["last_ts"]):
            w["last_ts"] = r["last_ts"]
    return LedgerResult(
        counts=counts,
        exceptions=exc,
        first_receive=first_receive,
        send_rate=send_rate,
        writers=sorted(writers.values(), key=lambda d: tuple("" if v is None else str(v) for v in d.values())),
        persisted=grouped,
        switch_lost=switch_lost,
        switch_duplicates=switch_duplicates,
        receive_rate=receive_rate,
    )
