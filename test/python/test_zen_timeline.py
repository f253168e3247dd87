"""Tests of zen-timeline (tools/zen-timeline, bindings/python/zen/timeline).

Run: /usr/bin/python3 -m pytest -q test/python/test_zen_timeline.py   (CTest: python_zen_timeline)

The traces are written by the real C++ writer (core/timeline.h) through tools/zen-trace-gen:
4 ranks as threads, each with its own file, 6 steps of 4 rows (a zen tensor, an hc bucket,
an agsparse tensor, a dense tensor), rank 2 always late to NEGOTIATE; and (--style runtime)
the same job as core/runtime_loop.cc records it, with exact lengths. CTest passes the
binary as $ZENTEST_TRACE_GEN (never a ZEN_* name: the library rejects unknown ones); run
by hand, the newest build*/tools/zen-trace-gen of the checkout is used, else these tests
skip, saying why. The summary is checked against an independent reading of the raw events
and against the generator's manifest of what it wrote.
"""

import glob
import json
import os
import re
import struct
import subprocess
import sys
from collections import defaultdict

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(ROOT, "tools", "zen-timeline")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
from rank_jobs import BINDINGS  # noqa: E402

sys.path.insert(0, BINDINGS)

from zen.timeline import analysis, trace  # noqa: E402

RANKS, STEPS, STRAGGLER = 4, 6, 2
ROWS = ("emb.user.weight", "bucket.1", "emb.tag.weight", "fc.weight")


def _generator():
    env = os.environ.get("ZENTEST_TRACE_GEN")
    if env:
        return env
    found = [p for p in glob.glob(os.path.join(ROOT, "build*", "tools", "zen-trace-gen"))
             if os.access(p, os.X_OK)]
    return max(found, key=os.path.getmtime) if found else None


GEN = _generator()
needs_gen = pytest.mark.skipif(
    GEN is None, reason="zen-trace-gen not built (CTest sets ZENTEST_TRACE_GEN; or build "
                        "the target zen-trace-gen)")


def run_tool(*args, check=True):
    p = subprocess.run([PYTHON, TOOL, *args], capture_output=True, text=True, timeout=120)
    if check and p.returncode != 0:
        raise AssertionError(f"zen-timeline {' '.join(args)} -> {p.returncode}\n"
                             f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def generate(directory, *extra, name="trace.json", steps=STEPS):
    out = os.path.join(str(directory), name)
    manifest = os.path.join(str(directory), "manifest.json")
    cmd = [GEN, "--out", out, "--ranks", str(RANKS), "--steps", str(steps), "--straggler",
           str(STRAGGLER), "--straggler-ms", "6", "--manifest", manifest, *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    files = p.stdout.split()
    assert len(files) == RANKS and all(os.path.exists(f) for f in files)
    with open(manifest) as f:
        return files, json.load(f)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    if GEN is None:
        pytest.skip("zen-trace-gen not built")
    d = tmp_path_factory.mktemp("trace")
    files, manifest = generate(d, "--mark-cycles")
    return {"dir": str(d), "files": files, "manifest": manifest,
            "base": os.path.join(str(d), "trace.json")}


@pytest.fixture(scope="module")
def summary(job):
    return json.loads(run_tool("summarize", "--json", *job["files"]).stdout)


def raw_spans(path):
    """An independent reading of one file: B/E matched per pid, args merged -> spans."""
    with open(path) as f:
        events = json.load(f)
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    open_, spans = defaultdict(list), []
    for e in events:
        if e.get("ph") == "B":
            open_[e["pid"]].append(e)
        elif e.get("ph") == "E" and open_[e["pid"]]:
            b = open_[e["pid"]].pop()
            spans.append({"row": names[e["pid"]], "phase": b["name"], "ts": b["ts"],
                          "dur": e["ts"] - b["ts"], "args": {**b["args"], **e["args"]}})
    return spans


def manifest_totals(manifest):
    per = defaultdict(lambda: defaultdict(float))
    for rank in manifest["per_rank"]:
        for row, t in rank.items():
            for k in ("ops", "bytes_sent", "bytes_received", "nnz"):
                per[row][k] += t[k]
            for phase, c in t["phase_counts"].items():
                per[row]["count:" + phase] += c
            for phase, v in t["slept_ms"].items():
                per[row]["slept:" + phase] += v
            per[row]["scheme"] = t["scheme"]
    return per


# ---------------------------------------------------------------- summarize, real traces

@needs_gen
def test_phase_totals_equal_what_was_written(job, summary):
    ref_us, ref_n = defaultdict(int), defaultdict(int)
    for f in job["files"]:
        for s in raw_spans(f):
            ref_us[s["phase"]] += s["dur"]
            ref_n[s["phase"]] += 1
    got = {p["name"]: p for p in summary["phases"]}
    assert set(got) == set(ref_us)
    man = manifest_totals(job["manifest"])
    for phase in ref_us:
        assert got[phase]["count"] == ref_n[phase]
        assert got[phase]["total_ms"] == pytest.approx(ref_us[phase] / 1000.0, abs=1e-6)
        assert got[phase]["mean_ms"] == pytest.approx(ref_us[phase] / 1000.0 / ref_n[phase],
                                                      abs=1e-6)
        # The generator's own count, and its sleeps as a lower bound of the recorded time
        # (timestamps are whole microseconds: allow 2 us per span).
        assert ref_n[phase] == sum(man[row]["count:" + phase] for row in man)
        slept = sum(man[row]["slept:" + phase] for row in man)
        assert got[phase]["total_ms"] >= slept - 0.002 * ref_n[phase]
    # Shares are of the top-level time; the top-level phases' shares add up to 1.
    top = [p for p in summary["phases"] if p["name"] not in
           ("NONZERO", "HASH", "PUSH", "AGGREGATE", "ENCODE", "PULL", "DECODE", "ALLGATHER")]
    assert sum(p["share"] for p in top) == pytest.approx(1.0, abs=1e-5)
    assert summary["totals"]["ops"] == RANKS * STEPS * len(ROWS)
    assert summary["totals"]["ranks"] == list(range(RANKS))


@needs_gen
def test_tensor_bytes_nnz_scheme_and_bandwidth(job, summary):
    man = manifest_totals(job["manifest"])
    phase_ms = defaultdict(lambda: defaultdict(float))
    for f in job["files"]:
        for s in raw_spans(f):
            phase_ms[s["row"]][s["phase"]] += s["dur"] / 1000.0
    tensors = {t["name"]: t for t in summary["tensors"]}
    assert set(tensors) == set(ROWS)
    for name, t in tensors.items():
        m = man[name]
        assert t["ops"] == m["ops"] == RANKS * STEPS
        assert t["bytes_sent"] == m["bytes_sent"]
        assert t["bytes_received"] == m["bytes_received"]
        assert t["bytes"] == m["bytes_sent"] + m["bytes_received"]
        assert t["schemes"] == [m["scheme"]]
        # Communication time: PUSH + PULL of a sparse op, else the collective.
        comm = {"zen": ("PUSH", "PULL"), "hc": ("PUSH", "PULL"), "agsparse": ("ALLGATHER",),
                "dense": ("ALLREDUCE",)}[m["scheme"]]
        assert t["comm_ms"] == pytest.approx(sum(phase_ms[name][p] for p in comm), abs=1e-5)
        assert t["bandwidth_bytes_per_s"] == pytest.approx(t["bytes"] / (t["comm_ms"] / 1e3),
                                                           rel=1e-6)
        if m["scheme"] == "dense":
            assert t["nnz_total"] is None
        else:
            assert t["nnz_total"] == m["nnz"]
            assert 0 < t["density_mean"] < 0.05
        for phase, ms in phase_ms[name].items():
            assert t["phases_ms"][phase] == pytest.approx(ms, abs=1e-5)
    tot = summary["totals"]
    assert tot["bytes"] == sum(m["bytes_sent"] + m["bytes_received"] for m in man.values())
    assert tot["comm_ms"] == pytest.approx(sum(t["comm_ms"] for t in tensors.values()),
                                           abs=1e-5)
    assert tot["bandwidth_bytes_per_s"] == pytest.approx(tot["bytes"] / (tot["comm_ms"] / 1e3),
                                                         rel=1e-6)
    schemes = {s["scheme"]: s for s in summary["schemes"]}
    assert set(schemes) == {"zen", "hc", "agsparse", "dense"}
    for s in schemes.values():
        (row,) = s["tensors"]
        assert s["bytes"] == tensors[row]["bytes"]
        assert s["total_ms"] == pytest.approx(tensors[row]["total_ms"], abs=1e-5)
    # Slowest tensors: by total time, --top of them.
    assert summary["slowest"] == [t["name"] for t in summary["tensors"]][:5]
    assert [t["total_ms"] for t in summary["tensors"]] == sorted(
        (t["total_ms"] for t in summary["tensors"]), reverse=True)


@needs_gen
def test_the_straggler_is_named(job, summary):
    neg = summary["negotiation"]
    assert neg["source"] == "ticks" and neg["tick_files_ranks"] == [0]
    assert neg["negotiations"] == STEPS * len(ROWS)
    assert neg["straggler"]["rank"] == STRAGGLER
    # The generator makes it last every time: 6 ms after every other rank's tick.
    assert neg["straggler"]["last"] == STEPS * len(ROWS)
    by_rank = {r["rank"]: r for r in neg["ranks"]}
    assert by_rank[STRAGGLER]["mean_after_first_ms"] >= 5.0  # it was 6 ms late every time
    text = run_tool("summarize", *job["files"]).stdout
    assert re.search(rf"Straggler: rank {STRAGGLER}, ready \d+\.\d+ ms after the first rank",
                     text)
    # Rank 0's file alone has every tick.
    one = json.loads(run_tool("summarize", "--json", job["files"][0]).stdout)
    assert one["negotiation"]["straggler"]["rank"] == STRAGGLER
    # Without rank 0's ticks, the NEGOTIATE lengths of the other ranks' files tell it too.
    others = json.loads(run_tool("summarize", "--json", *job["files"][1:]).stdout)
    assert others["negotiation"]["source"] == "spans"
    assert others["negotiation"]["straggler"]["rank"] == STRAGGLER


@needs_gen
def test_text_report_and_top(job):
    text = run_tool("summarize", "--top", "2", *job["files"]).stdout
    for heading in ("Phases (all ranks", "Per tensor: time per phase", "Per tensor: traffic",
                    "Slowest tensors (top 2)", "Traffic:", "Negotiation:", "Schemes",
                    "Cycles (CYCLE_START markers):"):
        assert heading in text
    slowest = text.split("Slowest tensors (top 2)\n")[1].split("\n\n")[0].splitlines()
    assert len(slowest) == 2 and slowest[0].startswith("  1. ")
    assert "Problems" not in text


@needs_gen
def test_per_rank_files_from_the_base_path(job):
    s = json.loads(run_tool("summarize", "--json", job["base"]).stdout)
    assert [f["path"] for f in s["files"]] == job["files"]
    assert [f["rank"] for f in s["files"]] == list(range(RANKS))
    assert all(f["rank_source"] == "args" for f in s["files"])


@needs_gen
def test_cycles(summary):
    assert [c["count"] for c in summary["cycles"]] == [STEPS] * RANKS


@needs_gen
def test_json_schema(summary):
    assert summary["schema"] == analysis.SCHEMA == "zen-timeline-summary/1"
    assert set(summary) == {"schema", "files", "totals", "phases", "tensors", "slowest",
                            "schemes", "negotiation", "cycles", "problems", "warnings"}
    assert set(summary["files"][0]) == {"path", "rank", "rank_source", "form", "events",
                                        "dropped_bytes", "rows", "spans", "instants",
                                        "cycles", "wall_ms", "warnings"}
    assert set(summary["totals"]) == {"files", "ranks", "events", "rows", "ops", "wall_ms",
                                      "busy_ms", "comm_ms", "bytes", "bytes_sent",
                                      "bytes_received", "bandwidth_bytes_per_s"}
    assert set(summary["phases"][0]) == {"name", "count", "total_ms", "self_ms", "mean_ms",
                                         "max_ms", "share", "communication", "per_rank_ms"}
    assert set(summary["tensors"][0]) == {
        "name", "ops", "ranks", "steps", "total_ms", "wall_ms", "mean_op_ms", "max_op",
        "phases_ms", "dominant_phase", "dominant_share", "comm_ms", "bytes", "bytes_sent",
        "bytes_received", "fused_mean", "nnz_total", "nnz_mean", "density_mean", "schemes",
        "bandwidth_bytes_per_s"}
    assert set(summary["tensors"][0]["max_op"]) == {"ms", "rank", "step"}
    assert set(summary["schemes"][0]) == {"scheme", "ops", "tensors", "total_ms",
                                          "mean_op_ms", "comm_ms", "bytes",
                                          "bandwidth_bytes_per_s", "self_ms"}
    assert set(summary["negotiation"]) == {"source", "tick_files_ranks", "negotiations",
                                           "mean_spread_ms", "ranks", "slowest_rank",
                                           "straggler"}
    assert set(summary["negotiation"]["ranks"][0]) == {
        "rank", "negotiations", "total_after_first_ms", "mean_after_first_ms",
        "max_after_first_ms", "last", "alone_last", "first"}
    assert set(summary["negotiation"]["straggler"]) == {"rank", "mean_after_first_ms", "last",
                                                        "negotiations", "margin_ms"}
    for p in summary["phases"]:
        assert isinstance(p["count"], int) and isinstance(p["total_ms"], float)
        assert 0.0 <= p["share"] <= 1.0 and p["per_rank_ms"].keys() == {"0", "1", "2", "3"}
    assert summary["problems"] == [] and summary["warnings"] == []


@needs_gen
def test_runtime_style_trace_totals_are_exact(tmp_path):
    # --style runtime writes what core/runtime_loop.cc records ("X" spans through
    # Timeline::span at whole-microsecond offsets, ticks named by the rank, a fused bucket on
    # each of its tensors' rows), so every length in the manifest is exactly in the file.
    files, m = generate(tmp_path, "--style", "runtime")
    assert m["style"] == "runtime"
    s = json.loads(run_tool("summarize", "--json", *files).stdout)
    ph = {p["name"]: p for p in s["phases"]}
    assert set(ph) == set(m["event_us"])
    for name, us in m["event_us"].items():
        assert ph[name]["count"] == m["event_counts"][name]
        assert ph[name]["total_ms"] == pytest.approx(us / 1000.0, abs=1e-9)
    assert s["totals"]["bytes_sent"] == m["bytes_sent"]
    assert s["totals"]["bytes_received"] == m["bytes_received"]
    tensors = {t["name"]: t for t in s["tensors"]}
    assert set(tensors) == set(m["rows"])
    for name, row in m["rows"].items():
        t = tensors[name]
        k = row["fused"]
        assert t["ops"] == row["ops"] and t["schemes"] == [row["scheme"]]
        assert t["fused_mean"] == k
        assert t["bytes_sent"] == pytest.approx(row["bytes_sent"] / k, abs=1)
        assert t["bytes_received"] == pytest.approx(row["bytes_received"] / k, abs=1)
        for phase, us in row["phase_us"].items():
            share = 1 if phase in ("NEGOTIATE", "QUEUE") else k
            assert t["phases_ms"][phase] == pytest.approx(us / 1000.0 / share, abs=1e-6)
    neg = s["negotiation"]
    assert neg["source"] == "ticks" and neg["negotiations"] == m["negotiations"]
    for r in neg["ranks"]:
        assert r["total_after_first_ms"] == pytest.approx(m["lag_us"][str(r["rank"])] / 1000)
    assert neg["straggler"]["rank"] == STRAGGLER
    spans_only = json.loads(run_tool("summarize", "--json", *files[1:]).stdout)["negotiation"]
    assert spans_only["source"] == "spans" and spans_only["straggler"]["rank"] == STRAGGLER


# ---------------------------------------------------------------- damaged files

@needs_gen
def test_truncated_file(job, tmp_path):
    with open(job["files"][0]) as f:
        text = f.read()
    lines = text.split("\n")  # the writer puts one event per line: "[", events..., "]"
    events = [ln.rstrip(",") for ln in lines[1:-2]]
    keep = len(events) * 2 // 3
    # Cut in the middle of event `keep`: the events before it are all there.
    cut = len("\n".join(lines[:1 + keep])) + 1 + len(lines[1 + keep]) // 2
    damaged = tmp_path / "cut.json"
    damaged.write_text(text[:cut])
    s = json.loads(run_tool("summarize", "--json", str(damaged)).stdout)
    f0 = s["files"][0]
    assert f0["form"] == "truncated" and f0["events"] == keep
    assert f0["dropped_bytes"] == cut - len("\n".join(lines[:1 + keep])) - 1  # after ",\n"
    # The complete events give the same totals as an independent reading of them.
    (damaged.parent / "ref.json").write_text("[" + ",".join(events[:keep]) + "]")
    ref = defaultdict(int)
    for sp in raw_spans(str(damaged.parent / "ref.json")):
        ref[sp["phase"]] += sp["dur"]
    got = {p["name"]: p["total_ms"] for p in s["phases"]}
    assert got == {k: pytest.approx(v / 1000.0, abs=1e-6) for k, v in ref.items()}
    text_out = run_tool("summarize", str(damaged)).stdout
    assert "truncated" in text_out and "Problems" in text_out
    # Phases cut open by the truncation are listed, not counted.
    assert all(p["kind"] == "unclosed_begin" for p in s["problems"])

    # Chrome's unterminated form (no closing bracket): every event, same totals.
    open_ = tmp_path / "open.json"
    open_.write_text(text.rstrip().rstrip("]"))
    full = json.loads(run_tool("summarize", "--json", job["files"][0]).stdout)
    s2 = json.loads(run_tool("summarize", "--json", str(open_)).stdout)
    assert s2["files"][0]["form"] == "unterminated"
    assert s2["files"][0]["events"] == full["files"][0]["events"]
    assert s2["phases"] == full["phases"] and s2["totals"]["bytes"] == full["totals"]["bytes"]


@needs_gen
def test_unmatched_begin_and_end_are_reported(tmp_path):
    files, _ = generate(tmp_path, "--unmatched", steps=2)
    p = run_tool("summarize", "--json", *files)
    s = json.loads(p.stdout)
    kinds = sorted((x["kind"], x["rank"], x["row"], x["phase"]) for x in s["problems"])
    assert kinds == [("unclosed_begin", 1, "emb.user.weight", "PULL"),
                     ("unmatched_end", 1, "fc.weight", None)]
    # Totals leave them out: they equal the independent reading of the matched pairs.
    ref = defaultdict(int)
    for f in files:
        for sp in raw_spans(f):
            ref[sp["phase"]] += sp["dur"]
    assert {x["name"]: x["total_ms"] for x in s["phases"]} == {
        k: pytest.approx(v / 1000.0, abs=1e-6) for k, v in ref.items()}
    text = run_tool("summarize", *files).stdout
    assert re.search(r"unclosed: PULL on emb.user.weight \(rank 1\) began at [\d.]+ ms and "
                     r"never ended", text)
    assert re.search(r"unmatched E on fc.weight \(rank 1\) at [\d.]+ ms", text)


def test_not_a_trace_and_missing_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("hello")
    p = run_tool("summarize", str(bad), check=False)
    assert p.returncode == 1 and "not a Chrome trace" in p.stderr
    p = run_tool("summarize", str(tmp_path / "nope.json"), check=False)
    assert p.returncode == 1 and "no such file" in p.stderr
    p = run_tool("summarize", "--top", "-1", str(bad), check=False)
    assert p.returncode in (1, 2)
    p = run_tool("frobnicate", check=False)
    assert p.returncode == 2


def test_empty_and_object_form(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("[\n]\n")  # a timeline opened and never written to
    s = json.loads(run_tool("summarize", "--json", str(empty)).stdout)
    assert s["totals"]["ops"] == 0 and s["phases"] == [] and s["negotiation"]["source"] is None
    obj = tmp_path / "obj.json"
    obj.write_text(json.dumps({"traceEvents": [
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "t"}},
        {"name": "PUSH", "ph": "B", "ts": 10, "pid": 1, "args": {"bytes": 3000}},
        {"ph": "E", "ts": 1010, "pid": 1}]}))
    s = json.loads(run_tool("summarize", "--json", str(obj)).stdout)
    assert s["tensors"][0]["bytes"] == 3000 and s["tensors"][0]["comm_ms"] == 1.0
    assert s["tensors"][0]["bandwidth_bytes_per_s"] == 3e6


# ---------------------------------------------------------------- runtime-shaped traces

def _runtime_shaped(tmp_path):
    """What core/runtime_loop.cc records: "X" spans with explicit times (NEGOTIATE, QUEUE,
    the response's span with the bucket's args, the executor's phases inside it), and on
    rank 0 the coordinator's ticks, instants named by the rank number alone."""
    def file(rank, neg_start, ticks):
        ev = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "emb"}}]
        for step in range(3):
            t0 = step * 10000
            ev.append({"name": "NEGOTIATE", "ph": "X", "ts": t0 + neg_start, "pid": 1,
                       "dur": 2000 - neg_start, "args": {"op": "sparse_allreduce",
                                                         "rank": rank}})
            for r, at in ticks:
                ev.append({"name": str(r), "ph": "i", "s": "p", "ts": t0 + at, "pid": 1,
                           "args": {}})
            ev.append({"name": "QUEUE", "ph": "X", "ts": t0 + 2000, "dur": 100, "pid": 1,
                       "args": {"rank": rank}})
            ev.append({"name": "SPARSE_ALLREDUCE", "ph": "X", "ts": t0 + 2100, "dur": 4000,
                       "pid": 1, "args": {"bucket": step, "tensors": 1, "bytes_sent": 6000,
                                          "bytes_received": 2000, "scheme": "zen",
                                          "nnz": 50, "density": 0.05, "rank": rank}})
            for name, a, d in (("HASH", 2100, 500), ("PUSH", 2600, 1500),
                               ("AGGREGATE", 4100, 500), ("PULL", 4600, 500),
                               ("DECODE", 5100, 1000)):
                ev.append({"name": name, "ph": "X", "ts": t0 + a, "dur": d, "pid": 1,
                           "args": {"rank": rank}})
        path = tmp_path / f"rt.rank{rank}.json"
        path.write_text(json.dumps(ev))
        return str(path)

    return [file(0, 100, [(0, 100), (2, 400), (1, 1900)]), file(1, 1900, []),
            file(2, 400, [])]


def test_runtime_shaped_trace(tmp_path):
    files = _runtime_shaped(tmp_path)
    s = json.loads(run_tool("summarize", "--json", *files).stdout)
    (t,) = s["tensors"]
    assert t["ops"] == 9 and t["bytes"] == 9 * 8000
    assert t["comm_ms"] == pytest.approx(9 * 2.0)  # PUSH + PULL inside SPARSE_ALLREDUCE
    assert t["bandwidth_bytes_per_s"] == pytest.approx(72000 / 0.018)
    assert t["nnz_total"] == 9 * 50 and t["schemes"] == ["zen"]
    ph = {p["name"]: p for p in s["phases"]}
    assert ph["SPARSE_ALLREDUCE"]["total_ms"] == pytest.approx(36.0)
    assert ph["SPARSE_ALLREDUCE"]["self_ms"] == pytest.approx(0.0)
    assert ph["PUSH"]["share"] == pytest.approx(
        13.5 / (9 * 4.1 + sum(2.0 - n / 1000 for n in (0.1e3, 1.9e3, 0.4e3)) * 3), abs=1e-6)
    n = s["negotiation"]
    assert n["source"] == "ticks" and n["negotiations"] == 3
    assert n["straggler"]["rank"] == 1
    assert n["straggler"]["mean_after_first_ms"] == pytest.approx(1.8)
    by_rank = {r["rank"]: r["mean_after_first_ms"] for r in n["ranks"]}
    assert by_rank == {0: 0.0, 1: pytest.approx(1.8), 2: pytest.approx(0.3)}
    # Without the ticks (ranks 1 and 2 only): from the NEGOTIATE lengths.
    s2 = json.loads(run_tool("summarize", "--json", *files[1:]).stdout)
    assert s2["negotiation"]["source"] == "spans"
    assert s2["negotiation"]["straggler"]["rank"] == 1


def test_fused_bucket_phases_count_once(tmp_path):
    # The runtime records a bucket's phases on each of its tensors' rows (same bucket, phase,
    # start, length): totals count them once; each tensor gets an equal share.
    ev = []
    for pid, row in ((1, "a"), (2, "b")):
        ev += [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": row}},
               {"name": "NEGOTIATE", "ph": "X", "ts": 0, "dur": 100 * pid, "pid": pid,
                "args": {"rank": 0}},
               {"name": "SPARSE_ALLREDUCE", "ph": "X", "ts": 300, "dur": 1000, "pid": pid,
                "args": {"bucket": 0, "tensors": 2, "bytes_sent": 3000, "bytes_received": 1000,
                         "nnz": 40, "scheme": "zen", "rank": 0}},
               {"name": "PUSH", "ph": "X", "ts": 300, "dur": 400, "pid": pid, "args": {}},
               {"name": "PULL", "ph": "X", "ts": 700, "dur": 400, "pid": pid, "args": {}}]
    path = tmp_path / "fused.json"
    path.write_text(json.dumps(ev))
    s = json.loads(run_tool("summarize", "--json", str(path)).stdout)
    ph = {p["name"]: p for p in s["phases"]}
    assert ph["NEGOTIATE"]["count"] == 2 and ph["NEGOTIATE"]["total_ms"] == pytest.approx(0.3)
    assert ph["SPARSE_ALLREDUCE"]["count"] == 1
    assert ph["SPARSE_ALLREDUCE"]["total_ms"] == pytest.approx(1.0)
    assert ph["PUSH"]["count"] == 1 and ph["PUSH"]["total_ms"] == pytest.approx(0.4)
    assert s["totals"]["bytes"] == 4000 and s["totals"]["comm_ms"] == pytest.approx(0.8)
    assert s["totals"]["bandwidth_bytes_per_s"] == pytest.approx(4000 / 0.8e-3)
    for t in s["tensors"]:
        assert t["bytes"] == 2000 and t["nnz_total"] == 20 and t["fused_mean"] == 2
        assert t["comm_ms"] == pytest.approx(0.4)
        assert t["bandwidth_bytes_per_s"] == pytest.approx(4000 / 0.8e-3)
    assert "x2" in run_tool("summarize", str(path)).stdout


def test_ranks_ready_in_the_same_cycle_name_no_straggler(tmp_path):
    # The runtime ticks at cycle times: ranks 0-2 ready in the same cycle after rank 3 tie.
    ev = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "t"}}]
    for step in range(3):
        t0 = step * 1000
        ev.append({"name": "NEGOTIATE", "ph": "X", "ts": t0, "dur": 500, "pid": 1,
                   "args": {"rank": 0}})
        ev += [{"name": str(r), "ph": "i", "s": "p", "ts": t0 + (100 if r == 3 else 500),
                "pid": 1} for r in range(4)]
    path = tmp_path / "tie.json"
    path.write_text(json.dumps(ev))
    n = json.loads(run_tool("summarize", "--json", str(path)).stdout)["negotiation"]
    assert n["negotiations"] == 3 and n["straggler"] is None
    assert {r["rank"]: (r["last"], r["alone_last"]) for r in n["ranks"]} == {
        0: (3, 0), 1: (3, 0), 2: (3, 0), 3: (0, 0)}


def test_ticks_before_the_coordinators_span_and_no_consistent_straggler(tmp_path):
    # Ranks may be ready before rank 0 opens its NEGOTIATE span: a tick belongs to the
    # first span of its row that ends at or after it. Who is last alternates: no straggler.
    ev = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "t"}}]
    for step, (late, early) in enumerate(((1, 2), (2, 1), (1, 2), (2, 1))):
        t0 = step * 1000
        ev += [{"name": f"rank {early} ready", "ph": "i", "s": "p", "ts": t0, "pid": 1},
               {"name": "NEGOTIATE", "ph": "B", "ts": t0 + 100, "pid": 1, "args": {"rank": 0}},
               {"name": "rank 0 ready", "ph": "i", "s": "p", "ts": t0 + 100, "pid": 1},
               {"name": f"rank {late} ready", "ph": "i", "s": "p", "ts": t0 + 500, "pid": 1},
               {"ph": "E", "ts": t0 + 500, "pid": 1}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(ev))
    n = json.loads(run_tool("summarize", "--json", str(path)).stdout)["negotiation"]
    assert n["negotiations"] == 4
    assert {r["rank"]: r["mean_after_first_ms"] for r in n["ranks"]} == {
        0: pytest.approx(0.1), 1: pytest.approx(0.25), 2: pytest.approx(0.25)}
    assert n["straggler"] is None
    assert "No consistent straggler" in run_tool("summarize", str(path)).stdout


def test_parse_events_forms():
    full = '[\n{"ph":"B","name":"A","ts":1,"pid":1},\n{"ph":"E","ts":2,"pid":1}\n]\n'
    assert trace.parse_events(full)[1] == "json"
    ev, form, dropped, _ = trace.parse_events(full[:-3])
    assert form == "unterminated" and len(ev) == 2 and dropped == 0
    ev, form, dropped, warn = trace.parse_events(full[:50])
    assert form == "truncated" and len(ev) == 1 and dropped == 50 - full.index(",\n") - 2
    assert "truncated" in warn[0]
    ev, form, _, _ = trace.parse_events('{"traceEvents": [{"ph":"B","ts":1,"pid":1},')
    assert form == "unterminated" and len(ev) == 1


# ---------------------------------------------------------------- plot

def _png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


@needs_gen
def test_plot_writes_png_of_the_requested_size(job, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "steps.png"
    p = run_tool("plot", *job["files"], "-o", str(out), "--size", "1200x800")
    assert "wrote" in p.stderr
    assert _png_size(out) == (1200, 800) and out.stat().st_size > 20000
    out_default = tmp_path / "default.png"
    run_tool("plot", job["base"], "-o", str(out_default), "--x", "time")
    assert _png_size(out_default) == (1600, 1000)
    gantt = tmp_path / "gantt.png"
    run_tool("plot", "--gantt", *job["files"], "-o", str(gantt), "--time-range", "0:30",
             "--ranks", "0,2")
    assert _png_size(gantt) == (1600, 900) and gantt.stat().st_size > 20000
    run_tool("plot", "--gantt", job["base"], "-o", str(gantt), "--max-lanes", "3")
    assert _png_size(gantt) == (1600, 900)


def test_plot_usage_errors(tmp_path):
    pytest.importorskip("matplotlib")
    files = _runtime_shaped(tmp_path)
    out = tmp_path / "x.png"
    assert run_tool("plot", *files, "-o", str(out), "--size", "big",
                    check=False).returncode == 2
    assert run_tool("plot", *files, "-o", str(out), "--time-range", "5:1", "--gantt",
                    check=False).returncode == 2
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    p = run_tool("plot", str(empty), "-o", str(out), check=False)
    assert p.returncode == 1 and "nothing to plot" in p.stderr
    run_tool("plot", *files, "-o", str(out), "--size", "800x600", "--dpi", "80")
    assert _png_size(out) == (800, 600)


def test_many_rows_are_plotted_per_scheme(tmp_path):
    ev = []
    for pid in range(1, 11):
        ev.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"t{pid}"}})
        for step in range(2):
            ev.append({"name": "ALLREDUCE", "ph": "X", "ts": step * 1000, "dur": 100 * pid,
                       "pid": pid, "args": {"scheme": "dense" if pid % 2 else "zen",
                                            "bytes": 10}})
    path = tmp_path / "many.json"
    path.write_text(json.dumps(ev))
    cells = analysis.step_table(trace.load([str(path)]))
    assert sorted({c["row"] for c in cells}) == ["scheme dense (5 rows)", "scheme zen (5 rows)"]
    zen0 = [c for c in cells if c["step"] == 0 and c["row"].startswith("scheme zen")][0]
    assert zen0["self_ms"]["ALLREDUCE"] == pytest.approx(0.2 + 0.4 + 0.6 + 0.8 + 1.0)
    pytest.importorskip("matplotlib")
    out = tmp_path / "many.png"
    run_tool("plot", str(path), "-o", str(out))
    assert _png_size(out) == (1600, 1000)


def test_summarize_imports_no_matplotlib():
    code = ("import sys; sys.path.insert(0, %r); from zen.timeline import cli; "
            "import zen.timeline.analysis, zen.timeline.report; "
            "print('matplotlib' in sys.modules)" % os.path.join(ROOT, "bindings", "python"))
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False"
