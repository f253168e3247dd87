"""The text form of a summary (analysis.summarize)."""


def human_bytes(n):
    if n is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def human_bw(bps):
    return "-" if bps is None else f"{bps / 1e9:.3f} GB/s"


def _table(headers, rows, align=None):
    """Left-aligned first column, right-aligned others unless align says otherwise."""
    cells = [[str(h) for h in headers]] + [[("-" if v is None else str(v)) for v in r]
                                           for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    align = align or ("<" + ">" * (len(headers) - 1))
    out = []
    for r in cells:
        out.append("  " + "  ".join(f"{c:{a}{w}}" for c, a, w in zip(r, align, widths)).rstrip())
    return out


def _f(v, digits=3):
    return "-" if v is None else f"{v:.{digits}f}"


def render(s, top=5):
    t = s["totals"]
    ranks = t["ranks"]
    rank_text = (f"rank {ranks[0]}" if len(ranks) == 1 else
                 f"ranks {', '.join(str(r) for r in ranks)}")
    lines = [f"zen-timeline: {t['files']} file{'s' if t['files'] != 1 else ''} "
             f"({rank_text}), {t['events']} events, {t['ops']} ops on {t['rows']} rows, "
             f"longest file {t['wall_ms']:.3f} ms"]
    for f in s["files"]:
        if f["form"] != "json":
            lines.append(f"  note: {f['path']}: {f['form']} "
                         f"({f['events']} events read"
                         + (f", {f['dropped_bytes']} bytes dropped" if f["dropped_bytes"] else "")
                         + ")")

    lines += ["", "Phases (all ranks; share = of all top-level phase time)"]
    lines += _table(
        ["phase", "count", "total ms", "self ms", "mean ms", "max ms", "share"],
        [[p["name"], p["count"], _f(p["total_ms"]), _f(p["self_ms"]), _f(p["mean_ms"]),
          _f(p["max_ms"]), f"{100 * p['share']:.1f}%"] for p in s["phases"]])

    phase_names = [p["name"] for p in s["phases"]]
    lines += ["", "Per tensor: time per phase (ms, summed over ranks)"]
    lines += _table(
        ["tensor", "ops", "total"] + phase_names,
        [[r["name"], r["ops"], _f(r["total_ms"], 2)] +
         [_f(r["phases_ms"].get(p), 2) if p in r["phases_ms"] else "" for p in phase_names]
         for r in s["tensors"]])

    lines += ["", "Per tensor: traffic (bytes = sent + received; GB/s = bytes / "
                  "communication time; fused xN: its share of a bucket of N)"]
    traffic_rows = [
        [r["name"], ",".join(r["schemes"]) or "-",
         "-" if r["fused_mean"] <= 1 else f"x{r['fused_mean']:g}", human_bytes(r["bytes"]),
         "-" if r["nnz_mean"] is None else f"{r['nnz_mean']:.0f}",
         "-" if r["density_mean"] is None else f"{r['density_mean']:.4g}",
         _f(r["comm_ms"]), human_bw(r["bandwidth_bytes_per_s"])] for r in s["tensors"]]
    lines += _table(["tensor", "scheme", "fused", "bytes", "nnz/op", "density", "comm ms",
                     "bandwidth"], traffic_rows, align="<<>>>>>>")

    lines += ["", f"Slowest tensors (top {top})"]
    by_name = {r["name"]: r for r in s["tensors"]}
    for i, name in enumerate(s["slowest"], 1):
        r = by_name[name]
        lines.append(
            f"  {i}. {name}: {r['total_ms']:.3f} ms over {r['ops']} ops "
            f"(mean {r['mean_op_ms']:.3f} ms); slowest op {r['max_op']['ms']:.3f} ms "
            f"(rank {r['max_op']['rank']}, step {r['max_op']['step']}); most time in "
            f"{r['dominant_phase']} ({100 * r['dominant_share']:.0f}%)")

    lines += ["", f"Traffic: {human_bytes(t['bytes'])} (sent {human_bytes(t['bytes_sent'])}, "
                  f"received {human_bytes(t['bytes_received'])}) in {t['comm_ms']:.3f} ms of "
                  f"communication phases = {human_bw(t['bandwidth_bytes_per_s'])}"]

    n = s["negotiation"]
    lines.append("")
    if n["source"] is None:
        lines.append("Negotiation: no NEGOTIATE ticks (\"rank N ready\") and no second rank's "
                     "NEGOTIATE spans to compare")
    else:
        how = ("NEGOTIATE ticks in the file of rank " +
               ", ".join(str(r) for r in n["tick_files_ranks"]) if n["source"] == "ticks"
               else "NEGOTIATE span lengths across ranks' files")
        lines.append(f"Negotiation: how long after the first rank each rank was ready "
                     f"({n['negotiations']} negotiations, from {how}; mean spread "
                     f"{n['mean_spread_ms']:.3f} ms)")
        lines += _table(["rank", "negotiations", "mean ms", "max ms", "total ms", "last",
                         "first"],
                        [[r["rank"], r["negotiations"], _f(r["mean_after_first_ms"]),
                          _f(r["max_after_first_ms"]), _f(r["total_after_first_ms"]),
                          r["last"], r["first"]] for r in n["ranks"]])
        st = n["straggler"]
        if st is not None:
            lines.append(f"  Straggler: rank {st['rank']}, ready {st['mean_after_first_ms']:.3f}"
                         f" ms after the first rank on average, last in {st['last']} of "
                         f"{st['negotiations']} negotiations "
                         f"({st['margin_ms']:.3f} ms later than the next rank)")
        elif n["slowest_rank"] is not None:
            lines.append(f"  No consistent straggler (latest on average: rank "
                         f"{n['slowest_rank']}, but not alone last in most negotiations)")

    lines += ["", "Schemes"]
    scheme_rows = [
        [r["scheme"], r["ops"], len(r["tensors"]), _f(r["total_ms"]), _f(r["mean_op_ms"]),
         _f(r["comm_ms"]), human_bytes(r["bytes"]), human_bw(r["bandwidth_bytes_per_s"])]
        for r in s["schemes"]]
    lines += _table(["scheme", "ops", "tensors", "total ms", "mean op ms", "comm ms", "bytes",
                     "bandwidth"], scheme_rows)

    if s["cycles"]:
        lines += ["", "Cycles (CYCLE_START markers): " + "; ".join(
            f"rank {c['rank']}: {c['count']}"
            + (f", every {c['mean_interval_ms']:.3f} ms" if c["mean_interval_ms"] else "")
            for c in s["cycles"])]

    if s["problems"] or s["warnings"]:
        lines += ["", "Problems"]
        for p in s["problems"]:
            if p["kind"] == "unclosed_begin":
                lines.append(f"  unclosed: {p['phase']} on {p['row']} (rank {p['rank']}) began "
                             f"at {p['ts_ms']:.3f} ms and never ended; not counted")
            else:
                lines.append(f"  unmatched E on {p['row']} (rank {p['rank']}) at "
                             f"{p['ts_ms']:.3f} ms: no phase open; ignored")
        for w in s["warnings"]:
            if "never ended" in w or "'E' event(s)" in w:
                continue  # listed one by one above
            lines.append(f"  {w}")
    return "\n".join(lines) + "\n"
