"""Elastic training end to end: elastic_train.py (zen.torch.elastic) and
elastic_keras_train.py (zen.tensorflow.keras.elastic), training whose result does not depend on
the number of ranks, in real elastic zenrun jobs where a worker dies or a worker joins, against
the same training in one process without zen (--reference).

Run: /usr/bin/python3 -m pytest -q test/python/test_elastic_training.py (after
tools/build-python and tools/build-tf; CTest: python_elastic_training). Every launch is bounded
by a timeout; the daemon's ZEN_TIMEOUT bounds a survivor's wait on a dead peer.
"""

import json
import os
import re
import subprocess

import pytest

from rank_jobs import (HERE, TF_ENV, TF_PYTHON, TORCH_PYTHON, environment,
                       require_zen_tensorflow, require_zen_torch, zenrun_streaming)

require_zen_torch()

SCRIPT = os.path.join(HERE, "elastic_train.py")
KERAS_SCRIPT = os.path.join(HERE, "elastic_keras_train.py")
PARAMS = re.compile(r"^\[(\d+)\]<stdout>:PARAMS (.*)$")
ENV = {"ZEN_TIMEOUT": "20", "ZEN_THREADS": "1", "OMP_NUM_THREADS": "1",
       "ZEN_STALL_CHECK_TIME_SECONDS": "5", "ZEN_STALL_SHUTDOWN_TIME_SECONDS": "20"}
TOLERANCE = 1e-12  # the ranks sum a global batch's gradient in another order than one process


def launch(flags, args, on_line=None, timeout=240, program=(TORCH_PYTHON, SCRIPT), env=()):
    """zenrun FLAGS program ARGS, on_line(line) called on each stdout line as it comes; (exit
    code, stdout, stderr)."""
    return zenrun_streaming(list(flags) + list(program) + list(args), dict(ENV, **dict(env)),
                            timeout, on_line)


def run_reference(program, env=()):
    """The parameters of one process's training, without zen."""
    r = subprocess.run(list(program) + ["--reference"], capture_output=True, text=True,
                       timeout=120, env=environment(env))
    assert r.returncode == 0, r.stderr
    return [float.fromhex(v) for v in json.loads(r.stdout.split("PARAMS ", 1)[1])["params"]]


@pytest.fixture(scope="module")
def reference():
    return run_reference((TORCH_PYTHON, SCRIPT))


def final_reports(code, out, err):
    """The PARAMS report of every worker that finished, by rank prefix."""
    assert code == 0, "zenrun exited %d\n%s\n%s" % (code, out[-3000:], err[-4000:])
    reports = {}
    for line in out.splitlines():
        m = PARAMS.match(line)
        if m:
            reports[int(m.group(1))] = json.loads(m.group(2))
    return reports


def assert_matches_reference(reports, reference):
    first = next(iter(reports.values()))["params"]
    for report in reports.values():
        assert report["params"] == first, reports  # every rank bit for bit the same
    got = [float.fromhex(v) for v in first]
    diff = max(abs(a - b) for a, b in zip(got, reference))
    assert diff <= TOLERANCE, (got, reference, diff)


def test_worker_dies_mid_epoch(reference, tmp_path):
    """-np 3 --min-np 2 --max-np 3: worker 1 exits 1 before global step 6 (last commit at 4);
    the survivors get HorovodInternalError, restore, rejoin as 2 ranks, re-shard the epoch's
    remaining samples and finish with one process's parameters."""
    code, out, err = launch(["-np", "3", "--min-np", "2", "--max-np", "3"],
                            ["--die-worker", "1", "--die-step", "5",
                             "--marker-dir", str(tmp_path)])
    reports = final_reports(code, out, err)
    assert sorted(r["worker"] for r in reports.values()) == [0, 2], reports
    assert all(r["size"] == 2 for r in reports.values()), reports
    # Steps 1-5, then 5 again (restored to the commit at 4) to 16.
    assert all(r["steps"] == 17 for r in reports.values()), reports
    assert "worker 1 (localhost/1/1) exited with code 1" in err, err[-3000:]
    assert "RESET 2" in out
    assert_matches_reference(reports, reference)


def test_worker_joins_and_gets_the_state_by_sync(reference, tmp_path):
    """The discovery script's hosts go from 127.0.0.1:2 to 127.0.0.1:2 + 127.0.0.2 while rank 0
    waits at the commit after step 4: every rank raises HostsUpdatedInterrupt there, the new
    worker (its own initial parameters) joins the round of 3 and gets rank 0's state by the
    sync; the result is one process's."""
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1:2\n")
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\ncat %s\n" % hosts)
    script.chmod(0o755)

    def on_line(line):
        if line.startswith("[0]<stdout>:WAITING"):
            hosts.write_text("127.0.0.1:2\n127.0.0.2\n")

    code, out, err = launch(["-np", "2", "--min-np", "2", "--max-np", "3",
                             "--host-discovery-script", str(script)],
                            ["--wait-update-at-step", "4"], on_line=on_line)
    reports = final_reports(code, out, err)
    assert sorted(r["worker"] for r in reports.values()) == [0, 1, 2], reports
    assert all(r["size"] == 3 for r in reports.values()), reports
    steps = {r["worker"]: r["steps"] for r in reports.values()}
    assert steps == {0: 16, 1: 16, 2: 12}, steps  # the new worker from step 5 on
    assert "RESET 3" in out
    assert_matches_reference(reports, reference)


def test_keras_worker_dies_mid_epoch(tmp_path):
    """Keras fit with KerasState and the elastic callbacks (commit every 2 batches): worker 1
    exits 1 before global step 4 of 12, while the others commit; the survivors restore, rejoin
    as 2 ranks, fit the rest of the epoch and end with one process's weights."""
    require_zen_tensorflow()
    program = (TF_PYTHON, KERAS_SCRIPT)
    want = run_reference(program, TF_ENV)
    code, out, err = launch(["-np", "3", "--min-np", "2", "--max-np", "3"],
                            ["--die-worker", "1", "--die-step", "4",
                             "--marker-dir", str(tmp_path)], program=program, env=TF_ENV)
    reports = final_reports(code, out, err)
    assert sorted(r["worker"] for r in reports.values()) == [0, 2], reports
    assert all(r["size"] == 2 for r in reports.values()), reports
    assert "RESET 2" in out
    assert_matches_reference(reports, want)
