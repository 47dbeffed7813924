"""Synthetic evidence with controlled, exactly known faults (for tests and benchmarks).

One run is P producers sending N messages round-robin at ``rate`` msg/s to ``addresses`` queues, C consumers
receiving them ``latency`` seconds later, an optional failover or swapover from dc1 to dc2 at T seconds, and the
lag samples, canaries, phase records, incident and run records a rehearsal writes. Faults are injected on chosen
messages so that the true counts are known:

- lost: accepted, never received (failover: the last ones confirmed on dc1 before the incident: the RPO);
- in doubt: sent but unsettled (``in_doubt``, no confirm); the first half of them is received anyway;
- duplicated: received a second time with delivery_count 0 (a distinct delivery);
- redelivered: received a second time with redelivered true (a broker redelivery);
- reorder: R disjoint pairs of consecutive messages of one producer whose receive times are swapped (each pair
  is exactly one message received after a higher sequence number of its producer at the same consumer);
- late: the last messages of the run arrive after the run's end record.

Faults never overlap each other, and never touch the messages within a safety zone around the switch, so every
injected fault is counted exactly once. Data is produced and written in chunks of ``chunk`` messages, so memory
stays bounded at any N. ``_truth.json`` in each run directory (underscore: never read as evidence) holds the
exact expected numbers, computed from the generated arrays (not copied from the parameters) so tests compare
two independent computations.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ansible_collections.continuity.artemis.plugins.module_utils import evidence as ev
from ansible_collections.continuity.artemis.plugins.module_utils import lag as lagmodel
from continuity_pipeline.layout import LAYOUT, FieldType

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z: fixed so that generated evidence is reproducible byte for byte


@dataclass
class GenParams:
    out: str
    run_id: str = "gen"
    runs: int = 1
    messages: int = 10_000
    producers: int = 4
    consumers: int = 2
    addresses: int = 1
    lost: int = 0
    duplicated: int = 0
    redelivered: int = 0
    reorder: int = 0
    in_doubt: int = 0
    late: int = 0
    failover_at: float | None = None
    swapover_at: float | None = None
    outage: float | None = None
    rate: float = 1000.0
    latency: float = 0.004
    fmt: str = "jsonl"
    chunk: int = 1_000_000
    seed: int = 1
    target_rpo_seconds: float | None = None
    target_rpo_messages: int | None = None
    target_rto_seconds: float | None = None
    ack_batch: int = 1
    lag_interval: float = 1.0
    canary_interval: float = 5.0
    rto_overhead: float = 0.3
    extra: dict = field(default_factory=dict)


class GenerateError(ValueError):
    pass


# --- record writing -------------------------------------------------------------------------------------------
# Records are built by evidence.py: one builder call per small record (run, phase, lag sample...), and
# ``evidence.columns`` for the ledgers, which are built and encoded column-wise (millions of records). JSON lines
# go through ``evidence.EvidenceWriter``; Parquet gets the column types of the JSON Schema (``layout``).

_ARROW = {"string": pa.string(), "long": pa.int64(), "double": pa.float64(), "boolean": pa.bool_(),
          "json": pa.string(), "string_map": pa.map_(pa.string(), pa.string()), "string_list": pa.list_(pa.string())}


def arrow_type(ftype: FieldType) -> pa.DataType:
    if ftype.name == "struct":
        return pa.struct([(n, arrow_type(t)) for n, t in ftype.fields])
    return _ARROW[ftype.name]


def _arrow_value(value: Any, ftype: FieldType) -> Any:
    """A JSON value as Arrow takes it for the column type: free-form JSON as its text, a map as pairs."""
    if value is None:
        return None
    if ftype.name == "json":
        return json.dumps(value, sort_keys=True)
    if ftype.name == "string_map":
        return list(value.items())
    if ftype.name == "struct":
        return {n: value.get(n) for n, _t in ftype.fields}
    return value


def write_records(path: str, records: list[dict], fmt: str) -> None:
    """Write small record lists (run, phase, lag samples...) built by the evidence.py builders."""
    if not records:
        return
    if fmt == "jsonl":
        writer = ev.EvidenceWriter(path, flush_interval=0, truncate=True, fsync=False)
        try:
            writer.write_many(records)
        finally:
            writer.close()
        return
    names = list(dict.fromkeys(k for rec in records for k in rec))
    types = LAYOUT.types
    cols = {n: pa.array([_arrow_value(rec.get(n), types[n]) for rec in records], type=arrow_type(types[n]))
            for n in names}
    pq.write_table(pa.table(cols), path)


def _table(cols: dict[str, Any], n_rows: int) -> pa.Table:
    """``evidence.columns`` output as an Arrow table typed by the JSON Schema: single values repeated."""
    types = LAYOUT.types
    arrays = {}
    for name, col in cols.items():
        atype = arrow_type(types[name])
        if isinstance(col, (pa.Array, pa.ChunkedArray)):
            arrays[name] = col.cast(atype)
        elif isinstance(col, np.ndarray):
            arrays[name] = pa.array(col, type=atype, from_pandas=True)  # NaN = null (unconfirmed sends)
        else:
            arrays[name] = pa.repeat(pa.scalar(col, type=atype), n_rows)
    return pa.table(arrays)


def _write_table(path: str, table: pa.Table, fmt: str) -> None:
    if fmt == "parquet":
        pq.write_table(table, path, compression="zstd")
        return
    # JSON lines without a per-row Python loop over dicts: pandas' C encoder (nulls kept as null), appended
    # through the evidence writer.
    text = table.to_pandas().to_json(orient="records", lines=True, double_precision=6)
    writer = ev.EvidenceWriter(path, flush_interval=0, truncate=True, fsync=False)
    try:
        writer.write_lines(text, table.num_rows)
    finally:
        writer.close()


# --- the generator ---------------------------------------------------------------------------------------------

def _sample_excluding(rng: np.random.Generator, lo: int, hi: int, k: int, excluded: np.ndarray,
                      what: str) -> np.ndarray:
    """k distinct ints in [lo, hi) not in ``excluded`` (sorted), by rejection: O(k) memory at any range size."""
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    chosen = np.empty(0, dtype=np.int64)
    for _ in range(200):
        need = k - chosen.size
        cand = rng.integers(lo, hi, size=max(need * 2, 16), dtype=np.int64)
        cand = cand[~np.isin(cand, excluded)]
        chosen = np.unique(np.concatenate([chosen, cand]))
        if chosen.size >= k:
            return np.sort(rng.choice(chosen, size=k, replace=False))
    raise GenerateError(f"not enough messages to inject {k} {what} faults without overlap; raise --messages")


class _Run:
    """Index arithmetic of one run. Message i: producer i % P, seq i // P, sent in index order."""

    def __init__(self, gp: GenParams, run_id: str, seed: int, t0: float):
        self.gp, self.run_id, self.t0 = gp, run_id, t0
        self.rng = np.random.default_rng(seed)
        n, P, R = gp.messages, gp.producers, gp.rate
        if n <= 0 or P <= 0 or gp.consumers <= 0 or R <= 0:
            raise GenerateError("--messages, --producers, --consumers and --rate must be positive")
        self.scenario = ("failover" if gp.failover_at is not None
                         else "swapover" if gp.swapover_at is not None else "steady")
        self.switch_at = gp.failover_at if gp.failover_at is not None else gp.swapover_at
        default_outage = 3.0 if self.scenario == "failover" else 0.35
        self.outage = gp.outage if gp.outage is not None else default_outage
        if self.switch_at is not None:
            self.n_before = min(n, math.ceil(self.switch_at * R))
            self.switch_ts = t0 + self.switch_at
            self.active_ts = self.switch_ts + self.outage
        else:
            self.n_before, self.switch_ts, self.active_ts = n, None, None
        L, D = gp.lost, gp.in_doubt
        if L + D > n:
            raise GenerateError("--lost + --in-doubt exceed --messages")
        if self.scenario == "failover":
            if L + D > self.n_before:
                raise GenerateError("--failover-at too early: fewer messages before it than --lost + --in-doubt")
            self.in_doubt = np.arange(self.n_before - D, self.n_before, dtype=np.int64)
            self.lost = np.arange(self.n_before - D - L, self.n_before - D, dtype=np.int64)
        else:
            both = _sample_excluding(self.rng, 0, n, L + D, np.empty(0, dtype=np.int64), "lost/in-doubt")
            perm = self.rng.permutation(both.size)
            self.lost = np.sort(both[perm[:L]])
            self.in_doubt = np.sort(both[perm[L:]])
        self.in_doubt_received = self.in_doubt[: (D + 1) // 2]
        special = np.union1d(self.lost, self.in_doubt)
        # late: the last normal messages of the run (highest indices), so they cannot create reordering.
        late: list[int] = []
        i = n - 1
        special_set = set(special.tolist()) if special.size < 1_000_000 else None
        while len(late) < gp.late and i >= 0:
            if (special_set is not None and i not in special_set) or (special_set is None and not np.isin(i, special)):
                late.append(i)
            i -= 1
        self.late = np.array(sorted(late), dtype=np.int64)
        # around the switch and at both ends of the run: wider than the 0.5 s a duplicate copy arrives later
        zone = int(R * 0.6) + 2 * P + L + D + 20
        excluded = [special, self.late, np.arange(0, min(n, 2 * P + 10)), np.arange(max(0, n - zone - gp.late), n)]
        if self.switch_ts is not None:
            excluded.append(np.arange(max(0, self.n_before - zone), min(n, self.n_before + zone)))
        excl = np.unique(np.concatenate(excluded).astype(np.int64))
        self.duplicated = _sample_excluding(self.rng, 0, n, gp.duplicated, excl, "duplicated")
        excl = np.union1d(excl, self.duplicated)
        self.redelivered = _sample_excluding(self.rng, 0, n, gp.redelivered, excl, "redelivered")
        excl = np.union1d(excl, self.redelivered)
        # reorder pairs (seq 2m, 2m+1) of one producer: indices a = 2m*P + p and b = a + P.
        pairs: list[int] = []
        slots = (n // (2 * P)) * P
        tries = 0
        chosen: set[int] = set()
        while len(pairs) < gp.reorder:
            tries += 1
            if tries > 100 * gp.reorder + 1000 or slots == 0:
                raise GenerateError("not enough messages to inject --reorder pairs; raise --messages")
            u = int(self.rng.integers(0, slots))
            if u in chosen:
                continue
            a = (u // P) * 2 * P + (u % P)
            b = a + P
            if np.isin([a, b], excl).any():
                continue
            chosen.add(u)
            pairs.append(a)
        self.reorder_a = np.array(sorted(pairs), dtype=np.int64)
        self.reorder_b = self.reorder_a + P
        last_send = self.send_ts(np.array([n - 1]))[0]
        self.end_ts = float(last_send + gp.latency + 1.0)
        # failover: messages sent on dc1 but due after the incident are delivered by dc2 once it is active.
        if self.scenario == "failover":
            self.first_moved = math.ceil((self.switch_ts - gp.latency - t0) * R)
        else:
            self.first_moved = None

    # vectorised index -> value functions
    def send_ts(self, i: np.ndarray) -> np.ndarray:
        gp = self.gp
        before = i < self.n_before
        after_ts = (self.active_ts if self.active_ts is not None else 0.0) + (i - self.n_before) / gp.rate
        return np.where(before, self.t0 + i / gp.rate, after_ts)

    def base_recv(self, i: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """First receive time and site (0 dc1, 1 dc2) without the late/reorder faults."""
        gp = self.gp
        ts = self.send_ts(i) + gp.latency
        site = np.where(i < self.n_before, 0, 1)
        if self.first_moved is not None:
            moved = (i >= self.first_moved) & (i < self.n_before)
            eps = gp.latency / (self.n_before - self.first_moved + 2)
            ts = np.where(moved, self.active_ts + (i - self.first_moved + 1) * eps, ts)
            site = np.where(moved, 1, site)
        return ts, site


def generate(gp: GenParams, progress=None) -> list[dict]:
    """Write ``gp.runs`` runs under ``gp.out``; returns the truth of each run."""
    if gp.fmt not in ("jsonl", "parquet"):
        raise GenerateError("--format must be jsonl or parquet")
    truths = []
    for k in range(gp.runs):
        run_id = gp.run_id if gp.runs == 1 else f"{gp.run_id}-{k + 1:03d}"
        run = _Run(gp, run_id, gp.seed + k, T0 + k * 86_400.0)
        truths.append(_write_run(run, progress))
    return truths


def _names(prefix: str, count: int) -> pa.Array:
    return pa.array([f"{prefix}{j}" for j in range(count)], type=pa.string())


def _write_run(run: _Run, progress=None) -> dict:
    gp, rid = run.gp, run.run_id
    d = os.path.join(gp.out, rid)
    os.makedirs(d, exist_ok=True)
    ext = "parquet" if gp.fmt == "parquet" else "jsonl"
    P, C, A = gp.producers, gp.consumers, max(1, gp.addresses)
    producers, consumers = _names("p", P), _names("c", C)
    addresses = pa.array(["orders"] if A == 1 else [f"orders.{j:03d}" for j in range(A)], type=pa.string())
    site_names = pa.array(["dc1", "dc2"], type=pa.string())
    sent_counts = np.zeros(P, dtype=np.int64)
    recv_counts = np.zeros(C, dtype=np.int64)
    stats = {"sent_records": 0, "received_records": 0, "first_recv_dc2_after_switch": math.inf}
    late_rank = {int(v): j for j, v in enumerate(run.late.tolist())}
    for ci, lo in enumerate(range(0, gp.messages, gp.chunk)):
        hi = min(gp.messages, lo + gp.chunk)
        i = np.arange(lo, hi, dtype=np.int64)
        p, seq = i % P, i // P
        send_ts = run.send_ts(i)
        send_site = np.where(i < run.n_before, 0, 1)
        indoubt = np.isin(i, run.in_doubt)
        lost = np.isin(i, run.lost)
        received = ~lost & (~indoubt | np.isin(i, run.in_doubt_received))
        confirm = np.where(indoubt, np.nan, send_ts + 0.002)
        p_arr = pa.array(p)
        msg_id = pc.binary_join_element_wise(pc.take(producers, p_arr), pc.cast(pa.array(seq), pa.string()), "-")
        addr = pc.take(addresses, pa.array(p % A))
        n_rows = hi - lo
        sent = _table(ev.columns(
            "sent", rid, np.where(indoubt, send_ts, confirm), producer=pc.take(producers, p_arr), seq=seq,
            msg_id=msg_id, address=addr, site=pc.take(site_names, pa.array(send_site)), send_ts=send_ts,
            confirm_ts=confirm, outcome=pa.array(np.where(indoubt, "in_doubt", "accepted")),
            attempt=np.ones(n_rows, dtype=np.int64)), n_rows)
        _write_table(os.path.join(d, f"sent-{ci:05d}.{ext}"), sent, gp.fmt)
        sent_counts += np.bincount(p, minlength=P)
        stats["sent_records"] += n_rows

        recv_ts, recv_site = run.base_recv(i)
        # reorder: swap the receive times inside each pair (the partner may lie in another chunk)
        ia = np.isin(i, run.reorder_a)
        ib = np.isin(i, run.reorder_b)
        if ia.any():
            recv_ts[ia] = run.base_recv(i[ia] + P)[0]
        if ib.any():
            recv_ts[ib] = run.base_recv(i[ib] - P)[0]
        il = np.isin(i, run.late)
        if il.any():
            recv_ts[il] = run.end_ts + 0.5 + np.array([late_rank[int(v)] for v in i[il]]) * 0.001
        cons = p % C
        parts = []
        for mask, extra_dt, cons_shift, dcount in ((received, 0.0, 0, 0),
                                                   (np.isin(i, run.duplicated), 0.5, 1, 0),
                                                   (np.isin(i, run.redelivered), 0.2, 0, 1)):
            if not mask.any():
                continue
            idx = np.nonzero(mask)[0]
            rts = recv_ts[idx] + extra_dt
            m = idx.size
            parts.append(_table(ev.columns(
                "received", rid, rts + 0.001, consumer=pc.take(consumers, pa.array((cons[idx] + cons_shift) % C)),
                msg_id=pc.take(msg_id, pa.array(idx)), producer=pc.take(producers, pa.array(p[idx])),
                seq=seq[idx], address=pc.take(addr, pa.array(idx)),
                site=pc.take(site_names, pa.array(recv_site[idx])), recv_ts=rts, ack_ts=rts + 0.001,
                delivery_count=dcount, redelivered=dcount > 0,
                ack_mode="per-message" if gp.ack_batch <= 1 else "batch"), m))
            recv_counts += np.bincount((cons[idx] + cons_shift) % C, minlength=C)
            if run.switch_ts is not None and dcount == 0 and cons_shift == 0:
                after = rts[(recv_site[idx] == 1) & (rts >= run.switch_ts)]
                if after.size:
                    stats["first_recv_dc2_after_switch"] = min(stats["first_recv_dc2_after_switch"], float(after.min()))
        if parts:
            table = pa.concat_tables(parts)
            _write_table(os.path.join(d, f"received-{ci:05d}.{ext}"), table, gp.fmt)
            stats["received_records"] += table.num_rows
        if progress:
            progress(f"{rid}: messages {hi:,}/{gp.messages:,}")

    small = _small_records(run, sent_counts, recv_counts)
    for name, recs in small.items():
        write_records(os.path.join(d, f"{name}.{ext}"), recs, gp.fmt)
    lost_ts = run.send_ts(run.lost)
    truth = {
        "run_id": rid, "scenario": run.scenario, "messages": gp.messages,
        "sent_records": stats["sent_records"], "received_records": stats["received_records"],
        "lost": int(run.lost.size), "in_doubt": int(run.in_doubt.size),
        "in_doubt_received": int(run.in_doubt_received.size),
        "duplicated_distinct": int(run.duplicated.size), "duplicated_redelivery": int(run.redelivered.size),
        "duplicated": int(run.duplicated.size + run.redelivered.size),
        "out_of_order": int(run.reorder_a.size), "late": int(run.late.size),
        "rpo_messages": int(run.lost.size) if run.scenario == "failover" else None,
        "rpo_seconds": (float(lost_ts.max() - lost_ts.min()) if run.lost.size else 0.0)
        if run.scenario == "failover" else None,
        "rto_seconds": (stats["first_recv_dc2_after_switch"] - run.switch_ts)
        if run.switch_ts is not None and math.isfinite(stats["first_recv_dc2_after_switch"]) else None,
        "lost_msg_ids": [f"p{int(v) % P}-{int(v) // P}" for v in run.lost[:1000]],
        "params": {k: v for k, v in asdict(gp).items() if k != "out"},
    }
    with open(os.path.join(d, "_truth.json"), "w", encoding="utf-8") as fh:
        json.dump(truth, fh, indent=1, sort_keys=True)
    return truth


def _t(ts: float) -> float:
    return round(float(ts), 6)  # microseconds, as a runbook writes them


def _small_records(run: _Run, sent_counts: np.ndarray, recv_counts: np.ndarray) -> dict[str, list[dict]]:
    gp, rid, t0 = run.gp, run.run_id, run.t0
    targets = {k: v for k, v in (("rpo_seconds", gp.target_rpo_seconds), ("rpo_messages", gp.target_rpo_messages),
                                 ("rto_seconds", gp.target_rto_seconds)) if v is not None}
    params = {"rate": gp.rate, "producers": gp.producers, "consumers": gp.consumers, "ack_batch": gp.ack_batch,
              "ack_mode": "per-message" if gp.ack_batch <= 1 else "batch", "rto_overhead_seconds": gp.rto_overhead,
              "generator": {"seed": gp.seed, "messages": gp.messages}}
    runs = [ev.run_record(rid, "start", run.scenario, sites={"dc1": "active", "dc2": "passive"}, targets=targets,
                          params=params, ts=_t(t0 - 0.5)),
            ev.run_record(rid, "end", run.scenario, targets=targets, params=params, outcome="done",
                          ts=_t(run.end_ts))]
    ledger_end = [ev.ledger_end_record(rid, "sent", f"p{j}", int(sent_counts[j]), True, ts=_t(run.end_ts))
                  for j in range(gp.producers)]
    ledger_end += [ev.ledger_end_record(rid, "received", f"c{j}", int(recv_counts[j]), True, ts=_t(run.end_ts + 1.0))
                   for j in range(gp.consumers)]
    phases, incident, lag_samples, canaries = [], [], [], []
    o = run.outage
    if run.scenario == "failover":
        S = run.switch_ts
        spec = [("confirm_loss", 0.0, 0.5, "pass"), ("fence", 0.5, 0.55, "skipped"),
                ("record_at_risk", 0.55, 0.6, "done"),
                ("activate", 0.6, 0.9, "done"), ("redirect", 0.9, 1.0, "done"), ("post_gates", 1.0, 1.1, "pass")]
        for name, a, b, decision in spec:
            after = {"dc1": "unreachable", "dc2": "active"} if name in ("activate", "redirect", "post_gates") else None
            phases.append(ev.phase_record(rid, "failover", name, _t(S + a * o), _t(S + b * o), decision,
                                          roles_before={"dc1": "unreachable", "dc2": "passive"}, roles_after=after,
                                          ts=_t(S + b * o)))
    elif run.scenario == "swapover":
        S = run.switch_ts
        spec = [("preflight", 0.0, 0.1, "pass"), ("quiesce", 0.1, 0.15, "done"), ("drain", 0.15, 0.6, "pass"),
                ("deactivate", 0.6, 0.7, "done"), ("activate", 0.7, 0.9, "done"), ("redirect", 0.9, 1.0, "done"),
                ("post_gates", 1.0, 1.3, "pass")]
        for name, a, b, decision in spec:
            after = {"dc1": "passive", "dc2": "active"} if name in ("activate", "redirect", "post_gates") else None
            phases.append(ev.phase_record(rid, "swapover", name, _t(S + a * o), _t(S + b * o), decision,
                                          roles_before={"dc1": "active", "dc2": "passive"}, roles_after=after,
                                          ts=_t(S + b * o)))

    # lag samples of both mirror directions, computed with the shared lag model
    R, lat = gp.rate, gp.latency
    lost_and_doubt = np.union1d(run.lost, run.in_doubt)
    risk_start = float(run.send_ts(lost_and_doubt[:1])[0]) if lost_and_doubt.size else None
    n_samples = int((run.end_ts - t0) / gp.lag_interval) + 1
    last_dc1 = None
    for j in range(n_samples):
        ts = t0 + j * gp.lag_interval
        for site, peer in (("dc1", "dc2"), ("dc2", "dc1")):
            active = (site == "dc1") == (run.switch_ts is None or ts < run.switch_ts)
            dead = run.scenario == "failover" and site == "dc1" and ts >= run.switch_ts
            where = {"peer": peer, "connection": f"mirror-{peer}", "ts": _t(ts)}
            if dead:
                lag_samples.append(ev.lag_sample_record(rid, "agent", site, False, role="unreachable",
                                                        notes=["site unreachable"], **where))
                continue
            jitter = float(run.rng.normal(0.0, 0.02))
            if active and (run.active_ts is None or ts < run.switch_ts or ts >= run.active_ts):
                add = 2.0 * R * (1.0 + jitter)  # one send + one ack event per message
                backlog = int(run.rng.poisson(max(add * lat, 0.0)))
                if (run.scenario == "failover" and site == "dc1" and risk_start is not None
                        and risk_start <= ts < run.switch_ts):
                    # the unmirrored tail before the incident: sends confirmed but never replicated
                    unmirrored = int(min(lost_and_doubt.size, max(0.0, (ts - risk_start) * R + 1)))
                    backlog += unmirrored
                drain = add * 1.05
            else:
                add, backlog, drain = 0.0, 0, 0.0
            share = lagmodel.send_share(R if add else None, add)
            rpo = lagmodel.rpo_estimate(backlog, add, share_of_sends=share, connected=True)
            rto = lagmodel.rto_estimate(backlog, drain, gp.rto_overhead, assumed_drain_rate=50_000.0)
            rec = ev.lag_sample_record(
                rid, "agent", site, True, started=True, connected=True, backlog=backlog, pending_acks=0,
                add_rate=round(add, 3), drain_rate=round(drain, 3), lag_seconds=lagmodel.lag_seconds(backlog, drain),
                queue_diff_count=0, passive_consumers=0, rpo_messages_est=rpo.messages, rpo_seconds_est=rpo.seconds,
                rto_seconds_est=rto.seconds, role="active" if active else "passive", notes=[], **where)
            lag_samples.append(rec)
            if site == "dc1" and run.switch_ts is not None and ts <= run.switch_ts:
                last_dc1 = rec
    if run.scenario == "failover":
        lk = last_dc1 or {}
        incident.append(ev.incident_record(
            rid, "dc1", "dc2", _t(run.switch_ts), detected_ts=_t(run.switch_ts + 0.5 * o),
            at_risk_events=lk.get("backlog"), at_risk_seconds=lk.get("rpo_seconds_est"),
            last_known={k: lk.get(k) for k in ("ts", "backlog", "add_rate", "drain_rate", "lag_seconds")},
            ts=_t(run.switch_ts + 0.5 * o)))
    # canaries from the active site to the passive one
    j = 0
    ts = t0
    while ts < run.end_ts:
        before = run.switch_ts is None or ts < run.switch_ts
        origin, target = ("dc1", "dc2") if before else ("dc2", "dc1")
        outage = run.switch_ts is not None and run.switch_ts <= ts < run.active_ts
        target_dead = run.scenario == "failover" and target == "dc1"
        latency = float(np.exp(run.rng.normal(math.log(0.010), 0.35)))
        ok = not outage and not target_dead
        canaries.append(ev.canary_record(rid, f"{rid}-k{j}", origin, target, "continuity.canary", _t(ts),
                                         _t(ts + latency) if ok else None, "seen" if ok else "timeout",
                                         latency_seconds=round(latency, 6) if ok else None,
                                         ts=_t(ts + (latency if ok else 5.0))))
        j += 1
        ts += gp.canary_interval
    return {"run": runs, "ledger_end": ledger_end, "phases": phases, "incident": incident, "lag": lag_samples,
            "canaries": canaries}


def truth_files(out: str) -> list[dict[str, Any]]:
    """Read back every ``_truth.json`` under ``out`` (tests and benchmarks)."""
    found = []
    for root, _dirs, names in os.walk(out):
        if "_truth.json" in names:
            with open(os.path.join(root, "_truth.json"), encoding="utf-8") as fh:
                found.append(json.load(fh))
    return sorted(found, key=lambda t: t["run_id"])
