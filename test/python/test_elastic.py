"""zenrun's elastic mode end to end: real zenrun jobs of elastic_worker.py (zen.torch, its
own retry loop) whose workers die, never start, are added and removed, checked step by step:
every step's Sum allreduce against the sum the ranks' placement predicts, the sizes before and
after each change, and zenrun's messages and exit code. Also zenrun's elastic usage errors.

Run: /usr/bin/python3 -m pytest -q test/python/test_elastic.py   (after tools/build-python;
also CTest: python_elastic). Every launch is bounded by a timeout; the daemon's ZEN_TIMEOUT
bounds a survivor's wait on a dead peer.
"""

import json
import os
import re
import subprocess
import time

import pytest

from rank_jobs import (HERE, TORCH_PYTHON, ZENRUN, environment, require_zen_torch,
                       zenrun_streaming)

WORKER = os.path.join(HERE, "elastic_worker.py")
LINE = re.compile(r"^\[(\d+)\]<stdout>:(STEP|DONE) (.*)$")
ENV = {"ZEN_TIMEOUT": "20", "ZEN_THREADS": "1", "OMP_NUM_THREADS": "1",
       "ZEN_STALL_CHECK_TIME_SECONDS": "5", "ZEN_STALL_SHUTDOWN_TIME_SECONDS": "20"}


def zenrun(flags, worker_args, timeout=180, on_line=None):
    """Runs zenrun FLAGS python elastic_worker.py WORKER_ARGS; on_line(line) sees each stdout
    line as it comes. Returns (code, stdout, stderr)."""
    return zenrun_streaming(list(flags) + [TORCH_PYTHON, WORKER] + list(worker_args), ENV,
                            timeout, on_line)


def step_lines(stdout):
    """[(worker prefix, STEP report)] and {worker: DONE text}."""
    steps, done = [], {}
    for line in stdout.splitlines():
        m = LINE.match(line)
        if m and m.group(2) == "STEP":
            steps.append((int(m.group(1)), json.loads(m.group(3))))
        elif m:
            done[int(m.group(1))] = m.group(3)
    return steps, done


def check_steps(stdout, sizes, workers, stderr=""):
    """Every step of range(len(sizes)) ran once on each of its workers with sizes[step] ranks
    and the predicted sum; workers[step]: the worker numbers expected at that step (None: any
    of the right count). Returns the DONE texts. stderr: zenrun's, shown on a failure."""
    steps, done = step_lines(stdout)
    tail = stderr[-4000:]
    by_step = {}
    for prefix, r in steps:
        assert prefix == r["worker"], (prefix, r, tail)
        assert r["sum"] == [r["expect"]] * 4, (r, tail)
        by_step.setdefault(r["step"], []).append(r)
    assert sorted(by_step) == list(range(len(sizes))), (sorted(by_step), tail)
    for step, reports in by_step.items():
        assert sorted(x["rank"] for x in reports) == list(range(sizes[step])), (step, reports, tail)
        assert all(x["size"] == sizes[step] for x in reports), (step, reports, tail)
        if workers[step] is not None:
            assert sorted(x["worker"] for x in reports) == workers[step], (step, reports,
                                                                          tail)
    return done


@pytest.fixture(scope="module", autouse=False)
def zen_torch():
    require_zen_torch()


def test_killed_worker_survivors_finish_with_size_2(zen_torch, tmp_path):
    logs = tmp_path / "logs"
    code, out, err = zenrun(["-np", "3", "--min-np", "2", "--max-np", "3", "--output-filename",
                             str(logs)],
                            ["--steps", "10", "--die-worker", "1", "--die-step", "4",
                             "--marker-dir", str(tmp_path)])
    assert code == 0, out[-3000:] + err[-3000:]
    done = check_steps(out, [3] * 4 + [2] * 6, [[0, 1, 2]] * 4 + [[0, 2]] * 6, err)
    # --output-filename: one folder per worker (its number), its lines unprefixed.
    assert sorted(os.listdir(logs)) == ["rank.0", "rank.1", "rank.2"]
    assert (logs / "rank.1" / "stdout").read_text().startswith("STEP ")
    assert "DYING worker 1 at step 4" in (logs / "rank.1" / "stdout").read_text()
    assert sorted(done) == [0, 2] and all("size 2" in d for d in done.values()), done
    assert "worker 1 (localhost/1/1) exited with code 1; the others continue" in err, err
    assert "host localhost blacklisted" in err, err
    assert re.search(r"round 2 \(generation 2\): 2 workers, ranks 0\.\.1 = workers 0,2", err), err
    # The survivors' reset: the order kept, rank 0 still worker 0.
    assert "RESET at step 4: HorovodInternalError" in out


def test_killed_worker_is_replaced_without_blacklist(zen_torch, tmp_path):
    code, out, err = zenrun(["-np", "3", "--min-np", "2", "--max-np", "3",
                             "--no-blacklist-on-failure"],
                            ["--steps", "8", "--die-worker", "1", "--die-step", "3",
                             "--marker-dir", str(tmp_path)])
    assert code == 0, out[-3000:] + err[-3000:]
    done = check_steps(out, [3] * 8, [[0, 1, 2]] * 3 + [[0, 2, 3]] * 5, err)
    assert sorted(done) == [0, 2, 3], done
    assert "blacklisted" not in err
    assert re.search(r"round 2 \(generation 2\): 3 workers, ranks 0\.\.2 = workers 0,2,3", err), err


def _discovery(tmp_path, text):
    hosts = tmp_path / "hosts"
    hosts.write_text(text)
    script = tmp_path / "discover.sh"
    script.write_text(f"#!/bin/sh\ncat {hosts}\n")
    script.chmod(0o755)
    return hosts, script


def test_discovery_scales_up_then_down(zen_torch, tmp_path):
    hosts, script = _discovery(tmp_path, "127.0.0.1:2\n")
    changes = {4: "127.0.0.1:2\n127.0.0.2\n", 9: "127.0.0.1:2\n"}

    def on_line(line):
        m = re.match(r"^\[\d+\]<stdout>:WAITING at step (\d+)$", line)
        if m:
            text = changes.pop(int(m.group(1)), None)
            if text is not None:  # atomically: the script never reads half a file
                (tmp_path / "hosts.new").write_text(text)
                os.replace(tmp_path / "hosts.new", hosts)

    # Rank 0 waits at steps 4 and 9 until the change is pending (the test makes it when rank 0
    # says it waits): the new rounds land there.
    code, out, err = zenrun(["-np", "2", "--min-np", "2", "--max-np", "3",
                             "--host-discovery-script", str(script)],
                            ["--steps", "12", "--wait-pending-step", "4",
                             "--wait-pending-step", "9"], on_line=on_line)
    assert code == 0, out[-3000:] + err[-3000:]
    done = check_steps(out, [2] * 4 + [3] * 5 + [2] * 3,
                       [[0, 1]] * 4 + [[0, 1, 2]] * 5 + [[0, 1]] * 3, err)
    assert sorted(done) == [0, 1], done
    assert "hosts now 127.0.0.1:2,127.0.0.2:1" in err and "hosts now 127.0.0.1:2\n" in err, err
    # Every rank saw the updates at the same commit: the scale-up an addition (generation 2),
    # the scale-down a removal only (generation 3, Horovod's skip_sync).
    assert out.count("RESET at step 4: _Interrupt (2, False)") == 2, out
    assert out.count("RESET at step 9: _Interrupt (3, True)") == 3, out
    assert re.search(r"round 2 \(generation 2\): 3 workers", err), err
    assert re.search(r"round 3 \(generation 3\): 2 workers, ranks 0\.\.1 = workers 0,1", err), err
    # The removed worker left: told to exit 0 at its next join, or stopped when the round
    # formed without it first (which comes first depends on the machine's load); no failure.
    assert "the others continue" not in err and "blacklisted" not in err, err


def test_below_min_np_fails_at_once_with_fixed_hosts(zen_torch, tmp_path):
    start = time.monotonic()
    code, out, err = zenrun(["-np", "2", "--min-np", "2"],
                            ["--steps", "50", "--die-worker", "1", "--die-step", "2",
                             "--marker-dir", str(tmp_path)], timeout=120)
    assert code == 1, out[-3000:] + err[-3000:]
    assert ("elastic job failed: only 1 worker can run, fewer than --min-np 2 (hosts: "
            "localhost:2; blacklisted: localhost") in err, err
    assert time.monotonic() - start < 60


def test_discovery_below_min_np_fails_after_the_elastic_timeout(zen_torch, tmp_path):
    _, script = _discovery(tmp_path, "127.0.0.1:2\n")
    start = time.monotonic()
    code, out, err = zenrun(["-np", "3", "--host-discovery-script", str(script),
                             "--elastic-timeout", "2"], ["--steps", "3"], timeout=60)
    assert code == 1, out + err
    assert "the discovered hosts (127.0.0.1:2) offer fewer than -np 3 slots" in err, err
    assert "after --elastic-timeout 2 s" in err, err
    assert time.monotonic() - start < 20


def test_worker_that_never_starts_is_retired_and_its_host_blacklisted(zen_torch, tmp_path):
    """Host `stuck`'s launch hangs (an unreachable host's ssh): after --start-timeout zenrun
    stops that worker, blacklists the host and the round forms without it; the job trains
    with the two that started and finishes."""
    launch = tmp_path / "launch.sh"
    launch.write_text('#!/bin/sh\nif [ "$1" = stuck ]; then exec sleep 600; fi\n'
                      'exec sh -c "$2"\n')
    launch.chmod(0o755)
    start = time.monotonic()
    code, out, err = zenrun(["-np", "3", "--min-np", "2", "--max-np", "3", "-H",
                             "localhost:2,stuck:1", "--launch-command", f"{launch} {{host}}",
                             "--start-timeout", "10"],
                            ["--steps", "5"], timeout=120)
    assert code == 0, out[-3000:] + err[-3000:]
    done = check_steps(out, [2] * 5, [[0, 1]] * 5, err)
    assert sorted(done) == [0, 1], done
    assert "worker 2 (host stuck) did not start within 10 s" in err, err
    assert "host stuck blacklisted" in err, err
    assert re.search(r"round 1 \(generation \d+\): 2 workers, ranks 0\.\.1 = workers 0,1",
                     err), err
    assert time.monotonic() - start < 90


def test_reset_limit_exceeded_fails(zen_torch, tmp_path):
    code, out, err = zenrun(["-np", "3", "--min-np", "1", "--reset-limit", "0"],
                            ["--steps", "50", "--die-worker", "2", "--die-step", "2",
                             "--marker-dir", str(tmp_path)], timeout=120)
    assert code == 1, out[-3000:] + err[-3000:]
    assert "elastic job failed: the workers changed 1 times, more than --reset-limit 0" in err, err


@pytest.mark.parametrize("flags,message", [
    (["--mpi", "--min-np", "2"], "--mpi cannot run an elastic job"),
    (["-np", "3", "--min-np", "3", "--max-np", "2"], "--min-np 3 is above --max-np 2"),
    (["-np", "4", "--min-np", "1", "--max-np", "2"], "-np 4 is outside [--min-np 1, --max-np 2]"),
    (["--max-np", "2"], "an elastic job needs -np or --min-np"),
    (["-np", "2", "--min-np", "1", "--controller-addr", "127.0.0.1"],
     "--controller-addr does not apply to elastic jobs"),
    (["-np", "2", "--min-np", "1", "--rendezvous-addr", "10.0.0.1:4000"],
     "--rendezvous-addr '10.0.0.1:4000': expected HOST (a name or IPv4 address, no port"),
    (["-np", "2", "--rendezvous-addr", "10.0.0.1"], "--rendezvous-addr applies to elastic jobs "
     "only"),
    (["-np", "2", "--host-discovery-script", "/nonexistent"],
     "--host-discovery-script '/nonexistent' is not an executable file"),
    (["-np", "2", "-H", "localhost:2", "--host-discovery-script", "/bin/true"],
     "--host-discovery-script and -H/--hostfile exclude each other"),
    (["-np", "2", "--min-np", "0"], "--min-np must be >= 1"),
    (["-np", "2", "--min-np", "2", "--elastic-timeout", "0"], "--elastic-timeout must be in"),
    (["-np", "2", "--min-np", "2", "--reset-limit", "-1"], "--reset-limit must be >= 0"),
])
def test_usage_errors(flags, message):
    r = subprocess.run([ZENRUN] + flags + ["true"], capture_output=True, text=True, timeout=30,
                       env=environment())
    assert r.returncode == 2, r.stderr
    assert message in r.stderr, r.stderr
