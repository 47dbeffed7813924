"""Ledger reconciliation on Spark: one row per (run, message), classified, then small aggregates.

Shape of the work (what makes it scale): sent and received records are unioned into one narrow frame and
grouped ONCE by (run_id, msg_id); the out-of-order check is one window over the per-message rows (first receipt
per message, partitioned by run, address, consumer, producer). Everything that leaves this module for the driver
is aggregated per run/address/switch; the per-message exceptions (lost, in doubt, duplicated, late, out of order)
are written as a Parquet table, never collected whole.

All outputs of the ledger pass come from ONE Spark action: the small branches are unioned (with a ``_t`` tag)
and persisted, so the shuffles they share run once (Spark reuses an identical exchange inside one query).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

RUNINFO_DDL = "run_id string, cutoff_ts double, lost_site string"
SWITCH_DDL = "run_id string, switch_id string, start_ts double, old_site string, new_site string"
RATE_WINDOW_SECONDS = 10.0  # client send rate before a switch: confirmed sends per second over this window

COUNT_COLUMNS = (
    "sent_messages", "sent_records", "resent_messages", "confirmed_messages", "received_messages",
    "received_records", "lost", "in_doubt", "in_doubt_received", "not_accepted", "unexpected", "duplicated",
    "duplicated_redelivery", "duplicated_distinct", "extra_deliveries_redelivered", "extra_deliveries_distinct",
    "late", "out_of_order", "rpo_messages",
)


@dataclass
class LedgerResult:
    counts: list[dict]  # per run_id, address
    exceptions: DataFrame  # per message with a problem
    first_receive: list[dict]  # per run_id, switch_id: first receive on the new site after the start
    send_rate: list[dict]  # per run_id, switch_id: accepted sends/s on the old site before the start
    writers: list[dict]  # per run_id, ledger, writer: records and last ts
    persisted: DataFrame


def ledger_events(records: DataFrame) -> DataFrame:
    """Sent and received records as one narrow frame (the only columns the reconciliation needs)."""
    sent = records.filter(F.col("kind") == "sent").select(
        "run_id", "msg_id", F.lit(True).alias("is_sent"), "address", "producer", "seq", "site",
        F.col("send_ts").alias("ev_ts"), "outcome", F.lit(None).cast("string").alias("consumer"),
        F.lit(None).cast("long").alias("delivery_count"), F.lit(None).cast("boolean").alias("redelivered"),
        F.col("ts").alias("rec_ts"))
    received = records.filter(F.col("kind") == "received").select(
        "run_id", "msg_id", F.lit(False).alias("is_sent"), "address", "producer", "seq", "site",
        F.col("recv_ts").alias("ev_ts"), F.lit(None).cast("string").alias("outcome"), "consumer",
        "delivery_count", "redelivered", F.col("ts").alias("rec_ts"))
    return sent.unionByName(received)


def message_level(ev: DataFrame, runinfo: DataFrame) -> DataFrame:
    """One row per (run_id, msg_id) with its classification and the out-of-order flag."""
    is_sent = F.col("is_sent")
    recv = ~is_sent
    accepted = is_sent & (F.col("outcome") == "accepted")
    uncertain = is_sent & F.col("outcome").isin("in_doubt", "error")

    def n(cond):
        return F.sum(F.when(cond, 1).otherwise(0))

    msg = ev.groupBy("run_id", "msg_id").agg(
        n(is_sent).alias("n_sent"),
        n(accepted).alias("n_accepted"),
        n(uncertain).alias("n_uncertain"),
        F.coalesce(F.max(F.when(is_sent, F.col("address"))), F.max("address")).alias("address"),
        F.coalesce(F.max(F.when(is_sent, F.col("producer"))), F.max("producer")).alias("producer"),
        F.coalesce(F.max(F.when(is_sent, F.col("seq"))), F.max("seq")).alias("seq"),
        F.max(F.when(accepted, F.col("site"))).alias("send_site"),
        F.min(F.when(is_sent, F.col("ev_ts"))).alias("first_send_ts"),
        n(recv).alias("n_recv"),
        n(recv & F.col("redelivered")).alias("n_redelivered"),
        n(recv & (F.col("delivery_count") == 0)).alias("n_fresh"),
        # min of a struct: earliest receipt, ties broken by consumer then site, so the result is deterministic
        F.min(F.when(recv, F.struct(F.col("ev_ts").alias("ts"), F.col("consumer").alias("consumer"),
                                    F.col("site").alias("site")))).alias("_first"),
    )
    msg = (msg.select("*", F.col("_first.ts").alias("first_recv_ts"), F.col("_first.consumer").alias("first_consumer"),
                      F.col("_first.site").alias("first_recv_site")).drop("_first")
           .join(F.broadcast(runinfo), "run_id", "left"))
    status = (F.when(F.col("n_sent") == 0, "unexpected")
              .when(F.col("n_accepted") > 0, F.when(F.col("n_recv") == 0, "lost").otherwise("delivered"))
              .when(F.col("n_uncertain") > 0, "in_doubt")
              .otherwise("not_accepted"))
    msg = msg.withColumn("status", status)
    dup = (F.col("status") == "delivered") & (F.col("n_recv") > 1)
    msg = (msg.withColumn("duplicate", F.when(dup, F.when(F.col("n_fresh") > 1, "distinct").otherwise("redelivery")))
           .withColumn("late", F.coalesce(F.col("first_recv_ts") > F.col("cutoff_ts"), F.lit(False)))
           .withColumn("rpo_lost", F.coalesce((F.col("status") == "lost") & (F.col("send_site") == F.col("lost_site")),
                                              F.lit(False))))
    # Out of order: the first receipt of a message came after the first receipt of a higher sequence number of the
    # same producer at the same consumer on the same address. Redeliveries and second copies are not counted
    # here (they are duplicates); ties in time are ordered by seq so equal timestamps never count.
    w = (Window.partitionBy("run_id", "address", "first_consumer", "producer")
         .orderBy("first_recv_ts", "seq").rowsBetween(Window.unboundedPreceding, -1))
    received = F.col("first_recv_ts").isNotNull() & F.col("seq").isNotNull() & F.col("producer").isNotNull()
    prev_max = F.max(F.when(received, F.col("seq"))).over(w)
    return msg.withColumn("out_of_order", F.coalesce(received & (F.col("seq") < prev_max), F.lit(False)))


def reconcile(spark: SparkSession, records: DataFrame, runinfo_rows: list[tuple], switch_rows: list[tuple]
              ) -> LedgerResult:
    runinfo = spark.createDataFrame(runinfo_rows, RUNINFO_DDL)
    switches = spark.createDataFrame(switch_rows, SWITCH_DDL)
    ev = ledger_events(records)
    msg = message_level(ev, runinfo)

    def n(cond):
        return F.sum(F.when(cond, 1).otherwise(0)).cast("long")

    st = F.col("status")
    counts = msg.groupBy("run_id", "address").agg(
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
    ).withColumn("_t", F.lit("count"))
    exceptions = msg.filter((st != "delivered") | F.col("duplicate").isNotNull() | F.col("late")
                            | F.col("out_of_order")).select(
        "run_id", "address", "msg_id", "producer", "seq", "status", "duplicate", "late", "out_of_order", "rpo_lost",
        "n_sent", "n_recv", "n_redelivered", "n_fresh", "send_site", "first_send_ts", "first_recv_ts",
        "first_recv_site", "first_consumer").withColumn("_t", F.lit("exception"))
    recv = ev.filter(~F.col("is_sent"))
    first_receive = (recv.join(F.broadcast(switches), "run_id")
                     .filter((F.col("site") == F.col("new_site")) & (F.col("ev_ts") >= F.col("start_ts")))
                     .groupBy("run_id", "switch_id").agg(F.min("ev_ts").alias("first_recv_ts"))
                     .withColumn("_t", F.lit("rto")))
    window_start = F.col("start_ts") - F.lit(RATE_WINDOW_SECONDS)
    send_rate = (ev.filter(F.col("is_sent") & (F.col("outcome") == "accepted"))
                 .join(F.broadcast(switches), "run_id")
                 .filter((F.col("site") == F.col("old_site")) & (F.col("ev_ts") < F.col("start_ts"))
                         & (F.col("ev_ts") >= window_start))
                 .groupBy("run_id", "switch_id").agg((F.count(F.lit(1)) / F.lit(RATE_WINDOW_SECONDS))
                                                     .alias("client_send_rate"))
                 .withColumn("_t", F.lit("rate")))
    writers = (ev.groupBy("run_id", F.when(F.col("is_sent"), "sent").otherwise("received").alias("ledger"),
                          F.when(F.col("is_sent"), F.col("producer")).otherwise(F.col("consumer")).alias("writer"))
               .agg(F.count(F.lit(1)).alias("records"), F.max("rec_ts").alias("last_ts"))
               .withColumn("_t", F.lit("writer")))
    # counts and exceptions share the names late/out_of_order with different types: prefix inside the union
    exc_cols = [c for c in exceptions.columns if c != "_t"]
    combined = (counts.unionByName(exceptions.select(*[F.col(c).alias("x_" + c) for c in exc_cols], "_t"),
                                   allowMissingColumns=True)
                .unionByName(first_receive, allowMissingColumns=True)
                .unionByName(send_rate, allowMissingColumns=True)
                .unionByName(writers, allowMissingColumns=True))
    combined = combined.persist(StorageLevel.MEMORY_AND_DISK)
    small = combined.filter(F.col("_t") != "exception")
    rows = [r.asDict() for r in small.collect()]  # per run/address/switch/writer: small by construction

    def pick(tag: str, cols: list[str]) -> list[dict]:
        return sorted(({c: r[c] for c in cols} for r in rows if r["_t"] == tag),
                      key=lambda d: tuple("" if v is None else str(v) for v in d.values()))

    count_cols = ["run_id", "address", *COUNT_COLUMNS, "rpo_first_send_ts", "rpo_last_send_ts",
                  "lost_first_send_ts", "lost_last_send_ts", "first_send_ts", "last_recv_ts"]
    exc = combined.filter(F.col("_t") == "exception").select(*[F.col("x_" + c).alias(c) for c in exc_cols])
    return LedgerResult(
        counts=pick("count", count_cols),
        exceptions=exc,
        first_receive=pick("rto", ["run_id", "switch_id", "first_recv_ts"]),
        send_rate=pick("rate", ["run_id", "switch_id", "client_send_rate"]),
        writers=pick("writer", ["run_id", "ledger", "writer", "records", "last_ts"]),
        persisted=combined,
    )
