"""Tests of the zenrun launcher (tools/zenrun, bindings/python/zen/runner).

Run: /usr/bin/python3 -m pytest -q test/python/test_zenrun.py   (also CTest: python_zenrun)

Every zenrun run is bounded by a subprocess timeout. The ranks run rank_probe.py, which
prints its environment; the multi-host tests run ranks in two network namespaces created
here (root needed; skipped, saying why, only where `ip netns add` is not permitted).
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ZENRUN = os.path.join(ROOT, "tools", "zenrun")
PROBE = os.path.join(HERE, "rank_probe.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

from rank_jobs import BINDINGS, held_port  # noqa: E402

sys.path.insert(0, BINDINGS)  # as every test file: one pytest process may run them all

from zen.runner import hosts as hostlib  # noqa: E402
from zen.runner.mpi_run import TagParser  # noqa: E402
from zen.runner.rank_wrapper import WRAPPER  # noqa: E402
from netns_hosts import ip as _ip  # noqa: E402

LINE = re.compile(r"^\[(\d+)\]<(stdout|stderr)>:(.*)$")
KNOB_FLAGS = ["--fusion-threshold-mb", "64", "--cycle-time-ms", "2.5", "--cache-capacity", "512",
              "--scheme", "hc", "--auto-profile-calls", "2", "--auto-schemes", "agsparse,zen",
              "--hash-functions", "4", "--stall-check-time", "30",
              "--log-level", "DEBUG", "--timeline-filename", "/tmp/zen-timeline.json",
              "--timeline-mark-cycles", "--autotune", "--autotune-log-file", "/tmp/tune.csv",
              "--autotune-warmup-samples", "0", "--autotune-steps-per-sample", "5",
              "--autotune-bayes-opt-max-samples", "12", "--autotune-gaussian-process-noise",
              "0.5", "--autotune-confirm-pairs", "0"]
KNOB_ENV = {"ZEN_AUTOTUNE": "1", "ZEN_AUTOTUNE_LOG": "/tmp/tune.csv",
            "ZEN_AUTOTUNE_WARMUP_SAMPLES": "0", "ZEN_AUTOTUNE_STEPS_PER_SAMPLE": "5",
            "ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "12",
            "ZEN_AUTOTUNE_GAUSSIAN_PROCESS_NOISE": "0.5", "ZEN_AUTOTUNE_CONFIRM_PAIRS": "0",
            "ZEN_FUSION_THRESHOLD": str(64 << 20), "ZEN_CYCLE_TIME": "2.5",
            "ZEN_CACHE_CAPACITY": "512", "ZEN_SCHEME": "hc", "ZEN_AUTO_PROFILE_CALLS": "2",
            "ZEN_AUTO_SCHEMES": "agsparse,zen", "ZEN_HASH_FUNCTIONS": "4",
            "ZEN_STALL_CHECK_TIME_SECONDS": "30", "ZEN_LOG_LEVEL": "debug",
            "ZEN_TIMELINE": "/tmp/zen-timeline.json", "ZEN_TIMELINE_MARK_CYCLES": "1"}
PLACEMENT = ("ZEN_RANK", "ZEN_SIZE", "ZEN_LOCAL_RANK", "ZEN_LOCAL_SIZE", "ZEN_CROSS_RANK",
             "ZEN_CROSS_SIZE")
HAVE_MPIRUN = shutil.which("mpirun") is not None


def zenrun(args, timeout=30, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("ZEN_", "ZENRUN_"))}
    e.update(env or {})
    return subprocess.run([ZENRUN] + args, capture_output=True, text=True, timeout=timeout,
                          env=e, cwd=HERE)


def rank_lines(text, stream):
    """{rank: [lines]} of the prefixed lines of `stream`; fails on any unprefixed line."""
    out = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if m is None:
            continue
        assert m.group(2) == stream, line
        out.setdefault(int(m.group(1)), []).append(m.group(3))
    return out


def probe_reports(stdout):
    reports = {}
    for rank, lines in rank_lines(stdout, "stdout").items():
        env_lines = [line for line in lines if line.startswith("ENV ")]
        assert len(env_lines) == 1, lines
        reports[rank] = json.loads(env_lines[0][4:])
    return reports


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def assert_all_dead(pids, within=5.0):
    deadline = time.monotonic() + within
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if alive(p)], "ranks survived zenrun"


def _processes_with_cmdline(cmdline):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read() == cmdline and alive(int(pid)):
                    found.append(int(pid))
        except OSError:
            pass
    return found


def read_pids(folder, n, within=15.0):
    deadline = time.monotonic() + within
    while True:
        names = [f for f in os.listdir(folder) if re.fullmatch(r"rank\.\d+", f)]
        if len(names) == n:
            return [int(open(os.path.join(folder, f)).read()) for f in names]
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    raise AssertionError(f"only {os.listdir(folder)} of {n} ranks wrote their pid")


# -- command line ------------------------------------------------------------------------

def test_help_and_version():
    r = zenrun(["--help"])
    assert r.returncode == 0
    assert "examples:" in r.stdout and "--launch-command" in r.stdout
    r = zenrun(["--version"])
    assert r.returncode == 0 and re.fullmatch(r"zenrun \d+\.\d+\.\d+\n", r.stdout)


@pytest.mark.parametrize("args,message", [
    (["--bogus", "-np", "2", "true"], "unrecognized arguments: --bogus"),
    (["true"], "-np"),
    (["-np", "2"], "no command given"),
    (["-np", "0", "true"], "-np must be >= 1"),
    (["-np", "two", "true"], "expected an integer, not 'two'"),
    (["-np", "2", "--scheme", "fast", "true"], "invalid choice: 'fast'"),
    (["-np", "2", "--hash-functions", "9", "true"], "--hash-functions must be in [1, 8]"),
    (["-np", "2", "--auto-schemes", "zen,dense", "true"], "'dense' is not a candidate"),
    (["-np", "2", "--auto-schemes", "hc,hc", "true"], "a scheme is listed twice in 'hc,hc'"),
    (["-np", "2", "--fusion-threshold-mb", "-1", "true"], "--fusion-threshold-mb must be"),
    (["-np", "2", "--cycle-time-ms", "x", "true"], "expected a number, not 'x'"),
    (["-np", "2", "--autotune-steps-per-sample", "0", "true"],
     "--autotune-steps-per-sample must be in [1, 1000000]"),
    (["-np", "2", "--autotune-confirm-pairs", "-1", "true"],
     "--autotune-confirm-pairs must be in [0, 1000000]"),
    (["-np", "2", "--autotune-confirm-pairs", "1.5", "true"], "expected an integer, not '1.5'"),
    (["-np", "2", "--log-level", "loud", "true"], "expected one of trace, debug"),
    (["-np", "2", "--tcp", "--mpi", "true"], "not allowed with argument"),
    (["-np", "2", "-H", "a:1", "--hostfile", "f", "true"], "not allowed with argument"),
    (["-np", "5", "-H", "localhost:4", "true"], "-np 5 but the hosts offer only 4 slots"),
    (["-np", "2", "-H", "a:0", "true"], "slots of 'a' must be a positive integer"),
    (["-np", "2", "-H", "a:2,a:1", "true"], "host 'a' is listed twice"),
    (["-np", "2", "--hostfile", "/nonexistent/hosts", "true"], "cannot read"),
    (["-np", "2", "--launch-command", "ssh", "true"], "must contain {host}"),
    (["-np", "2", "--start-timeout", "soon", "true"], "--start-timeout"),
    (["-np", "2", "--controller-addr", "h:port", "true"], "expected HOST or HOST:PORT"),
    (["-np", "2", "-p", "0", "true"], "--ssh-port must be in [1, 65535]"),
    (["-np", "2", "--ssh-port", "ssh", "true"], "expected an integer, not 'ssh'"),
    (["-np", "2", "-i", "/nonexistent/key", "true"],
     "-i/--ssh-identity-file '/nonexistent/key' is not a readable file"),
    (["-np", "2", "-p", "2222", "--launch-command", "ssh -x {host}", "true"],
     "apply to the default launch command ('ssh -o BatchMode=yes -o StrictHostKeyChecking=no "
     "{host}'), not to --launch-command 'ssh -x {host}': put the ssh options into it (e.g. "
     "'ssh -o BatchMode=yes -o StrictHostKeyChecking=no -p 2222 {host}')"),
    (["-np", "2", "--mpi", "-p", "2222", "--mpi-args", "-mca plm_rsh_args -q", "true"],
     "which --mpi-args sets too"),
    (["-np", "2", "--no-stall-check", "--stall-check-warning-time-seconds", "5", "true"],
     "--no-stall-check turns the stall check off: --stall-check-warning-time-seconds would "
     "do nothing"),
    (["-np", "2", "--no-stall-check", "--stall-check-shutdown-time-seconds", "90", "true"],
     "--stall-check-shutdown-time-seconds would do nothing"),
    (["-np", "2", "--stall-check-shutdown-time-seconds", "30", "true"],
     "--stall-check-shutdown-time-seconds 30 is below the default warning time (60 s)"),
    (["-np", "2", "--stall-check-time", "10", "--stall-check-shutdown-time-seconds", "5",
      "true"], "is below --stall-check-warning-time-seconds (10 s)"),
    (["-np", "2", "--stall-check-time", "0", "--stall-check-shutdown-time-seconds", "5",
      "true"], "needs the stall check"),
    (["-np", "2", "--stall-check-shutdown-time-seconds", "-1", "true"],
     "--stall-check-shutdown-time-seconds must be in [0, 10000000.0]"),
    (["-np", "2", "--hierarchical-allreduce", "--num-nccl-streams", "2", "true"],
     "horovodrun's --hierarchical-allreduce has no zenrun counterpart: zen has no "
     "hierarchical allreduce"),
    (["-np", "2", "--config-file", "/nonexistent/hvd.yaml", "true"],
     "--config-file '/nonexistent/hvd.yaml': No such file or directory"),
])
def test_bad_flags_exit_2(args, message):
    r = zenrun(args)
    assert r.returncode == 2, r.stderr
    assert "zenrun: error:" in r.stderr and message in r.stderr, r.stderr
    assert r.stdout == ""


def test_ssh_flags_refused_next_to_launch_command_from_environment():
    r = zenrun(["-np", "2", "-p", "2222", "true"],
               env={"ZENRUN_LAUNCH_COMMAND": "ssh -F cfg {host}"})
    assert r.returncode == 2
    assert "not to ZENRUN_LAUNCH_COMMAND 'ssh -F cfg {host}'" in r.stderr, r.stderr


def test_stall_shutdown_checked_against_the_environment_warning_time():
    r = zenrun(["-np", "1", "--stall-check-shutdown-time-seconds", "3", "true"],
               env={"ZEN_STALL_CHECK_TIME_SECONDS": "5"})
    assert r.returncode == 2 and "below ZEN_STALL_CHECK_TIME_SECONDS (5 s)" in r.stderr
    r = zenrun(["-np", "1", "--stall-check-shutdown-time-seconds", "5", PYTHON, PROBE],
               env={"ZEN_STALL_CHECK_TIME_SECONDS": "2"})
    assert r.returncode == 0, r.stderr
    env = probe_reports(r.stdout)[0]["env"]
    assert (env["ZEN_STALL_CHECK_TIME_SECONDS"], env["ZEN_STALL_SHUTDOWN_TIME_SECONDS"]) == \
        ("2", "5")


def test_unknown_zen_variable_warns():
    r = zenrun(["-np", "1", PYTHON, "-c", "pass"], env={"ZEN_BOGUS": "1"})
    assert r.returncode == 0
    assert "warning: ZEN_BOGUS" in r.stderr


# -- placement (Horovod's get_host_assignments) -----------------------------------------

def test_host_parsing_and_placement():
    hosts = hostlib.parse_hosts("h1:2,h2:3,h3")
    assert [(h.name, h.slots) for h in hosts] == [("h1", 2), ("h2", 3), ("h3", 1)]
    slots = hostlib.assign_ranks(hosts, 5)
    got = [(s.host, s.rank, s.local_rank, s.local_size, s.cross_rank, s.cross_size)
           for s in slots]
    assert got == [("h1", 0, 0, 2, 0, 2), ("h1", 1, 1, 2, 0, 2),
                   ("h2", 2, 0, 3, 1, 2), ("h2", 3, 1, 3, 1, 2), ("h2", 4, 2, 3, 0, 1)]
    assert all(s.size == 5 for s in slots)
    # Fewer ranks than slots: later hosts stay empty and do not count in cross sizes.
    slots = hostlib.assign_ranks(hosts, 2)
    assert [(s.host, s.cross_size) for s in slots] == [("h1", 1), ("h1", 1)]


def test_hostfile_parsing():
    text = "# cluster\nnode1 slots=4\n\nnode2 slots=2  # spare\nnode3\nnode4:3\n"
    hosts = hostlib.parse_hostfile_text(text)
    assert [(h.name, h.slots) for h in hosts] == [("node1", 4), ("node2", 2), ("node3", 1),
                                                 ("node4", 3)]
    with pytest.raises(hostlib.HostError, match="expected 'host slots=N'"):
        hostlib.parse_hostfile_text("node1 cores=4\n")


def test_mpirun_tag_parser_reassembles_chunks():
    # Open MPI tags every chunk; a line may arrive in pieces interleaved with other ranks.
    data = (b"[1,1]<stdout>:a[1,0]<stdout>:a[1,1]<stdout>:b\n[1,0]<stdout>:b\n"
            b"mpirun says\n[1,0]<stderr>:tail")
    for step in (1, 2, 3, 5, 1000):
        p, out = TagParser(), []
        for i in range(0, len(data), step):
            out += p.feed(data[i:i + step])
        out += p.finish()
        assert out == [(1, "stdout", b"ab\n"), (0, "stdout", b"ab\n"),
                       (None, None, b"mpirun says\n"), (0, "stderr", b"tail")]


# -- local runs ---------------------------------------------------------------------------

@pytest.mark.parametrize("np_", [1, 2, 4])
def test_tcp_env_and_prefixes(np_):
    r = zenrun(["-np", str(np_), "--tcp"] + KNOB_FLAGS + [PYTHON, PROBE])
    assert r.returncode == 0, r.stderr
    reports = probe_reports(r.stdout)
    assert sorted(reports) == list(range(np_))
    assert rank_lines(r.stderr, "stderr") == {i: [f"hello from rank {i}"] for i in range(np_)}
    secrets_seen, addrs = set(), set()
    for rank, rep in reports.items():
        env = rep["env"]
        assert [env[k] for k in PLACEMENT] == [str(rank), str(np_), str(rank), str(np_), "0",
                                               "1"]
        for k, v in KNOB_ENV.items():
            assert env[k] == v, k
        secrets_seen.add(env["ZEN_SECRET"])
        addrs.add(env["ZEN_CONTROLLER_ADDR"])
        assert not [k for k in env if k.startswith("ZENRUN_")]
    assert len(secrets_seen) == 1 and re.fullmatch(r"[0-9a-f]{32}", secrets_seen.pop())
    assert len(addrs) == 1 and re.fullmatch(r"127\.0\.0\.1:\d+", addrs.pop())


def test_controller_port_cannot_be_taken_before_rank_0_listens(tmp_path):
    """zenrun holds the controller port it chose until rank 0 has it: another process (rank
    1, before rank 0 listens: rank 0 waits for its attempt) cannot take it, and rank 0 listens
    on the socket it inherited (ZEN_CONTROLLER_FD, rank 0 only). When zenrun only probed a
    free port, the thief got it and rank 0 could not listen."""
    r = zenrun(["-np", "3", PYTHON, PROBE, "--pid-dir", str(tmp_path), "--rendezvous",
                "--steal-port"], timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = rank_lines(r.stdout, "stdout")
    assert "STEAL refused" in lines[1], lines
    assert "RENDEZVOUS ok peers=[1, 2]" in lines[0], lines
    reports = probe_reports(r.stdout)
    assert reports[0]["env"]["ZEN_CONTROLLER_FD"].isdigit()
    assert [rank for rank in reports if "ZEN_CONTROLLER_FD" in reports[rank]["env"]] == [0]
    # A port given by hand is the user's to keep free (here: held until the job binds it): no
    # socket is handed over.
    with held_port() as port:
        r = zenrun(["-np", "2", "--controller-addr", f"127.0.0.1:{port}", PYTHON, PROBE,
                    "--rendezvous"], timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not [rep for rep in probe_reports(r.stdout).values()
                if "ZEN_CONTROLLER_FD" in rep["env"]]


@pytest.mark.skipif(not HAVE_MPIRUN, reason="mpirun not installed (openmpi-bin)")
@pytest.mark.parametrize("np_", [1, 2, 4])
def test_mpi_env_and_prefixes(np_):
    r = zenrun(["-np", str(np_), "--mpi"] + KNOB_FLAGS + [PYTHON, PROBE])
    assert r.returncode == 0, r.stderr
    reports = probe_reports(r.stdout)
    assert sorted(reports) == list(range(np_))
    assert rank_lines(r.stderr, "stderr") == {i: [f"hello from rank {i}"] for i in range(np_)}
    secrets_seen = set()
    for rank, rep in reports.items():
        env = rep["env"]
        assert env["OMPI_COMM_WORLD_RANK"] == str(rank)
        assert env["OMPI_COMM_WORLD_SIZE"] == str(np_)
        assert env["OMPI_COMM_WORLD_LOCAL_RANK"] == str(rank)
        assert env["OMPI_COMM_WORLD_LOCAL_SIZE"] == str(np_)
        assert not [k for k in PLACEMENT + ("ZEN_CONTROLLER_ADDR",) if k in env]
        for k, v in KNOB_ENV.items():
            assert env[k] == v, k
        secrets_seen.add(env["ZEN_SECRET"])
    assert len(secrets_seen) == 1


def test_stale_placement_variables_are_replaced():
    r = zenrun(["-np", "2", PYTHON, PROBE], env={"ZEN_RANK": "7", "ZEN_SIZE": "9",
                                                 "ZEN_SECRET": "old", "ZEN_SCHEME": "dense"})
    assert r.returncode == 0, r.stderr
    reports = probe_reports(r.stdout)
    assert [reports[i]["env"]["ZEN_RANK"] for i in (0, 1)] == ["0", "1"]
    assert reports[0]["env"]["ZEN_SECRET"] != "old"
    assert reports[0]["env"]["ZEN_SCHEME"] == "dense"  # knobs from the caller pass through


def test_output_filename_writes_rank_logs(tmp_path):
    logs = tmp_path / "logs"
    r = zenrun(["-np", "2", "--output-filename", str(logs), PYTHON, PROBE])
    assert r.returncode == 0, r.stderr
    for rank in (0, 1):
        out = (logs / f"rank.{rank}" / "stdout").read_text()
        assert out.startswith("ENV ") and f'"ZEN_RANK": "{rank}"' in out
        assert (logs / f"rank.{rank}" / "stderr").read_text() == f"hello from rank {rank}\n"


def test_partial_lines_and_long_lines_stay_whole():
    code = ("import sys\n"
            "sys.stdout.write('a'); sys.stdout.flush()\n"
            "sys.stdout.write('b' * 200000 + '\\n'); sys.stdout.write('no newline')\n")
    r = zenrun(["-np", "2", PYTHON, "-c", code])
    assert r.returncode == 0, r.stderr
    lines = rank_lines(r.stdout, "stdout")
    for rank in (0, 1):
        assert lines[rank] == ["a" + "b" * 200000, "no newline"]


# -- horovodrun's flags: stall check, config file, timestamps, ssh -------------------------

@pytest.mark.parametrize("flags,expected", [
    (["--no-stall-check"], {"ZEN_STALL_CHECK_TIME_SECONDS": "0"}),
    (["--stall-check-warning-time-seconds", "2", "--stall-check-shutdown-time-seconds", "7.5"],
     {"ZEN_STALL_CHECK_TIME_SECONDS": "2", "ZEN_STALL_SHUTDOWN_TIME_SECONDS": "7.5"}),
    (["--stall-check-shutdown-time-seconds", "90"], {"ZEN_STALL_SHUTDOWN_TIME_SECONDS": "90"}),
    # horovodrun's meaning: its launch-check cache, which zenrun does not have; the library's
    # response cache keeps its size.
    (["--disable-cache", "--gloo"], {}),
    (["--log-without-timestamp"], {"ZEN_LOG_HIDE_TIME": "1"}),
    (["--log-hide-timestamp"], {"ZEN_LOG_HIDE_TIME": "1"}),  # horovodrun's older name
    (["--mpi-threads-disable"], {"ZEN_MPI_THREADS_DISABLE": "1"}),
])
def test_stall_and_cache_flags_reach_ranks(flags, expected):
    r = zenrun(["-np", "2"] + flags + [PYTHON, PROBE])
    assert r.returncode == 0, r.stderr
    for rep in probe_reports(r.stdout).values():
        got = {k: v for k, v in rep["env"].items()
               if k.startswith(("ZEN_STALL", "ZEN_CACHE", "ZEN_LOG", "ZEN_MPI"))}
        assert got == expected


CONFIG_YAML = """\
# horovodrun's config file layout
params:
  fusion_threshold_mb: 32
  cycle_time_ms: 4
  cache_capacity: 100
  hierarchical_allreduce: null   # null: absent, as in horovodrun
autotune:
  enabled: true
  log_file: /tmp/zen-autotune.csv
  warmup_samples: 1
  steps_per_sample: 6
  bayes_opt_max_samples: 9
  gaussian_process_noise: 0.3
timeline:
  filename: /tmp/zen-config-timeline.json
  mark_cycles: true
stall_check:
  enabled: true
  warning_time_seconds: 10
  shutdown_time_seconds: 40
logging:
  level: ERROR
  with_timestamp: false
library_options:
  mpi_threads_disable: true
"""
CONFIG_ENV = {"ZEN_FUSION_THRESHOLD": str(32 << 20), "ZEN_CYCLE_TIME": "4",
              "ZEN_CACHE_CAPACITY": "100", "ZEN_AUTOTUNE": "1",
              "ZEN_AUTOTUNE_LOG": "/tmp/zen-autotune.csv", "ZEN_AUTOTUNE_WARMUP_SAMPLES": "1",
              "ZEN_AUTOTUNE_STEPS_PER_SAMPLE": "6", "ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "9",
              "ZEN_AUTOTUNE_GAUSSIAN_PROCESS_NOISE": "0.3",
              "ZEN_TIMELINE": "/tmp/zen-config-timeline.json", "ZEN_TIMELINE_MARK_CYCLES": "1",
              "ZEN_STALL_CHECK_TIME_SECONDS": "10", "ZEN_STALL_SHUTDOWN_TIME_SECONDS": "40",
              "ZEN_LOG_LEVEL": "error", "ZEN_LOG_HIDE_TIME": "1", "ZEN_MPI_THREADS_DISABLE": "1"}
# The file's JSON twin: read without PyYAML.
CONFIG_JSON = json.dumps({
    "params": {"fusion_threshold_mb": 32, "cycle_time_ms": 4, "cache_capacity": 100},
    "autotune": {"enabled": True, "log_file": "/tmp/zen-autotune.csv", "warmup_samples": 1,
                 "steps_per_sample": 6, "bayes_opt_max_samples": 9,
                 "gaussian_process_noise": 0.3},
    "timeline": {"filename": "/tmp/zen-config-timeline.json", "mark_cycles": True},
    "stall_check": {"enabled": True, "warning_time_seconds": 10, "shutdown_time_seconds": 40},
    "logging": {"level": "ERROR", "with_timestamp": False},
    "library_options": {"mpi_threads_disable": True}})


def _knobs(report):
    return {k: v for k, v in report["env"].items() if k in CONFIG_ENV}


@pytest.mark.parametrize("kind", ["yaml", "json"])
def test_config_file_sets_flags_command_line_wins(tmp_path, kind):
    if kind == "yaml":
        pytest.importorskip("yaml")
    path = tmp_path / f"horovod.{kind}"
    path.write_text(CONFIG_YAML if kind == "yaml" else CONFIG_JSON)
    r = zenrun(["-np", "2", "--config-file", str(path), PYTHON, PROBE])
    assert r.returncode == 0, r.stderr
    for rep in probe_reports(r.stdout).values():
        assert _knobs(rep) == CONFIG_ENV
    # Flags win wherever they stand (horovodrun's override_args), before or after the file.
    r = zenrun(["-np", "2", "--cycle-time-ms", "7", "--config-file", str(path),
                "--log-level", "info", "--stall-check-warning-time-seconds", "20", PYTHON, PROBE])
    assert r.returncode == 0, r.stderr
    for rep in probe_reports(r.stdout).values():
        assert _knobs(rep) == dict(CONFIG_ENV, ZEN_CYCLE_TIME="7", ZEN_LOG_LEVEL="info",
                                   ZEN_STALL_CHECK_TIME_SECONDS="20")


def test_config_file_stall_check_disabled_and_controller(tmp_path):
    path = tmp_path / "hvd.json"
    path.write_text(json.dumps({"stall_check": {"enabled": False}, "controller": "gloo"}))
    r = zenrun(["-np", "1", "--config-file", str(path), PYTHON, PROBE])
    assert r.returncode == 0, r.stderr
    assert probe_reports(r.stdout)[0]["env"]["ZEN_STALL_CHECK_TIME_SECONDS"] == "0"
    if HAVE_MPIRUN:  # controller: mpi runs through mpirun; --tcp on the command line wins
        path.write_text(json.dumps({"controller": "mpi"}))
        r = zenrun(["-np", "1", "--config-file", str(path), PYTHON, PROBE])
        assert r.returncode == 0, r.stderr
        assert "OMPI_COMM_WORLD_RANK" in probe_reports(r.stdout)[0]["env"]
        r = zenrun(["-np", "1", "--config-file", str(path), "--tcp", PYTHON, PROBE])
        assert r.returncode == 0, r.stderr
        assert "OMPI_COMM_WORLD_RANK" not in probe_reports(r.stdout)[0]["env"]


@pytest.mark.parametrize("text,message", [
    ("params:\n  hierarchical_allreduce: true\n",
     "params.hierarchical_allreduce is not supported: zen has no hierarchical allreduce"),
    ("library_options:\n  num_nccl_streams: 2\n",
     "library_options.num_nccl_streams is not supported"),
    ("library_options:\n  thread_affinity: 1\n",
     "library_options.thread_affinity is not supported: zen has no thread affinity setting"),
    ("params:\n  fusion_mb: 3\n", "params.fusion_mb is not a horovodrun setting zenrun knows"),
    ("params:\n  cycle_time_ms: fast\n", "params.cycle_time_ms: expected a number, not 'fast'"),
    ("params:\n  cache_capacity: -1\n", "params.cache_capacity: --cache-capacity must be"),
    ("timeline:\n  mark_cycles: 1\n", "timeline.mark_cycles: expected true or false, not 1"),
    ("logging:\n  level: LOUD\n", "logging.level: expected one of trace"),
    ("controller: jsrun\n", "controller: expected gloo or mpi, not 'jsrun'"),
    ("elastic:\n  min_np: 2\n", "elastic: not one of horovodrun's sections zenrun reads"),
    ("- params\n", "expected a mapping of sections, not list"),
    ("stall_check:\n  enabled: false\n  warning_time_seconds: 5\n",
     "--no-stall-check turns the stall check off"),
])
def test_config_file_errors(tmp_path, text, message):
    pytest.importorskip("yaml")
    path = tmp_path / "hvd.yaml"
    path.write_text(text)
    r = zenrun(["-np", "1", "--config-file", str(path), "true"])
    assert r.returncode == 2, r.stderr
    assert f"zenrun: error: --config-file '{path}'" in r.stderr or "--no-stall-check" in message
    assert message in r.stderr, r.stderr


def test_config_file_without_pyyaml(tmp_path):
    """zenrun is standard library only: without PyYAML a YAML file fails naming the module,
    and the JSON form still works."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "yaml.py").write_text("raise ImportError('PyYAML hidden by the test')\n")
    yaml_file, json_file = tmp_path / "hvd.yaml", tmp_path / "hvd.json"
    yaml_file.write_text(CONFIG_YAML)
    json_file.write_text(CONFIG_JSON)
    env = {"PYTHONPATH": str(blocker)}
    r = zenrun(["-np", "1", "--config-file", str(yaml_file), "true"], env=env)
    assert r.returncode == 2
    assert "reading YAML needs the Python module 'yaml' (PyYAML" in r.stderr, r.stderr
    r = zenrun(["-np", "1", "--config-file", str(json_file), PYTHON, PROBE], env=env)
    assert r.returncode == 0, r.stderr
    assert _knobs(probe_reports(r.stdout)[0]) == CONFIG_ENV


STAMPED = re.compile(r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}"
                     r"(\[\d+\]<(stdout|stderr)>:.*)$")


@pytest.mark.parametrize("mode", ["--tcp", "--mpi"])
def test_prefix_output_with_timestamp(mode):
    if mode == "--mpi" and not HAVE_MPIRUN:
        pytest.skip("mpirun not installed (openmpi-bin)")
    r = zenrun(["-np", "2", mode, "--prefix-output-with-timestamp", PYTHON, PROBE])
    assert r.returncode == 0, r.stderr
    for text, stream in ((r.stdout, "stdout"), (r.stderr, "stderr")):
        lines = [STAMPED.match(line) for line in text.splitlines() if "]<std" in line]
        assert len(lines) == 2 and all(lines), text
        assert sorted(rank_lines("\n".join(m.group(1) for m in lines), stream)) == [0, 1]


def _stand_in(folder, name, record, body):
    """An executable `name` in folder that appends its argv (one JSON line) to record and
    then runs body (a POSIX shell script fragment)."""
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n"
                    f"{PYTHON} -c 'import json, sys; print(json.dumps(sys.argv[1:]))' \"$@\" "
                    f">> {record}\n" + body)
    path.chmod(0o755)
    return path


def test_ssh_port_and_identity_reach_ssh(tmp_path):
    """-p/-i on a remote host in TCP mode: a stand-in ssh records its arguments and runs the
    remote command here (there is no sshd); the job, a real cross-rank connection included,
    must succeed."""
    record = tmp_path / "ssh.argv"
    key = tmp_path / "id_test"
    key.write_text("not a real key\n")
    _stand_in(tmp_path / "bin", "ssh", record, 'for last; do :; done\nexec sh -c "$last"\n')
    path = f"{tmp_path / 'bin'}:{os.environ['PATH']}"
    r = zenrun(["-np", "3", "-H", "localhost:1,remote-a:2", "-p", "2222", "-i", str(key),
                "--controller-addr", "127.0.0.1", PYTHON, PROBE, "--rendezvous"],
               env={"PATH": path}, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "RENDEZVOUS ok peers=[1, 2]" in rank_lines(r.stdout, "stdout")[0]
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(calls) == 2  # ranks 1 and 2; rank 0 is local
    for argv in calls:
        assert argv[:-1] == ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-p",
                             "2222", "-i", str(key), "remote-a"]
    reports = probe_reports(r.stdout)
    assert [reports[i]["env"]["ZEN_RANK"] for i in (1, 2)] == ["1", "2"]
    # Elastic workers and the --network-interface address query start through the same
    # launch command (tcp_run.start_command, interface_address).
    from zen.runner import args as arglib
    from zen.runner import tcp_run

    args = arglib.parse(["-np", "2", "--min-np", "2", "-H", "remote-a:2", "-p", "2222", "-i",
                         str(key), "true"])
    argv, _, _ = tcp_run.start_command(args, "remote-a", [], {}, {})
    assert argv[:-1] == ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-p",
                         "2222", "-i", str(key), "remote-a"]


def test_mpi_ssh_args_become_plm_rsh_args(tmp_path):
    from zen.runner import args as arglib
    from zen.runner import mpi_run

    key = tmp_path / "id_test"
    key.write_text("k\n")
    args = arglib.parse(["-np", "4", "--mpi", "-H", "n1:2,n2:2", "-p", "2222", "-i", str(key),
                         "--mpi-args", "-mca btl ^openib", "python3", "train.py"])
    hosts = hostlib.parse_hosts(args.hosts)
    argv = mpi_run.build_command(args, hosts, hostlib.assign_ranks(hosts, 4), {})
    at = argv.index("plm_rsh_args")
    assert argv[at - 1:at + 2] == ["-mca", "plm_rsh_args", f"-p 2222 -i {key}"]
    assert argv.index("-mca", at + 1) == argv.index("btl") - 1  # --mpi-args after them
    args = arglib.parse(["-np", "2", "--mpi", "-p", "2222", "true"])
    argv = mpi_run.build_command(args, [hostlib.Host("localhost", 2)],
                                 hostlib.assign_ranks([hostlib.Host("localhost", 2)], 2), {})
    assert argv[argv.index("plm_rsh_args") + 1] == "-p 2222"
    args = arglib.parse(["-np", "2", "--mpi", "true"])
    argv = mpi_run.build_command(args, [hostlib.Host("localhost", 2)],
                                 hostlib.assign_ranks([hostlib.Host("localhost", 2)], 2), {})
    assert "plm_rsh_args" not in argv


@pytest.mark.skipif(not HAVE_MPIRUN, reason="mpirun not installed (openmpi-bin)")
def test_mpi_with_ssh_port_runs_on_localhost(tmp_path):
    """A real mpirun given plm_rsh_args: on localhost Open MPI starts the ranks without rsh,
    so the job runs as without -p/-i."""
    key = tmp_path / "id_test"
    key.write_text("k\n")
    r = zenrun(["-np", "2", "--mpi", "--verbose", "-p", "2222", "-i", str(key), PYTHON, PROBE])
    assert r.returncode == 0, r.stderr
    assert f"-mca plm_rsh_args '-p 2222 -i {key}'" in r.stderr, r.stderr
    reports = probe_reports(r.stdout)
    assert sorted(rep["env"]["OMPI_COMM_WORLD_RANK"] for rep in reports.values()) == ["0", "1"]


# -- failures, hangs, start timeout, signals ---------------------------------------------

def test_failing_rank_stops_job_tcp(tmp_path):
    t0 = time.monotonic()
    r = zenrun(["-np", "4", PYTHON, PROBE, "--pid-dir", str(tmp_path), "--fail", "2:3",
                "--delay", "0.5", "--others", "sleep"])
    assert r.returncode == 3, r.stderr
    assert time.monotonic() - t0 < 15
    assert ("zenrun: rank 2 (host localhost) exited with code 3 first; stopped 3 other ranks"
            in r.stderr)
    assert_all_dead(read_pids(str(tmp_path), 4, within=0))


def test_hanging_rank_is_killed(tmp_path):
    # Rank 0 ignores SIGTERM: it must get SIGKILL after --grace-seconds.
    t0 = time.monotonic()
    r = zenrun(["-np", "2", "--grace-seconds", "1", PYTHON, PROBE, "--pid-dir", str(tmp_path),
                "--fail", "1:5", "--delay", "0.5", "--others", "ignore-term"])
    elapsed = time.monotonic() - t0
    assert r.returncode == 5, r.stderr
    assert "rank 1 (host localhost) exited with code 5 first; stopped 1 other rank" in r.stderr
    assert 1.0 < elapsed < 10, elapsed
    assert_all_dead(read_pids(str(tmp_path), 2, within=0))


def test_rank_killed_by_signal_reports_it():
    code = "import os, signal\nif os.environ['ZEN_RANK'] == '1': os.kill(os.getpid(), 9)\n"
    r = zenrun(["-np", "2", PYTHON, "-c", code])
    assert r.returncode == 128 + 9, r.stderr
    assert "rank 1 (host localhost) was killed by SIGKILL first" in r.stderr


def test_remote_rank_killed_after_output_without_newline():
    # A remote rank's wrapper (--env-stdin, here behind a launch command that runs it on this
    # machine) reports a death by signal as a line on the rank's stdout; after output with no
    # trailing newline that report begins mid-line and must still be recognised.
    code = ("import os, sys\nif os.environ['ZEN_RANK'] == '1':\n"
            "    sys.stdout.write('no newline'); sys.stdout.flush(); os.kill(os.getpid(), 9)\n")
    r = zenrun(["-np", "2", "-H", "localhost:1,ghost:1", "--launch-command",
                "sh -c 'eval \"$1\"' {host}", PYTHON, "-c", code])
    assert r.returncode == 128 + 9, r.stderr
    assert "rank 1 (host ghost) was killed by SIGKILL first" in r.stderr
    assert rank_lines(r.stdout, "stdout") == {1: ["no newline"]}, r.stdout


def _wrapper(tmp_path):
    """A remote rank's wrapper command whose rank creates tmp_path/started."""
    return [PYTHON, WRAPPER, "--rank", "1", "--token", "t0k", "--watch-stdin", "--env-stdin",
            "--grace", "1", "--", PYTHON, "-c",
            "import os; open(os.environ['ZENTEST_MARK'], 'w').close()"]


@pytest.mark.parametrize("stdin", [b"", b'{"ZENTEST_MARK": "x"', b'{"ZENTEST_MARK": "x"}\n'],
                         ids=["nothing", "part of the line", "the line, then end-of-file"])
def test_wrapper_does_not_start_a_rank_whose_launcher_went_away(tmp_path, stdin):
    # ssh ended (zenrun stopped a rank that had not started yet, or died) before or right
    # after the environment line arrived: the rank must not start, without its job.
    mark = tmp_path / "started"
    data = stdin.replace(b'"x"', json.dumps(str(mark)).encode())
    r = subprocess.run(_wrapper(tmp_path), input=data, capture_output=True, timeout=30)
    assert r.returncode == 1, r.stderr
    assert b"ZENRUN_READY" not in r.stdout
    assert b"rank 1: the launcher closed stdin before the rank started" in r.stderr, r.stderr
    assert not mark.exists()


def test_wrapper_starts_the_rank_while_stdin_stays_open(tmp_path):
    # The control of the test above: the same line, stdin left open as zenrun does.
    mark = tmp_path / "started"
    proc = subprocess.Popen(_wrapper(tmp_path), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        proc.stdin.write(json.dumps({"ZENTEST_MARK": str(mark)}).encode() + b"\n")
        proc.stdin.flush()
        assert proc.wait(30) == 0, proc.stderr.read()
        assert b"ZENRUN_READY t0k 1" in proc.stdout.read()
        assert mark.exists()
    finally:
        proc.kill()
        proc.communicate()


def test_missing_command_fails_with_127():
    r = zenrun(["-np", "2", "/nonexistent/program"])
    assert r.returncode == 127
    assert "cannot run '/nonexistent/program'" in r.stderr


@pytest.mark.skipif(not HAVE_MPIRUN, reason="mpirun not installed (openmpi-bin)")
def test_failing_rank_stops_job_mpi(tmp_path):
    t0 = time.monotonic()
    r = zenrun(["-np", "4", "--mpi", PYTHON, PROBE, "--pid-dir", str(tmp_path), "--fail",
                "2:3", "--delay", "0.5", "--others", "sleep"])
    assert r.returncode == 3, r.stderr
    assert time.monotonic() - t0 < 20
    assert "zenrun: rank 2 (host localhost) exited with code 3 first" in r.stderr
    assert_all_dead(read_pids(str(tmp_path), 4, within=0))


def test_start_timeout_names_the_ranks(tmp_path):
    # Rank 1's "host" is reached through a launch command that never runs the rank. The
    # timeout is generous: on a loaded machine (ctest -j2, sanitizer builds) a real rank may
    # take seconds to start, and must not be named with the ghost.
    t0 = time.monotonic()
    r = zenrun(["-np", "3", "-H", "localhost:2,ghost:1", "--launch-command",
                "sh -c 'exec sleep 61.25' {host}", "--start-timeout", "20", "--grace-seconds",
                "1", PYTHON, PROBE, "--pid-dir", str(tmp_path), "--others", "sleep"], timeout=60)
    assert r.returncode == 1, r.stderr
    assert time.monotonic() - t0 < 30
    assert ("zenrun: 1 of 3 ranks did not start within 20 s: rank 2 (host ghost)"
            in r.stderr), r.stderr
    assert_all_dead(read_pids(str(tmp_path), 2, within=0))
    deadline = time.monotonic() + 5  # the stuck launch command was stopped too
    while _processes_with_cmdline(b"sleep\x0061.25\x00"):
        assert time.monotonic() < deadline, "the launch command survived zenrun"
        time.sleep(0.05)


def test_launch_command_failure_is_reported():
    r = zenrun(["-np", "2", "-H", "localhost:1,ghost:1", "--launch-command",
                "sh -c 'exit 255' {host}", PYTHON, PROBE, "--others", "sleep"])
    assert r.returncode == 255
    assert "rank 1 (host ghost) exited with code 255 first (before it started" in r.stderr


@pytest.mark.parametrize("mode,sig", [("--tcp", signal.SIGTERM), ("--tcp", signal.SIGINT),
                                      ("--mpi", signal.SIGTERM)])
def test_signal_to_zenrun_stops_all_ranks(tmp_path, mode, sig):
    if mode == "--mpi" and not HAVE_MPIRUN:
        pytest.skip("mpirun not installed (openmpi-bin)")
    proc = subprocess.Popen([ZENRUN, "-np", "3", mode, "--grace-seconds", "1", PYTHON, PROBE,
                             "--pid-dir", str(tmp_path), "--others", "sleep"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=HERE)
    try:
        pids = read_pids(str(tmp_path), 3)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 128 + sig, err
    assert f"zenrun: received {signal.Signals(sig).name}; stopped" in err
    assert "3 ranks" in err.splitlines()[-1]
    assert_all_dead(pids)


def test_ranks_do_not_outlive_a_killed_zenrun(tmp_path):
    proc = subprocess.Popen([ZENRUN, "-np", "2", "--grace-seconds", "1", PYTHON, PROBE,
                             "--pid-dir", str(tmp_path), "--others", "ignore-term"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=HERE)
    try:
        pids = read_pids(str(tmp_path), 2)
        proc.kill()  # SIGKILL: zenrun cannot clean up; the wrappers see stdin EOF
        proc.wait(5)
    finally:
        proc.kill()
    assert_all_dead(pids, within=8)


# -- many hosts: two network namespaces ---------------------------------------------------

@pytest.fixture(scope="module")
def netns_hosts():
    """Two namespaces joined by a veth pair, 10.213.0.1/24 and 10.213.0.2/24 inside them
    only (no route in the root namespace: runs at once may share the subnet); deleted
    afterwards (deleting a namespace deletes its end of the veth)."""
    tag = os.getpid()  # whole: unique among the running processes
    a, b = f"zenrun{tag}a", f"zenrun{tag}b"
    va, vb = f"zr{tag}a", f"zr{tag}b"
    probe = _ip("netns", "add", a, check=False)
    if probe.returncode != 0:
        pytest.skip(f"multi-host tests need `ip netns add` (root): {probe.stderr.strip()}")
    try:
        _ip("netns", "add", b)
        _ip("link", "add", va, "type", "veth", "peer", "name", vb)
        _ip("link", "set", va, "netns", a)
        _ip("link", "set", vb, "netns", b)
        _ip("-n", a, "addr", "add", "10.213.0.1/24", "dev", va)
        _ip("-n", b, "addr", "add", "10.213.0.2/24", "dev", vb)
        for ns, dev in ((a, va), (b, vb)):
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield a, b
    finally:
        for ns in (a, b):
            _ip("netns", "del", ns, check=False)
        _ip("link", "del", va, check=False)  # only if it never moved into a namespace


def _ns_inode(ns):
    return f"net:[{os.stat(f'/run/netns/{ns}').st_ino}]"


NETNS_LAUNCH = ["--launch-command", "ip netns exec {host} sh -c", "--controller-addr",
                "10.213.0.1"]


def test_multi_host_placement_and_connectivity(netns_hosts):
    a, b = netns_hosts
    r = zenrun(["-np", "4", "-H", f"{a}:2,{b}:2"] + NETNS_LAUNCH + KNOB_FLAGS
               + [PYTHON, PROBE, "--rendezvous"])
    assert r.returncode == 0, r.stderr
    reports = probe_reports(r.stdout)
    expected = {0: (a, 0, 0), 1: (a, 1, 0), 2: (b, 0, 1), 3: (b, 1, 1)}  # host, local, cross
    for rank, (ns, local, cross) in expected.items():
        env = reports[rank]["env"]
        assert reports[rank]["netns"] == _ns_inode(ns), rank
        assert [env[k] for k in PLACEMENT] == [str(rank), "4", str(local), "2", str(cross),
                                               "2"]
        assert re.fullmatch(r"10\.213\.0\.1:\d+", env["ZEN_CONTROLLER_ADDR"])
        for k, v in KNOB_ENV.items():
            assert env[k] == v, k
    assert len({rep["env"]["ZEN_SECRET"] for rep in reports.values()}) == 1
    assert "RENDEZVOUS ok peers=[1, 2, 3]" in rank_lines(r.stdout, "stdout")[0]
    assert rank_lines(r.stderr, "stderr") == {i: [f"hello from rank {i}"] for i in range(4)}


def test_multi_host_failure_stops_every_host(netns_hosts, tmp_path):
    a, b = netns_hosts
    t0 = time.monotonic()
    r = zenrun(["-np", "4", "-H", f"{a}:2,{b}:2", "--grace-seconds", "1"] + NETNS_LAUNCH
               + [PYTHON, PROBE, "--pid-dir", str(tmp_path), "--fail", "3:4", "--delay", "0.5",
                  "--others", "ignore-term"])
    assert r.returncode == 4, r.stderr
    assert time.monotonic() - t0 < 15
    assert f"zenrun: rank 3 (host {b}) exited with code 4 first; stopped 3 other ranks" in r.stderr
    assert_all_dead(read_pids(str(tmp_path), 4, within=0))


# HOROVOD_* variables (core/horovod_env.h; zen/common/horovod_env.py).

def test_horovod_alias_table_matches_the_library():
    """The Python readers' alias pairs are the library's, in the same order."""
    from zen.common import horovod_env

    with open(os.path.join(ROOT, "core", "horovod_env.cc")) as f:
        source = f.read()
    pairs = re.findall(r'\{"(HOROVOD_[A-Z_]+)", "(ZEN_[A-Z_]+)", \w+\}', source)
    assert pairs, "no alias table found in core/horovod_env.cc"
    python = [(a, z) for z, aliases in horovod_env.ALIASES.items() for a in aliases]
    assert sorted(python) == sorted(pairs)
    for zen_name in horovod_env.ALIASES:  # precedence among aliases of one name
        assert list(horovod_env.ALIASES[zen_name]) == [a for a, z in pairs if z == zen_name]
    launcher = re.search(r"kLauncherVariables\[\] = \{(.*?)\};", source, re.S).group(1)
    assert set(re.findall(r'"(HOROVOD_[A-Z_]+)"', launcher)) == horovod_env.LAUNCHER_VARIABLES


def test_horovod_lookup_follows_the_library_precedence():
    from zen.common import horovod_env

    env = {"HOROVOD_GLOO_IFACE": "eth1"}
    assert horovod_env.lookup(env, "ZEN_IFACE") == ("eth1", "HOROVOD_GLOO_IFACE")
    env["ZEN_IFACE"] = "eth2"
    assert horovod_env.lookup(env, "ZEN_IFACE") == ("eth2", "ZEN_IFACE")
    stall = {"HOROVOD_STALL_CHECK_DISABLE": "1", "HOROVOD_STALL_CHECK_TIME_SECONDS": "90"}
    assert horovod_env.lookup(stall, "ZEN_STALL_CHECK_TIME_SECONDS") == (
        "0", "HOROVOD_STALL_CHECK_DISABLE")
    stall["HOROVOD_STALL_CHECK_DISABLE"] = "0"
    assert horovod_env.lookup(stall, "ZEN_STALL_CHECK_TIME_SECONDS") == (
        "90", "HOROVOD_STALL_CHECK_TIME_SECONDS")
    assert horovod_env.lookup({}, "ZEN_CYCLE_TIME") == (None, None)


def test_horovod_variables_reach_the_ranks_and_flags_win():
    """HOROVOD_* knobs reach every rank as ZEN_* ones do; a zenrun flag that sets the same
    setting wins (the alias is dropped, said once); a Horovod launcher's placement is
    dropped like zenrun's own stale placement."""
    r = zenrun(["-np", "2", "--cycle-time-ms", "3", PYTHON, PROBE],
               env={"HOROVOD_CYCLE_TIME": "7", "HOROVOD_FUSION_THRESHOLD": "1048576",
                    "HOROVOD_HIERARCHICAL_ALLREDUCE": "1", "HOROVOD_RANK": "5",
                    "HOROVOD_SIZE": "8"})
    assert r.returncode == 0, r.stderr
    assert "zenrun's flags override HOROVOD_CYCLE_TIME" in r.stderr + r.stdout
    reports = probe_reports(r.stdout)
    assert sorted(reports) == [0, 1]
    for rep in (report["env"] for report in reports.values()):
        assert rep["HOROVOD_FUSION_THRESHOLD"] == "1048576"
        assert rep["HOROVOD_HIERARCHICAL_ALLREDUCE"] == "1"  # the library names it
        assert rep["ZEN_CYCLE_TIME"] == "3"
        assert "HOROVOD_CYCLE_TIME" not in rep
        assert "HOROVOD_RANK" not in rep and "HOROVOD_SIZE" not in rep


def test_mpi_forwards_horovod_variables():
    """--mpi: mpirun passes only what -x names to remote hosts; HOROVOD_* aliases are named."""
    from zen.runner import args as arglib
    from zen.runner import mpi_run

    args = arglib.parse(["-np", "2", "--mpi", "true"])
    argv = mpi_run.build_command(args, [hostlib.Host("localhost", 2)],
                                 hostlib.assign_ranks([hostlib.Host("localhost", 2)], 2),
                                 {"HOROVOD_FUSION_THRESHOLD": "1", "ZEN_SCHEME": "hc",
                                  "HOME": "/root"})
    exported = [argv[i + 1] for i, w in enumerate(argv) if w == "-x"]
    assert "HOROVOD_FUSION_THRESHOLD" in exported and "ZEN_SCHEME" in exported
    assert "HOME" not in exported


def test_stall_shutdown_check_reads_the_horovod_alias():
    r = zenrun(["-np", "2", "--stall-check-shutdown-time-seconds", "30", PYTHON, PROBE],
               env={"HOROVOD_STALL_CHECK_TIME_SECONDS": "60"})
    assert r.returncode == 2
    assert "below HOROVOD_STALL_CHECK_TIME_SECONDS (60 s)" in r.stderr, r.stderr
    r = zenrun(["-np", "2", "--stall-check-shutdown-time-seconds", "30", PYTHON, PROBE],
               env={"HOROVOD_STALL_CHECK_DISABLE": "1"})
    assert r.returncode == 2
    assert "which HOROVOD_STALL_CHECK_DISABLE=1 turns off" in r.stderr, r.stderr


def test_gloo_timeout_sets_the_zen_timeout(tmp_path):
    """horovodrun's --gloo-timeout-seconds (and its config key) is ZEN_TIMEOUT, as the
    library reads HOROVOD_GLOO_TIMEOUT_SECONDS."""
    from zen.runner import args as arglib

    args = arglib.parse(["-np", "2", "--gloo-timeout-seconds", "60", "true"])
    assert arglib.knob_env(args)["ZEN_TIMEOUT"] == "60"
    path = tmp_path / "hvd.json"
    path.write_text(json.dumps({"library_options": {"gloo_timeout_seconds": 45}}))
    args = arglib.parse(["-np", "2", "--config-file", str(path), "true"])
    assert arglib.knob_env(args)["ZEN_TIMEOUT"] == "45"
    assert "ZEN_TIMEOUT" not in arglib.knob_env(arglib.parse(["-np", "2", "true"]))
    r = zenrun(["-np", "2", "--gloo-timeout-seconds", "0", "true"])
    assert r.returncode == 2 and "--gloo-timeout-seconds must be" in r.stderr, r.stderr
