"""zen-timeline on a real run, and zenrun's flags reaching the daemon: zenrun launches 2 ranks
of timeline_job.py with --timeline-filename and --scheme; the daemon's stats (through the
zen.torch API) must show the scheme, the per-rank timeline files must exist and parse, and
`zen-timeline summarize/plot` must read them: the negotiation and the zen scheme's phases
with the bytes the stats report."""

import json
import os
import subprocess

from rank_jobs import HERE, ROOT, TORCH_PYTHON as PYTHON, zenrun

TIMELINE = os.path.join(ROOT, "tools", "zen-timeline")


def test_real_timeline_summarize_and_plot(tmp_path):
    trace = tmp_path / "run.json"
    proc = zenrun(2, PYTHON, os.path.join(HERE, "timeline_job.py"),
                  flags=["--timeline-filename", str(trace), "--scheme", "zen",
                         "--cycle-time-ms", "2"],
                  extra_env={"ZEN_TIMEOUT": "30", "ZEN_THREADS": "1", "OMP_NUM_THREADS": "1",
                             "ZEN_STALL_SHUTDOWN_TIME_SECONDS": "20"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stats = {}
    for line in proc.stdout.splitlines():
        if "ZENTEST_STATS " in line:
            rank = int(line[1:line.index("]")])
            stats[rank] = json.loads(line.split("ZENTEST_STATS ", 1)[1])
    assert sorted(stats) == [0, 1], proc.stdout
    for rank in (0, 1):  # --scheme reached every rank's daemon
        assert stats[rank]["tensors"]["sparse_allreduce.emb.w"]["last_scheme"] == "zen", stats
        assert stats[rank]["buckets_by_scheme"].get("zen") == 5, stats

    files = sorted(str(p) for p in tmp_path.glob("run.rank*.json"))
    assert len(files) == 2, list(tmp_path.iterdir())
    for f in files:
        with open(f) as fh:
            assert isinstance(json.load(fh), list)

    summary = subprocess.run([PYTHON, TIMELINE, "summarize", "--json"] + files,
                             capture_output=True, text=True, timeout=120)
    assert summary.returncode == 0, summary.stderr
    report = json.loads(summary.stdout)
    phases = json.dumps(report)
    for phase in ("NEGOTIATE", "PUSH", "PULL"):
        assert phase in phases, phase
    assert "emb.w" in phases and "dense.w" in phases

    human = subprocess.run([PYTHON, TIMELINE, "summarize"] + files,
                           capture_output=True, text=True, timeout=120)
    assert human.returncode == 0 and "NEGOTIATE" in human.stdout, human.stderr

    png = tmp_path / "run.png"
    plot = subprocess.run([PYTHON, TIMELINE, "plot", files[0], "-o", str(png)],
                          capture_output=True, text=True, timeout=180)
    assert plot.returncode == 0, plot.stderr
    assert png.stat().st_size > 10_000


def test_horovod_variables_take_effect(tmp_path):
    """A Horovod user's environment in a zen job (core/horovod_env.h): HOROVOD_TIMELINE writes
    the per-rank timelines and its path reads as rank 0's, HOROVOD_FUSION_THRESHOLD and
    HOROVOD_CYCLE_TIME are the values in effect on every rank (the stats' config), and a
    HOROVOD_* variable zen has no meaning for is named in one warning per rank."""
    trace = tmp_path / "hvd.json"
    proc = zenrun(2, PYTHON, os.path.join(HERE, "timeline_job.py"),
                  extra_env={"HOROVOD_TIMELINE": str(trace),
                             "HOROVOD_FUSION_THRESHOLD": str(8 << 20),
                             "HOROVOD_CYCLE_TIME": "3.5",
                             "HOROVOD_HIERARCHICAL_ALLREDUCE": "1",
                             "ZEN_TIMEOUT": "30", "ZEN_THREADS": "1", "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    configs = {}
    for line in proc.stdout.splitlines():
        if "ZENTEST_STATS " in line:
            configs[int(line[1:line.index("]")])] = json.loads(
                line.split("ZENTEST_STATS ", 1)[1])["config"]
    assert sorted(configs) == [0, 1], proc.stdout
    for config in configs.values():
        assert config["fusion_threshold_bytes"] == 8 << 20, config
        assert config["cycle_time_ms"] == 3.5, config
        assert config["timeline"] == str(trace), config
    files = sorted(tmp_path.glob("hvd.rank*.json"))
    assert [f.name for f in files] == ["hvd.rank0.json", "hvd.rank1.json"]
    for f in files:
        with open(f) as fh:
            assert any("NEGOTIATE" in json.dumps(e) for e in json.load(fh))
    # Where Horovod writes its one trace: rank 0's (zenrun's link, horovod_timeline.py).
    assert trace.is_symlink() and os.readlink(trace) == "hvd.rank0.json"
    with open(trace) as given, open(files[0]) as rank0:
        assert json.load(given) == json.load(rank0)
    summary = subprocess.run([PYTHON, TIMELINE, "summarize", "--json", str(trace)],
                             capture_output=True, text=True, timeout=180)
    assert summary.returncode == 0, summary.stderr
    assert [f["path"] for f in json.loads(summary.stdout)["files"]] == [str(f) for f in files]
    warnings = [line for line in proc.stdout.splitlines() + proc.stderr.splitlines()
                if "Horovod variables zen ignores: HOROVOD_HIERARCHICAL_ALLREDUCE" in line]
    assert len(warnings) == 2, proc.stdout + proc.stderr
