"""Reading Zen timelines (Chrome trace JSON, core/timeline.h) into spans and instants.

A timeline file is one rank's view. Rows are trace "processes" named by `process_name`
metadata (a tensor or a fused bucket); phases are "B"/"E" pairs (or "X" complete events)
on a row, nested; instants ("i"/"I", or Horovod's zero-length "X" ticks) mark, e.g., the
NEGOTIATE tick of each rank; global "CYCLE_START" instants mark background cycles.

Reading is forgiving: a file cut in the middle of an event (Chrome's unterminated-array
form, or a copy taken mid-write) yields every complete event plus a warning, and "E"
events without a "B" and "B" events never closed are reported rather than fatal.
"""

import bisect
import glob
import gzip
import json
import os
import re
from collections import Counter, defaultdict

# Ticks of ranks becoming ready during NEGOTIATE: "rank 3 ready" (Zen), "3" (Horovod).
TICK_RE = re.compile(r"^\s*(?:rank\s*)?(\d+)(?:\s+ready)?\s*$", re.IGNORECASE)
RANK_IN_PATH_RE = re.compile(r"[._-]rank[._-]?(\d+)(?=[._-]|$)", re.IGNORECASE)


class TraceError(Exception):
    """A file that is not a Chrome trace at all (not merely truncated)."""


class Span:
    """One phase on one row of one file: [ts, ts + dur) in microseconds."""

    __slots__ = ("file", "rank", "pid", "row", "phase", "ts", "dur", "args", "depth",
                 "parent", "index", "op", "weight", "shared")

    def __init__(self, file, rank, pid, row, phase, ts, dur, args):
        self.file = file
        self.rank = rank
        self.pid = pid
        self.row = row
        self.phase = phase
        self.ts = ts
        self.dur = dur
        self.args = args
        self.depth = 0
        self.parent = None  # enclosing Span on the same row, or None
        self.index = -1
        self.op = None  # the Op (one step of one row on one rank) it belongs to
        # A fused bucket's phase is recorded on each of its tensors' rows: `shared` rows
        # hold this same span, and each counts 1/shared of it (see _share).
        self.shared = 1
        self.weight = 1.0

    @property
    def end(self):
        return self.ts + self.dur


class Instant:
    __slots__ = ("file", "rank", "pid", "row", "name", "ts", "args", "scope")

    def __init__(self, file, rank, pid, row, name, ts, args, scope):
        self.file = file
        self.rank = rank
        self.pid = pid
        self.row = row
        self.name = name
        self.ts = ts
        self.args = args
        self.scope = scope


class TraceFile:
    """Everything read from one file."""

    def __init__(self, path, index):
        self.path = path
        self.index = index
        self.rank = index
        self.rank_source = "position"
        self.form = "json"  # json | unterminated | truncated | empty
        self.events = 0
        self.dropped_bytes = 0
        self.warnings = []
        self.rows = {}  # pid -> row name
        self.spans = []
        self.instants = []
        self.cycles = []  # ts of CYCLE_START markers
        self.unclosed = []  # Spans begun and never ended (dur = None)
        self.unmatched_end = []  # dicts: row, ts, args
        self.first_ts = None
        self.last_ts = None

    def to_json(self):
        return {
            "path": self.path,
            "rank": self.rank,
            "rank_source": self.rank_source,
            "form": self.form,
            "events": self.events,
            "dropped_bytes": self.dropped_bytes,
            "rows": len(self.rows),
            "spans": len(self.spans),
            "instants": len(self.instants),
            "cycles": len(self.cycles),
            "wall_ms": ms((self.last_ts - self.first_ts)
                          if self.first_ts is not None else 0),
            "warnings": list(self.warnings),
        }


def ms(us):
    return round(us / 1000.0, 6)


def expand_paths(paths):
    """A path that does not exist but has per-rank siblings (trace.json -> trace.rank0.json,
    trace.rank1.json, ...) stands for all of them, in rank order; so does one that is zenrun's
    link to its rank 0 sibling (HOROVOD_TIMELINE's path, runner/horovod_timeline.py)."""
    out = []
    for p in paths:
        if os.path.exists(p) and not _is_rank0_link(p):
            out.append(p)
            continue
        base, ext = os.path.splitext(p)
        if ext == ".gz":
            base, ext2 = os.path.splitext(base)
            ext = ext2 + ext
        found = glob.glob(glob.escape(base) + ".rank*" + glob.escape(ext))
        if not found:
            found = glob.glob(glob.escape(p) + ".rank*")
        if not found:
            raise TraceError(f"{p}: no such file (nor per-rank files {base}.rank<N>{ext})")

        def key(f):
            m = RANK_IN_PATH_RE.search(os.path.basename(f))
            return (int(m.group(1)) if m else 1 << 30, f)

        out.extend(sorted(found, key=key))
    return out


def _is_rank0_link(path):
    if not os.path.islink(path):
        return False
    target = os.readlink(path)
    found = RANK_IN_PATH_RE.search(target)
    return os.sep not in target and found is not None and int(found.group(1)) == 0


def _read_text(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def parse_events(text, path="<trace>"):
    """Returns (events, form, dropped_bytes, warnings) for the text of a Chrome trace.

    Accepts the JSON array form, the object form {"traceEvents": [...]}, Chrome's
    unterminated array (no closing bracket), and a text cut inside an event (the complete
    events before the cut are kept)."""
    warnings = []
    stripped = text.strip()
    if not stripped:
        return [], "empty", 0, [f"{path}: empty file (no events)"]
    try:
        doc = json.loads(text)
        if isinstance(doc, dict):
            doc = doc.get("traceEvents")
        if isinstance(doc, list):
            return [e for e in doc if isinstance(e, dict)], "json", 0, warnings
        raise TraceError(f"{path}: JSON but not a Chrome trace (no event array)")
    except ValueError:
        pass

    # Lenient path: walk the array one event at a time.
    start = text.find("[")
    if stripped.startswith("{"):
        key = text.find('"traceEvents"')
        start = text.find("[", key) if key >= 0 else -1
    if start < 0:
        raise TraceError(f"{path}: not a Chrome trace (no '[' starting an event array)")
    decoder = json.JSONDecoder()
    events = []
    pos = start + 1
    n = len(text)
    closed = False
    while True:
        while pos < n and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= n:
            break
        if text[pos] == "]":
            closed = True
            break
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except ValueError:
            break
        if isinstance(obj, dict):
            events.append(obj)
    dropped = n - pos if not closed else 0
    if closed:
        # A closed array that still failed to parse: trailing junk after it.
        warnings.append(f"{path}: unexpected text after the event array ignored")
        return events, "json", 0, warnings
    if text[pos:].strip():
        warnings.append(f"{path}: truncated: {len(events)} complete events read, the last "
                        f"{n - pos} bytes (an incomplete event) ignored")
        return events, "truncated", dropped, warnings
    warnings.append(f"{path}: unterminated event array (no closing ']'); "
                    f"{len(events)} events read")
    return events, "unterminated", 0, warnings


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def load_file(path, index=0):
    """Reads one file into a TraceFile: rows, matched spans, instants, cycles, problems."""
    tf = TraceFile(path, index)
    try:
        text = _read_text(path)
    except OSError as e:
        raise TraceError(f"{path}: {e.strerror or e}") from e
    events, tf.form, tf.dropped_bytes, warnings = parse_events(text, path)
    tf.warnings.extend(warnings)
    tf.events = len(events)

    ranks = Counter()
    for e in events:
        args = e.get("args")
        if e.get("ph") in ("B", "X") and isinstance(args, dict):
            r = args.get("rank")
            if isinstance(r, int) and not isinstance(r, bool):
                ranks[r] += 1
    if ranks:
        tf.rank = ranks.most_common(1)[0][0]
        tf.rank_source = "args"
        if len(ranks) > 1:
            tf.warnings.append(f"{path}: events carry several ranks {sorted(ranks)}; "
                               f"taking {tf.rank}")
    else:
        m = RANK_IN_PATH_RE.search(os.path.basename(path))
        if m:
            tf.rank = int(m.group(1))
            tf.rank_source = "path"

    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            name = (e.get("args") or {}).get("name")
            if name is not None:
                tf.rows[e.get("pid")] = str(name)

    def row_of(pid):
        return tf.rows.get(pid, f"pid {pid}")

    stacks = defaultdict(list)  # (pid, tid) -> [(name, ts, args)]
    for e in events:
        ph = e.get("ph")
        ts = _num(e.get("ts"))
        if ph in ("M", None) or ts is None:
            continue
        ts = float(ts)
        tf.first_ts = ts if tf.first_ts is None else min(tf.first_ts, ts)
        tf.last_ts = ts if tf.last_ts is None else max(tf.last_ts, ts)
        pid, tid = e.get("pid"), e.get("tid", 0)
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        name = str(e.get("name", ""))
        if ph == "B":
            stacks[(pid, tid)].append((name, ts, dict(args)))
        elif ph == "E":
            st = stacks[(pid, tid)]
            if not st:
                tf.unmatched_end.append({"row": row_of(pid), "ts": ts, "args": args})
                continue
            bname, bts, bargs = st.pop()
            bargs.update(args)
            tf.spans.append(Span(index, tf.rank, pid, row_of(pid), bname, bts, ts - bts, bargs))
        elif ph == "X":
            dur = _num(e.get("dur"))
            if dur is None:
                dur = 0.0
            tf.last_ts = max(tf.last_ts, ts + dur)
            if dur == 0 and TICK_RE.match(name):  # Horovod's zero-length rank tick
                tf.instants.append(Instant(index, tf.rank, pid, row_of(pid), name, ts, args,
                                           "t"))
            else:
                tf.spans.append(Span(index, tf.rank, pid, row_of(pid), name, ts, float(dur),
                                     dict(args)))
        elif ph in ("i", "I", "R", "n"):
            scope = e.get("s", "t")
            if name == "CYCLE_START" or scope == "g":
                if name == "CYCLE_START":
                    tf.cycles.append(ts)
                continue
            tf.instants.append(Instant(index, tf.rank, pid, row_of(pid), name, ts, args, scope))
    for (pid, _tid), st in stacks.items():
        for bname, bts, bargs in st:
            sp = Span(index, tf.rank, pid, row_of(pid), bname, bts, None, bargs)
            tf.unclosed.append(sp)

    _nest(tf.spans)
    _share(tf.spans)
    if tf.unclosed:
        tf.warnings.append(
            f"{path}: {len(tf.unclosed)} phase(s) begun and never ended (not counted): " +
            ", ".join(f"{s.phase} on {s.row} at {ms(s.ts):.3f} ms" for s in tf.unclosed[:5]) +
            (" ..." if len(tf.unclosed) > 5 else ""))
    if tf.unmatched_end:
        tf.warnings.append(
            f"{path}: {len(tf.unmatched_end)} 'E' event(s) with no open phase ignored: " +
            ", ".join(f"{u['row']} at {ms(u['ts']):.3f} ms" for u in tf.unmatched_end[:5]) +
            (" ..." if len(tf.unmatched_end) > 5 else ""))
    return tf


def _nest(spans):
    """Sets depth and parent of each span from interval containment on its row."""
    by_row = defaultdict(list)
    for i, s in enumerate(spans):
        s.index = i
        by_row[s.pid].append(s)
    for row_spans in by_row.values():
        row_spans.sort(key=lambda s: (s.ts, -s.dur, s.index))
        stack = []
        for s in row_spans:
            while stack and stack[-1].end <= s.ts:  # ended before s: a sibling, not a parent
                stack.pop()
            # A span that starts inside the top but ends after it is not nested in it.
            while stack and s.end > stack[-1].end:
                stack.pop()
            s.parent = stack[-1] if stack else None
            s.depth = len(stack)
            stack.append(s)


def _bucket_of(span):
    s = span
    while s is not None:
        b = s.args.get("bucket")
        if b is not None and b != -1 and b != "-1":
            return b
        s = s.parent
    return None


def _share(spans):
    """Spans of the same bucket (a "bucket" argument on them or a span around them) with the
    same phase, start and length on several rows are one event of a fused bucket, recorded
    on each of its tensors' rows: each copy weighs 1/copies, so totals count it once and
    each tensor gets an equal share."""
    groups = defaultdict(list)
    for s in spans:
        b = _bucket_of(s)
        if b is not None:
            groups[(str(b), s.phase, s.ts, s.dur)].append(s)
    for same in groups.values():
        if len(same) > 1:
            for s in same:
                s.shared = len(same)
                s.weight = 1.0 / len(same)


class Op:
    """One operation (a step) of one row on one rank: its top-level spans and what they
    carry. A new op starts at every top-level NEGOTIATE; rows without NEGOTIATE start one
    when a top-level phase repeats."""

    __slots__ = ("file", "rank", "row", "step", "spans", "start", "end")

    def __init__(self, file, rank, row):
        self.file = file
        self.rank = rank
        self.row = row
        self.step = None
        self.spans = []  # every span (all depths)
        self.start = None
        self.end = None


def build_ops(tf):
    """Groups a file's spans into Ops and numbers their steps."""
    tops = defaultdict(list)
    children = defaultdict(list)
    for s in tf.spans:
        if s.parent is None:
            tops[s.pid].append(s)
        else:
            root = s
            while root.parent is not None:
                root = root.parent
            children[root.index].append(s)
    ops = []
    for pid, top in tops.items():
        top.sort(key=lambda s: (s.ts, s.index))
        has_negotiate = any(s.phase.upper().startswith("NEGOTIATE") for s in top)
        cur = None
        seen = set()
        for s in top:
            new = cur is None
            if has_negotiate:
                new = new or s.phase.upper().startswith("NEGOTIATE")
            else:
                new = new or s.phase in seen
            if new:
                cur = Op(tf.index, tf.rank, s.row)
                ops.append(cur)
                seen = set()
            seen.add(s.phase)
            for x in [s] + children.get(s.index, []):
                x.op = cur
                cur.spans.append(x)
            cur.start = s.ts if cur.start is None else min(cur.start, s.ts)
            cur.end = s.end if cur.end is None else max(cur.end, s.end)
    by_row = defaultdict(list)
    for op in ops:
        by_row[op.row].append(op)
    for row_ops in by_row.values():
        row_ops.sort(key=lambda o: o.start)
        for i, op in enumerate(row_ops):
            step = None
            for s in op.spans:
                v = _num(s.args.get("step"))
                if v is not None:
                    step = int(v)
                    break
            op.step = step if step is not None else i
    ops.sort(key=lambda o: (o.start, o.row))
    return ops


def negotiation_groups(tf):
    """The NEGOTIATE ticks of a file grouped per negotiation: a list of (row, {rank: ts}).

    A tick belongs to the first NEGOTIATE span of its row that ends at or after it (ranks
    may become ready before the coordinator's own span begins; a span never closed ends at
    infinity); ticks after the last span are grouped in order, a new group starting when a
    rank ticks again."""
    neg = defaultdict(list)
    for s in tf.spans:
        if s.phase.upper().startswith("NEGOTIATE"):
            neg[s.pid].append((s.end, s.index))
    for s in tf.unclosed:
        if s.phase.upper().startswith("NEGOTIATE"):
            neg[s.pid].append((float("inf"), ("unclosed", s.ts)))
    for v in neg.values():
        v.sort(key=lambda e: e[0])
    end_times = {pid: [e[0] for e in v] for pid, v in neg.items()}
    groups = {}
    order = []
    loose = {}
    for inst in sorted(tf.instants, key=lambda i: i.ts):
        m = TICK_RE.match(inst.name)
        if not m:
            continue
        rank = int(m.group(1))
        ends = neg.get(inst.pid, [])
        j = bisect.bisect_left(end_times.get(inst.pid, []), inst.ts)
        if j < len(ends):
            key = ("span", inst.pid, ends[j][1])
        else:
            key = loose.get(inst.pid)
            if key is None or rank in groups[key][1]:
                key = ("loose", inst.pid, len(order))
                loose[inst.pid] = key
        if key not in groups:
            groups[key] = (inst.row, {})
            order.append(key)
        groups[key][1].setdefault(rank, inst.ts)
    return [groups[k] for k in order]


def load(paths):
    """Reads several files (several ranks' views); returns the TraceFiles."""
    files = []
    for i, p in enumerate(expand_paths(paths)):
        files.append(load_file(p, i))
    return files
