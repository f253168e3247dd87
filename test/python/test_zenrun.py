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
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

from zen.runner import hosts as hostlib  # noqa: E402
from zen.runner.mpi_run import TagParser  # noqa: E402
from netns_hosts import ip as _ip  # noqa: E402
from rank_jobs import held_port  # noqa: E402

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
])
def test_bad_flags_exit_2(args, message):
    r = zenrun(args)
    assert r.returncode == 2, r.stderr
    assert "zenrun: error:" in r.stderr and message in r.stderr, r.stderr
    assert r.stdout == ""


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
