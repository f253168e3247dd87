"""zen.timeline: reading and summarizing Zen timelines (tools/zen-timeline; README
"Timelines").

Modules: trace (reading Chrome-trace files into spans, instants and ops; forgiving of
truncated files and unmatched B/E), analysis (what `summarize` computes, as a JSON-able
dict), report (its text form), plot (pictures; the only module that imports matplotlib),
cli (the command line). Importing the package loads none of them.
"""


def main(argv=None):
    """Runs zen-timeline with `argv` (default sys.argv[1:]); returns its exit code."""
    from zen.timeline.cli import main as _main

    return _main(argv)
