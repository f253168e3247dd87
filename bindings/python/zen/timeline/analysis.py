"""What `zen-timeline summarize` computes, as one JSON-able dict (schema below).

Definitions (times in ms, summed over every file given, i.e. over ranks):
- phase totals: every span of the phase at any depth; `self_ms` excludes the time of the
  phases nested in it; `share` = total / the summed length of all top-level phases.
- fused buckets: a phase the runtime records on every tensor row of a bucket (same
  "bucket" argument, phase, start and length) is one event: totals count it once, and each
  tensor's row gets an equal share of its time, bytes and nnz (`fused_mean`: rows sharing).
- an op is one step of one row (tensor or bucket) on one rank (trace.Op).
- communication phases: PUSH, PULL and the collectives (ALLREDUCE, ALLGATHER, BROADCAST,
  ALLTOALL, REDUCESCATTER, SEND/RECV, also inside names such as SPARSE_ALLREDUCE or
  NCCL_ALLREDUCE). Communication time counts those with no communication phase nested in
  them: PUSH + PULL of a sparse op, else the collective itself.
- bytes: bytes_sent + bytes_received (also spelt sent_bytes, bytes_recv, ...) of any phase,
  or a plain "bytes" argument of a communication phase; a phase nested in one whose bytes
  were counted adds none. Effective bandwidth = bytes / communication time.
- negotiation: from the "rank N ready" ticks of NEGOTIATE, how long after the first rank
  each rank became ready; where no file has ticks, from the NEGOTIATE spans of several
  ranks' files (ranks leave NEGOTIATE together, so a shorter span means a later arrival).
  The straggler is the rank latest on average, when it alone is last in more than half of
  the negotiations it took part in (ties, e.g. ranks ticked in the same cycle, name none).
"""

import re
from collections import defaultdict

from zen.timeline import trace as tr

SCHEMA = "zen-timeline-summary/1"

# Display order of the daemon's phases; others follow in order of appearance.
PHASE_ORDER = ("NEGOTIATE", "QUEUE", "FUSE", "SPARSE_ALLREDUCE", "NONZERO", "COALESCE",
               "HASH", "PUSH", "AGGREGATE", "ENCODE", "PULL", "DECODE", "DENSIFY",
               "ALLREDUCE", "ALLGATHER", "ALLTOALL", "REDUCESCATTER", "BROADCAST", "EXTRACT")
COMM_RE = re.compile(r"PUSH|PULL|ALLREDUCE|ALLGATHER|BROADCAST|BCAST|ALLTOALL|"
                     r"REDUCE_?SCATTER|SEND|RECV", re.IGNORECASE)
SENT_KEYS = ("bytes_sent", "sent_bytes", "bytes_out", "tx_bytes")
RECEIVED_KEYS = ("bytes_received", "bytes_recv", "recv_bytes", "received_bytes", "bytes_in",
                 "rx_bytes")


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _first(args, keys):
    for k in keys:
        v = _num(args.get(k))
        if v is not None:
            return v
    return None


def traffic(args):
    """(sent, received, plain) bytes an argument dict carries; None when it carries none."""
    sent, received = _first(args, SENT_KEYS), _first(args, RECEIVED_KEYS)
    if sent is None and received is None:
        plain = _num(args.get("bytes"))
        return None if plain is None else (0, 0, plain)
    return (sent or 0, received or 0, 0)


def is_comm(phase):
    return bool(COMM_RE.search(phase))


def phase_sort_key(order_seen):
    def key(name):
        up = name.upper()
        if up in PHASE_ORDER:
            return (0, PHASE_ORDER.index(up), "")
        for i, p in enumerate(PHASE_ORDER):
            if up.startswith(p):
                return (0, i + 0.5, up)
        return (1, order_seen.get(name, 1 << 30), name)

    return key


def _ms(us):
    return round(us / 1000.0, 6)


def _int(v):
    """Byte and nnz sums: whole numbers (fused buckets' shares add up to whole events)."""
    return int(round(v))


def _bw(nbytes, comm_us):
    return round(nbytes / (comm_us / 1e6), 3) if comm_us > 0 and nbytes > 0 else None


class _OpStats:
    """What one op carries: comm time, bytes, nnz, density, scheme, self time per phase."""

    def __init__(self, op):
        self.op = op
        self.comm_us = 0.0
        self.sent = self.received = self.plain = 0
        self.nnz = None
        self.density = None
        self.scheme = None
        self.top_us = 0.0
        self.phase_us = defaultdict(float)
        self.self_us = defaultdict(float)
        spans = sorted(op.spans, key=lambda s: (s.ts, s.depth))
        comm_inside = set()  # spans with a communication phase nested in them
        for s in spans:
            if is_comm(s.phase):
                anc = s.parent
                while anc is not None:
                    comm_inside.add(anc.index)
                    anc = anc.parent
        byte_spans = set()
        shared = []
        for s in spans:
            w = s.weight
            self.phase_us[s.phase] += s.dur * w
            if s.parent is None:
                self.top_us += s.dur * w
            if is_comm(s.phase) and s.index not in comm_inside:
                self.comm_us += s.dur * w  # PUSH and PULL, else the collective itself
            t = traffic(s.args)
            if t is not None and (is_comm(s.phase) or t[2] == 0):
                anc = s.parent
                while anc is not None and anc.index not in byte_spans:
                    anc = anc.parent
                if anc is None:  # no enclosing span already counted these bytes
                    byte_spans.add(s.index)
                    self.sent += t[0] * w
                    self.received += t[1] * w
                    self.plain += t[2] * w
            v = _num(s.args.get("nnz"))
            if v is not None:
                v *= w
                self.nnz = v if self.nnz is None else max(self.nnz, v)
            v = _num(s.args.get("density"))
            if v is not None and self.density is None:
                self.density = v
            if self.scheme is None and s.args.get("scheme") not in (None, ""):
                self.scheme = str(s.args["scheme"])
            if s.shared > 1:
                shared.append(s.shared)
        # How many rows this op's bucket phases were shared with (1: not fused).
        self.fused = max(shared) if shared else 1
        child_us = defaultdict(float)
        for s in spans:
            if s.parent is not None:
                child_us[s.parent.index] += s.dur * s.weight
        for s in spans:
            self.self_us[s.phase] += max(0.0, s.dur * s.weight - child_us.get(s.index, 0.0))

    @property
    def bytes(self):
        return self.sent + self.received + self.plain


def _negotiation(files):
    per_rank = defaultdict(lambda: {"negotiations": 0, "total_us": 0.0, "max_us": 0.0,
                                    "last": 0, "first": 0, "alone_last": 0})
    groups_used = 0
    spread_us = 0.0
    source = None
    tick_files = []
    for tf in files:
        groups = [g for g in tr.negotiation_groups(tf) if len(g[1]) >= 2]
        if groups:
            tick_files.append(tf.rank)
        for _row, ticks in groups:
            first = min(ticks.values())
            last = max(ticks.values())
            spread_us += last - first
            groups_used += 1
            alone = list(ticks.values()).count(last) == 1
            for rank, ts in ticks.items():
                p = per_rank[rank]
                lag = ts - first
                p["negotiations"] += 1
                p["total_us"] += lag
                p["max_us"] = max(p["max_us"], lag)
                p["last"] += ts == last
                p["alone_last"] += ts == last and alone
                p["first"] += ts == first
    if groups_used:
        source = "ticks"
    else:
        # Several ranks' files without ticks: compare NEGOTIATE lengths of the same
        # (row, step); everyone leaves together, so lag = longest - own length.
        by_key = defaultdict(dict)
        for tf in files:
            for op in tr.build_ops(tf) if len({f.rank for f in files}) > 1 else []:
                neg = [s for s in op.spans
                       if s.parent is None and s.phase.upper().startswith("NEGOTIATE")]
                if neg:
                    by_key[(op.row, op.step)][tf.rank] = neg[0].dur
        for durs in by_key.values():
            if len(durs) < 2:
                continue
            longest = max(durs.values())
            shortest = min(durs.values())
            spread_us += longest - shortest
            groups_used += 1
            alone = list(durs.values()).count(shortest) == 1
            for rank, d in durs.items():
                p = per_rank[rank]
                lag = longest - d
                p["negotiations"] += 1
                p["total_us"] += lag
                p["max_us"] = max(p["max_us"], lag)
                p["last"] += d == shortest
                p["alone_last"] += d == shortest and alone
                p["first"] += d == longest
        if groups_used:
            source = "spans"
    ranks = []
    for rank in sorted(per_rank):
        p = per_rank[rank]
        n = p["negotiations"]
        ranks.append({
            "rank": rank,
            "negotiations": n,
            "total_after_first_ms": _ms(p["total_us"]),
            "mean_after_first_ms": _ms(p["total_us"] / n) if n else 0.0,
            "max_after_first_ms": _ms(p["max_us"]),
            "last": p["last"],
            "alone_last": p["alone_last"],
            "first": p["first"],
        })
    straggler = None
    slowest = max(ranks, key=lambda r: (r["mean_after_first_ms"], -r["rank"]), default=None)
    if slowest is not None and len(ranks) >= 2 and slowest["mean_after_first_ms"] > 0:
        others = [r["mean_after_first_ms"] for r in ranks if r["rank"] != slowest["rank"]]
        margin = round(slowest["mean_after_first_ms"] - max(others), 6)
        if slowest["alone_last"] * 2 > slowest["negotiations"] and margin > 0:
            straggler = {
                "rank": slowest["rank"],
                "mean_after_first_ms": slowest["mean_after_first_ms"],
                "last": slowest["alone_last"],
                "negotiations": slowest["negotiations"],
                "margin_ms": margin,
            }
    return {
        "source": source,
        "tick_files_ranks": tick_files,
        "negotiations": groups_used,
        "mean_spread_ms": _ms(spread_us / groups_used) if groups_used else 0.0,
        "ranks": ranks,
        "slowest_rank": slowest["rank"] if slowest is not None and len(ranks) >= 2 else None,
        "straggler": straggler,
    }


def summarize(files, top=5):
    """The summary of already loaded TraceFiles (trace.load) as a JSON-able dict."""
    order_seen = {}
    all_ops = []
    phase = defaultdict(lambda: {"count": 0, "us": 0.0, "self_us": 0.0, "max_us": 0.0,
                                 "per_rank": defaultdict(float), "comm": False})
    top_us_total = 0.0
    for tf in files:
        for s in sorted(tf.spans, key=lambda s: s.ts):
            order_seen.setdefault(s.phase, len(order_seen))
        ops = tr.build_ops(tf)
        all_ops.extend(ops)
    stats = [_OpStats(op) for op in all_ops]
    for st in stats:
        top_us_total += st.top_us
        for s in st.op.spans:
            p = phase[s.phase]
            p["count"] += s.weight
            p["us"] += s.dur * s.weight
            p["max_us"] = max(p["max_us"], s.dur)
            p["per_rank"][st.op.rank] += s.dur * s.weight
            p["comm"] = is_comm(s.phase)
        for name, us in st.self_us.items():
            phase[name]["self_us"] += us
    key = phase_sort_key(order_seen)
    phases = []
    for name in sorted(phase, key=key):
        p = phase[name]
        phases.append({
            "name": name,
            "count": int(round(p["count"])),
            "total_ms": _ms(p["us"]),
            "self_ms": _ms(p["self_us"]),
            "mean_ms": _ms(p["us"] / round(p["count"])) if round(p["count"]) else 0.0,
            "max_ms": _ms(p["max_us"]),
            "share": round(p["us"] / top_us_total, 6) if top_us_total else 0.0,
            "communication": p["comm"],
            "per_rank_ms": {str(r): _ms(v) for r, v in sorted(p["per_rank"].items())},
        })

    tensors = {}
    for st in stats:
        t = tensors.setdefault(st.op.row, {
            "ops": 0, "ranks": set(), "steps": set(), "top_us": 0.0, "wall_us": 0.0,
            "phase_us": defaultdict(float), "self_us": defaultdict(float), "comm_us": 0.0,
            "sent": 0, "received": 0, "plain": 0, "nnz": [], "density": [], "schemes": set(),
            "max_op": None, "fused": []})
        t["ops"] += 1
        t["ranks"].add(st.op.rank)
        t["steps"].add(st.op.step)
        t["top_us"] += st.top_us
        t["wall_us"] += st.op.end - st.op.start
        for k, v in st.phase_us.items():
            t["phase_us"][k] += v
        for k, v in st.self_us.items():
            t["self_us"][k] += v
        t["comm_us"] += st.comm_us
        t["sent"] += st.sent
        t["received"] += st.received
        t["plain"] += st.plain
        if st.nnz is not None:
            t["nnz"].append(st.nnz)
        if st.density is not None:
            t["density"].append(st.density)
        if st.scheme:
            t["schemes"].add(st.scheme)
        t["fused"].append(st.fused)
        if t["max_op"] is None or st.top_us > t["max_op"][0]:
            t["max_op"] = (st.top_us, st.op.rank, st.op.step)
    tensor_rows = []
    for name, t in tensors.items():
        nbytes = t["sent"] + t["received"] + t["plain"]
        dominant = max(t["self_us"].items(), key=lambda kv: kv[1], default=(None, 0.0))
        tensor_rows.append({
            "name": name,
            "ops": t["ops"],
            "ranks": sorted(t["ranks"]),
            "steps": len(t["steps"]),
            "total_ms": _ms(t["top_us"]),
            "wall_ms": _ms(t["wall_us"]),
            "mean_op_ms": _ms(t["top_us"] / t["ops"]),
            "max_op": {"ms": _ms(t["max_op"][0]), "rank": t["max_op"][1],
                       "step": t["max_op"][2]},
            "phases_ms": {k: _ms(t["phase_us"][k]) for k in sorted(t["phase_us"], key=key)},
            "dominant_phase": dominant[0],
            "dominant_share": round(dominant[1] / t["top_us"], 6) if t["top_us"] else 0.0,
            "comm_ms": _ms(t["comm_us"]),
            "bytes": _int(nbytes),
            "bytes_sent": _int(t["sent"]),
            "bytes_received": _int(t["received"]),
            "fused_mean": round(sum(t["fused"]) / len(t["fused"]), 3),
            "nnz_total": _int(sum(t["nnz"])) if t["nnz"] else None,
            "nnz_mean": round(sum(t["nnz"]) / len(t["nnz"]), 3) if t["nnz"] else None,
            "density_mean": (round(sum(t["density"]) / len(t["density"]), 9)
                             if t["density"] else None),
            "schemes": sorted(t["schemes"]),
            "bandwidth_bytes_per_s": _bw(nbytes, t["comm_us"]),
        })
    tensor_rows.sort(key=lambda r: (-r["total_ms"], r["name"]))

    schemes = {}
    for st in stats:
        name = st.scheme or "-"
        s = schemes.setdefault(name, {"ops": 0, "tensors": set(), "top_us": 0.0,
                                      "comm_us": 0.0, "bytes": 0,
                                      "phase_us": defaultdict(float)})
        s["ops"] += 1
        s["tensors"].add(st.op.row)
        s["top_us"] += st.top_us
        s["comm_us"] += st.comm_us
        s["bytes"] += st.bytes
        for k, v in st.self_us.items():
            s["phase_us"][k] += v
    scheme_rows = []
    for name, s in sorted(schemes.items(), key=lambda kv: -kv[1]["top_us"]):
        scheme_rows.append({
            "scheme": name,
            "ops": s["ops"],
            "tensors": sorted(s["tensors"]),
            "total_ms": _ms(s["top_us"]),
            "mean_op_ms": _ms(s["top_us"] / s["ops"]),
            "comm_ms": _ms(s["comm_us"]),
            "bytes": _int(s["bytes"]),
            "bandwidth_bytes_per_s": _bw(s["bytes"], s["comm_us"]),
            "self_ms": {k: _ms(s["phase_us"][k]) for k in sorted(s["phase_us"], key=key)},
        })

    total_bytes = sum(st.bytes for st in stats)
    comm_us = sum(st.comm_us for st in stats)
    problems = []
    for tf in files:
        for sp in tf.unclosed:
            problems.append({"kind": "unclosed_begin", "file": tf.path, "rank": tf.rank,
                             "row": sp.row, "phase": sp.phase, "ts_ms": _ms(sp.ts)})
        for u in tf.unmatched_end:
            problems.append({"kind": "unmatched_end", "file": tf.path, "rank": tf.rank,
                             "row": u["row"], "phase": None, "ts_ms": _ms(u["ts"])})
    cycles = []
    for tf in files:
        if tf.cycles:
            c = sorted(tf.cycles)
            cycles.append({"rank": tf.rank, "count": len(c),
                           "mean_interval_ms": (_ms((c[-1] - c[0]) / (len(c) - 1))
                                                if len(c) > 1 else None)})
    return {
        "schema": SCHEMA,
        "files": [tf.to_json() for tf in files],
        "totals": {
            "files": len(files),
            "ranks": sorted({tf.rank for tf in files}),
            "events": sum(tf.events for tf in files),
            "rows": len(tensors),
            "ops": len(stats),
            "wall_ms": max((tf.to_json()["wall_ms"] for tf in files), default=0.0),
            "busy_ms": _ms(top_us_total),
            "comm_ms": _ms(comm_us),
            "bytes": _int(total_bytes),
            "bytes_sent": _int(sum(st.sent for st in stats)),
            "bytes_received": _int(sum(st.received for st in stats)),
            "bandwidth_bytes_per_s": _bw(total_bytes, comm_us),
        },
        "phases": phases,
        "tensors": tensor_rows,
        "slowest": [r["name"] for r in tensor_rows[:max(0, top)]],
        "schemes": scheme_rows,
        "negotiation": _negotiation(files),
        "cycles": cycles,
        "problems": problems,
        "warnings": [w for tf in files for w in tf.warnings],
    }


def step_table(files, max_rows=8):
    """Per (step, group): {"step", "row", "rank_count", "start_ms", "scheme", "self_ms":
    {phase: ms}}, self times summed over the group's rows (a fused bucket's phases once) and
    averaged over the ranks that ran it; what `plot` draws. A group is a row (tensor or
    bucket), or, with more than max_rows rows, all rows of one scheme."""
    ops = []
    row_scheme = {}
    for tf in files:
        for op in tr.build_ops(tf):
            st = _OpStats(op)
            ops.append(st)
            if st.scheme:
                row_scheme.setdefault(op.row, st.scheme)
    rows = {st.op.row for st in ops}
    by_scheme = len(rows) > max_rows
    members = defaultdict(set)
    for r in rows:
        members[row_scheme.get(r, "-")].add(r)

    def group(row):
        if not by_scheme:
            return row
        sc = row_scheme.get(row, "-")
        n = len(members[sc])
        return f"scheme {sc} ({n} row{'s' if n != 1 else ''})"

    cells = {}
    for st in ops:
        op = st.op
        g = group(op.row)
        c = cells.setdefault((op.step, g), {"ranks": set(), "start_us": op.start,
                                            "self_us": defaultdict(float),
                                            "scheme": row_scheme.get(op.row, "-")})
        c["ranks"].add(op.rank)
        c["start_us"] = min(c["start_us"], op.start)
        for k, v in st.self_us.items():
            c["self_us"][k] += v
    out = []
    for (step, g), c in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[1]["start_us"])):
        n = len(c["ranks"])
        out.append({"step": step, "row": g, "rank_count": n, "start_ms": _ms(c["start_us"]),
                    "scheme": c["scheme"],
                    "self_ms": {k: _ms(v / n) for k, v in c["self_us"].items()}})
    return out
