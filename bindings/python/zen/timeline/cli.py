"""zen-timeline's command line: `summarize` and `plot`.

Exit status: 0 on success (also when the files were truncated or had unmatched B/E events;
those are reported), 1 when a file cannot be read or is not a Chrome trace, or the plot
cannot be drawn, 2 for usage errors.
"""

import argparse
import json
import sys

from zen.timeline import analysis
from zen.timeline import trace as tr

EPILOG = """\
examples:
  # one rank's view, or several ranks' files (several views of the same job)
  zen-timeline summarize /tmp/zen.json
  zen-timeline summarize /tmp/zen.rank0.json /tmp/zen.rank1.json --top 3
  zen-timeline summarize /tmp/zen.json      # when only zen.rank<N>.json exist: all of them
  zen-timeline summarize --json /tmp/zen.rank*.json > summary.json

  # stacked time per phase per step, per scheme, and negotiation lag per rank
  zen-timeline plot /tmp/zen.rank*.json -o steps.png
  # a trace viewer's picture (one lane per rank and tensor), 20 ms of it
  zen-timeline plot --gantt --time-range 0:20 /tmp/zen.rank*.json -o trace.png

Files are Chrome traces as Zen writes them (ZEN_TIMELINE=FILE, zenrun
--timeline-filename FILE); view them in chrome://tracing or https://ui.perfetto.dev.
Truncated files (cut mid-write, or Chrome's unterminated array) are read up to the last
complete event, with a note.
"""


def _parser():
    p = argparse.ArgumentParser(
        prog="zen-timeline",
        description="Summarize and plot Zen timelines (Chrome trace JSON).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    s = sub.add_parser(
        "summarize", help="per-phase, per-tensor, per-scheme and per-rank tables",
        description="Per-phase totals, a per-tensor table, the slowest tensors, traffic and "
                    "effective bandwidth, negotiation lag per rank (the straggler), "
                    "per-scheme totals. Several files = several ranks' views of one job.",
        epilog=analysis.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("files", nargs="+", metavar="FILE", help="timeline files (.json or .json.gz)")
    s.add_argument("--top", type=int, default=5, metavar="N",
                   help="how many of the slowest tensors to list (default 5)")
    s.add_argument("--json", action="store_true",
                   help=f"machine-readable output (schema \"{analysis.SCHEMA}\")")

    q = sub.add_parser(
        "plot", help="a PNG: time per phase per step and per scheme, or --gantt",
        description="Draws a PNG headless (matplotlib, Agg backend).")
    q.add_argument("files", nargs="+", metavar="FILE", help="timeline files")
    q.add_argument("-o", "--output", required=True, metavar="PNG", help="output PNG")
    q.add_argument("--gantt", action="store_true",
                   help="a trace viewer's picture: one lane per (rank, row), phases as bars")
    q.add_argument("--x", choices=("step", "time"), default="step",
                   help="x axis of the step chart: step number or the step's start (ms)")
    q.add_argument("--size", default=None, metavar="WxH",
                   help="pixels (default 1600x1000; 1600x900 with --gantt)")
    q.add_argument("--dpi", type=int, default=100, help="dots per inch (default 100)")
    q.add_argument("--time-range", metavar="START:END",
                   help="--gantt: only this window, ms since the timeline began")
    q.add_argument("--ranks", metavar="R,R,...", help="--gantt: only these ranks' files")
    q.add_argument("--max-lanes", type=int, default=48, metavar="N",
                   help="--gantt: at most N lanes (rank, row), the first ones (default 48)")
    q.add_argument("--title", help="figure title")
    return p


def _range(p, text):
    try:
        a, b = (float(v) for v in text.split(":"))
    except ValueError:
        p.error(f"--time-range wants START:END in ms, e.g. 0:20, not '{text}'")
    if b <= a:
        p.error(f"--time-range {text}: END must be after START")
    return a, b


def main(argv=None):
    p = _parser()
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        files = tr.load(args.files)
    except tr.TraceError as e:
        print(f"zen-timeline: error: {e}", file=sys.stderr)
        return 1

    if args.command == "summarize":
        if args.top < 0:
            p.error("--top must be >= 0")
        summary = analysis.summarize(files, top=args.top)
        if args.json:
            json.dump(summary, sys.stdout, indent=1)
            sys.stdout.write("\n")
        else:
            from zen.timeline import report

            sys.stdout.write(report.render(summary, top=args.top))
        return 0

    from zen.timeline import plot

    try:
        size = plot.parse_size(args.size or ("1600x900" if args.gantt else "1600x1000"))
    except ValueError as e:
        p.error(str(e))
    if args.max_lanes < 1:
        p.error("--max-lanes must be >= 1")
    if args.dpi < 20 or args.dpi > 600:
        p.error("--dpi must be 20..600")
    ranks = None
    if args.ranks:
        try:
            ranks = {int(r) for r in args.ranks.split(",")}
        except ValueError:
            p.error(f"--ranks wants comma-separated rank numbers, not '{args.ranks}'")
    try:
        if args.gantt:
            plot.plot_gantt(files, args.output, size=size, dpi=args.dpi,
                            time_range=_range(p, args.time_range) if args.time_range else None,
                            title=args.title, ranks=ranks, max_lanes=args.max_lanes)
        else:
            if args.time_range or ranks is not None:
                p.error("--time-range and --ranks go with --gantt")
            plot.plot_steps(files, args.output, size=size, dpi=args.dpi, x=args.x,
                            title=args.title)
    except ImportError as e:
        print(f"zen-timeline: error: plot needs matplotlib (Debian: python3-matplotlib; "
              f"tools/setup installs it): {e}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as e:
        print(f"zen-timeline: error: {e}", file=sys.stderr)
        return 1
    for w in (w for tf in files for w in tf.warnings):
        print(f"zen-timeline: note: {w}", file=sys.stderr)
    print(f"zen-timeline: wrote {args.output}", file=sys.stderr)
    return 0
