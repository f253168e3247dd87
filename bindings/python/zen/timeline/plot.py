"""`zen-timeline plot`: pictures of a timeline, drawn headless (matplotlib's Agg backend).

- default: time per phase per step as stacked bars (one bar per row and step, phases'
  self time averaged over ranks; x = step, or the step's start time with --x time), the
  time per phase of each scheme (mean per op), and, when there are NEGOTIATE ticks, how
  long after the first rank each rank was ready (the straggler stands out).
- --gantt: a trace viewer's picture: one lane per (rank, row), each phase a bar from its
  start to its end, nested phases drawn thinner inside their parent, NEGOTIATE ticks as
  marks — what chrome://tracing or Perfetto show, for a README or a report.

matplotlib is imported here only, so `summarize` needs nothing beyond the standard library.
"""

from collections import defaultdict

from zen.timeline import analysis as an
from zen.timeline.report import human_bw

# One colour per daemon phase (the same in every picture); others get the leftovers.
PHASE_COLORS = {
    "NEGOTIATE": "#b0b0b0",
    "QUEUE": "#d9d9d9",
    "FUSE": "#8c564b",
    "NONZERO": "#bcbd22",
    "HASH": "#9467bd",
    "PUSH": "#1f77b4",
    "AGGREGATE": "#ff7f0e",
    "ENCODE": "#e377c2",
    "PULL": "#2ca02c",
    "DECODE": "#17becf",
    "ALLREDUCE": "#d62728",
    "ALLGATHER": "#7f7f7f",
    "ALLTOALL": "#aec7e8",
    "REDUCESCATTER": "#ff9896",
    "BROADCAST": "#393b79",
}
_SPARE = ["#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354",
          "#756bb1", "#636363", "#9c9ede"]


def _colors(names):
    out = {}
    spare = iter(_SPARE * 10)
    for n in names:
        out[n] = PHASE_COLORS.get(n.upper()) or next(spare)
    return out


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _rects(ax, rects, color, edge="none", hatch=None, linewidth=0.0, zorder=2):
    """Adds rectangles (x, width, y, height) as one collection: fast with 100k of them."""
    from matplotlib.collections import PolyCollection

    verts = [((x, y), (x, y + h), (x + w, y + h), (x + w, y)) for x, w, y, h in rects]
    ax.add_collection(PolyCollection(verts, facecolors=color, edgecolors=edge, hatch=hatch or None,
                                     linewidths=linewidth, zorder=zorder), autolim=True)


def parse_size(text):
    """'1600x1000' -> (1600, 1000) pixels."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--size wants WIDTHxHEIGHT in pixels, e.g. 1600x1000, not '{text}'")
    if not (100 <= w <= 20000 and 100 <= h <= 20000):
        raise ValueError(f"--size {text}: each side must be 100..20000 pixels")
    return w, h


def _figure(plt, size, dpi):
    w, h = size
    return plt.figure(figsize=(w / dpi, h / dpi), dpi=dpi)


def _save(fig, out, dpi):
    # No bbox_inches="tight": the PNG is exactly --size pixels.
    fig.savefig(out, dpi=dpi, format="png")


def plot_steps(files, out, size=(1600, 1000), dpi=100, x="step", title=None):
    plt = _pyplot()
    summary = an.summarize(files, top=0)
    cells = an.step_table(files)
    if not cells:
        raise ValueError("no complete phases in the timeline: nothing to plot")
    phase_names = [p["name"] for p in summary["phases"]]
    colors = _colors(phase_names)
    rows = []
    for c in cells:
        if c["row"] not in rows:
            rows.append(c["row"])
    neg = summary["negotiation"]
    panels = 3 if neg["source"] is not None and neg["ranks"] else 2

    fig = _figure(plt, size, dpi)
    gs = fig.add_gridspec(2, 2 if panels == 3 else 1, height_ratios=[3, 2],
                          hspace=0.35, wspace=0.25, left=0.1, right=0.84, top=0.92,
                          bottom=0.08)
    ax = fig.add_subplot(gs[0, :])
    ax_s = fig.add_subplot(gs[1, 0])
    ax_n = fig.add_subplot(gs[1, 1]) if panels == 3 else None

    # Top: one bar per (step, row), stacked by phase.
    steps = sorted({c["step"] for c in cells})
    nrows = len(rows)
    width = 0.8 / nrows
    hatches = ["", "//", "..", "xx", "\\\\", "++", "oo", "--"]
    if x == "time":
        step_start = {}
        for c in cells:
            step_start[c["step"]] = min(step_start.get(c["step"], c["start_ms"]), c["start_ms"])
        span = max(step_start.values()) - min(step_start.values()) or 1.0
        width = 0.8 * span / max(1, len(steps)) / nrows
    # One bar() call per (row, phase): thousands of steps stay fast.
    many = len(cells) > 200  # thin bars: no edges or hatches (and fast to draw)
    row_index = {r: i for i, r in enumerate(rows)}
    series = defaultdict(lambda: ([], [], []))  # (row, phase) -> xs, heights, bottoms
    for c in cells:
        ri = row_index[c["row"]]
        base = step_start[c["step"]] if x == "time" else c["step"]
        xpos = base + (ri - (nrows - 1) / 2) * width
        bottom = 0.0
        for p in phase_names:
            v = c["self_ms"].get(p, 0.0)
            if v <= 0:
                continue
            xs, hs, bs = series[(ri, p)]
            xs.append(xpos)
            hs.append(v)
            bs.append(bottom)
            bottom += v
    for (ri, p), (xs, hs, bs) in series.items():
        _rects(ax, [(xv - width * 0.475, width * 0.95, b, h) for xv, h, b in zip(xs, hs, bs)],
               colors[p], edge="white", hatch=None if many else hatches[ri % len(hatches)],
               linewidth=0 if many else 0.3)
    ax.autoscale_view()
    ax.set_ylim(bottom=0)
    if x == "time":
        ax.set_xlabel("start of the step (ms since the timeline began)")
    else:
        ax.set_xlabel("step")
        if len(steps) <= 40:
            ax.set_xticks(steps)
    ax.set_ylabel("ms (self time, mean over ranks)")
    ax.set_title("Time per phase per step (one bar per " +
                 ("scheme" if rows and rows[0].startswith("scheme ") else "tensor or bucket") +
                 ", left to right)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    row_handles = [plt.Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="black",
                                 hatch=hatches[i % len(hatches)] * 2) for i in range(nrows)]
    ax.legend(row_handles, rows, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
              title="bars, left to right", title_fontsize=9, frameon=False)

    # Bottom left: per scheme, mean self ms per op by phase.
    schemes = summary["schemes"]
    for i, srow in enumerate(schemes):
        left = 0.0
        for p in phase_names:
            v = srow["self_ms"].get(p, 0.0) / max(1, srow["ops"])
            if v <= 0:
                continue
            ax_s.barh(i, v, left=left, color=colors[p], edgecolor="white", linewidth=0.3)
            left += v
        bw = human_bw(srow["bandwidth_bytes_per_s"])
        ax_s.text(left, i, f"  {srow['mean_op_ms']:.2f} ms/op, {bw}", va="center", fontsize=8)
    ax_s.set_yticks(range(len(schemes)))
    ax_s.set_yticklabels([f"{s['scheme']}\n{s['ops']} ops" for s in schemes], fontsize=8)
    ax_s.invert_yaxis()
    ax_s.set_xlabel("ms per op (self time by phase)")
    ax_s.set_title("Per scheme", fontsize=10)
    ax_s.margins(x=0.5)
    ax_s.grid(axis="x", alpha=0.3)

    if ax_n is not None:
        rk = neg["ranks"]
        st = neg["straggler"]
        vals = [r["mean_after_first_ms"] for r in rk]
        cols = ["black" if st and r["rank"] == st["rank"] else "#a0a0a0" for r in rk]
        ax_n.bar([str(r["rank"]) for r in rk], vals, color=cols)
        ax_n.set_xlabel("rank")
        ax_n.set_ylabel("ms after the first rank (mean)")
        ax_n.set_title("NEGOTIATE: ready after the first rank" +
                       (f" — straggler: rank {st['rank']}" if st else ""), fontsize=10)
        ax_n.grid(axis="y", alpha=0.3)

    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[p]) for p in phase_names]
    fig.legend(handles, phase_names, loc="lower right", bbox_to_anchor=(0.995, 0.08),
               fontsize=9, title="phase", frameon=False)
    t = summary["totals"]
    fig.suptitle(title or (f"Zen timeline — {t['files']} file(s), ranks "
                           f"{', '.join(str(r) for r in t['ranks'])}, {t['ops']} ops"),
                 fontsize=12)
    _save(fig, out, dpi)
    plt.close(fig)


def plot_gantt(files, out, size=(1600, 900), dpi=100, time_range=None, title=None,
               ranks=None, max_lanes=48):
    plt = _pyplot()
    spans = []
    ticks = []
    first_pid = {}  # (rank, row) -> where it first appears: lanes keep the trace's row order
    for tf in files:
        if ranks is not None and tf.rank not in ranks:
            continue
        for s in sorted(tf.spans, key=lambda s: (s.ts, s.depth)):
            first_pid.setdefault((s.rank, s.row), (s.file, s.pid if isinstance(s.pid, int) else 0))
            spans.append(s)
        ticks.extend(tf.instants)
    if not spans:
        raise ValueError("no complete phases in the timeline: nothing to plot")
    lanes = sorted(first_pid, key=lambda k: (k[0], first_pid[k]))
    all_lanes = len(lanes)
    lanes = lanes[:max_lanes]
    lane_index = {k: i for i, k in enumerate(lanes)}
    spans = [s for s in spans if (s.rank, s.row) in lane_index]
    lo, hi = (time_range if time_range is not None else
              (min(s.ts for s in spans) / 1000.0, max(s.end for s in spans) / 1000.0))
    order = {}
    for s in spans:
        if lo <= s.end / 1000.0 and s.ts / 1000.0 <= hi:
            order.setdefault(s.phase, len(order))
    names = sorted(order, key=an.phase_sort_key(order))
    colors = _colors(names)

    fig = _figure(plt, size, dpi)
    ax = fig.add_axes([0.17, 0.08, 0.70, 0.84])
    max_depth = max(s.depth for s in spans)
    bars = defaultdict(list)  # (phase, depth) -> [(x, w, y)]
    for s in spans:
        a, b = s.ts / 1000.0, s.end / 1000.0
        if b < lo or a > hi or s.phase not in colors:
            continue
        bars[(s.phase, s.depth)].append((a, max(b - a, (hi - lo) * 1e-4),
                                         lane_index[(s.rank, s.row)]))
    for (phase, depth), items in sorted(bars.items(), key=lambda kv: kv[0][1]):
        h = 0.8 * (1.0 - 0.25 * depth / max(1, max_depth))
        _rects(ax, [(a, w, y - h / 2, h) for a, w, y in items], colors[phase], zorder=2 + depth)
    tx, ty = [], []
    for i in ticks:
        key = (i.rank, i.row)
        if key in lane_index and lo <= i.ts / 1000.0 <= hi:
            tx.append(i.ts / 1000.0)
            ty.append(lane_index[key] - 0.42)
    if tx:
        ax.plot(tx, ty, linestyle="none", marker="v", markersize=4, color="black",
                label="NEGOTIATE tick")
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([f"rank {r}: {row}" for r, row in lanes], fontsize=8)
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("ms since the timeline began (each rank's own clock)")
    ax.grid(axis="x", alpha=0.3)
    for y in range(1, len(lanes)):
        if lanes[y][0] != lanes[y - 1][0]:
            ax.axhline(y - 0.5, color="black", linewidth=0.6)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[p]) for p in names]
    labels = list(names)
    if tx:
        handles.append(plt.Line2D([], [], linestyle="none", marker="v", color="black"))
        labels.append("rank ready tick")
    fig.legend(handles, labels, loc="center right", fontsize=8, frameon=False, title="phase")
    shown = (f" — first {len(lanes)} of {all_lanes} lanes (--max-lanes, --ranks)"
             if all_lanes > len(lanes) else "")
    ax.set_title((title or "Zen timeline (trace view)") + shown, fontsize=11)
    _save(fig, out, dpi)
    plt.close(fig)
