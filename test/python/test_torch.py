"""Tests of zen.torch (bindings/python/zen/torch, bindings/torch): real ranks launched by
tools/zenrun run torch_checks.py (every API function) and torch_train.py (DistributedOptimizer
against one-process training, per scheme); this file reads their per-check reports.

Run: tools/build-python && /usr/bin/python3 -m pytest -q test/python/test_torch.py
(CTest: python_torch_*, which build the extension first.) ZENTEST_TORCH_JOBS selects the
jobs (comma-separated: np2, np4, mpi, train2, train4, single, example; default all).

Each job is one zenrun launch (importing torch is the slow part), bounded by a subprocess
timeout; the daemon's stall shutdown turns a rank that stops posting into errors on every
rank instead of a hang.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ZENRUN = os.path.join(ROOT, "tools", "zenrun")
PYTHON = "/usr/bin/python3"
LINE = re.compile(r"^\[(\d+)\]<stdout>:ZENTEST (.*)$")
SCHEMES = ["zen", "hc", "agsparse", "blocks", "dense"]

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
if not os.path.exists(os.path.join(ROOT, "bindings", "python", "zen", "lib", "libzen.so")):
    pytest.skip("zen.torch is not built here: run tools/build-python", allow_module_level=True)
sys.path.insert(0, HERE)
import torch_checks  # noqa: E402

CHECK_NAMES = [fn.__name__ for fn in torch_checks.CHECKS]
SELECTED = set(filter(None, os.environ.get("ZENTEST_TORCH_JOBS",
                                           "np2,np4,mpi,train2,train4,single,example")
                    .split(",")))


def run_job(np, script, args, mpi=False, timeout=240, tmp_path=None):
    """{check: {rank: report}} of one zenrun job; the job's output on failure."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEN_", "ZENRUN_"))}
    env.update({"ZEN_STALL_CHECK_TIME_SECONDS": "5", "ZEN_STALL_SHUTDOWN_TIME_SECONDS": "20",
                "ZEN_TIMEOUT": "30", "ZEN_THREADS": "1", "OMP_NUM_THREADS": "1",
                "PYTHONPATH": os.path.join(ROOT, "bindings", "python")})
    if tmp_path is not None:
        env["ZENTEST_TMP"] = str(tmp_path)
    cmd = [ZENRUN, "-np", str(np)] + (["--mpi"] if mpi else []) + \
        [PYTHON, os.path.join(HERE, script)] + args
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=HERE)
    reports = {}
    for line in proc.stdout.splitlines():
        m = LINE.match(line)
        if m:
            report = json.loads(m.group(2))
            reports.setdefault(report["check"], {})[int(m.group(1))] = report
    return reports, proc


def assert_check(job, name, np):
    reports, proc = job
    got = reports.get(name, {})
    failures = {r: rep["error"] for r, rep in got.items() if not rep["ok"]}
    assert not failures, "check %s failed:\n%s" % (
        name, "\n".join("rank %d:\n%s" % (r, e) for r, e in sorted(failures.items())))
    assert sorted(got) == list(range(np)), (
        "check %s reported by ranks %s of %d; zenrun exited %d\nstdout:\n%s\nstderr:\n%s" %
        (name, sorted(got), np, proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:]))


def job_fixture(key, np, script, args, mpi=False):
    @pytest.fixture(scope="module")
    def fixture(tmp_path_factory):
        if key not in SELECTED:
            pytest.skip("job %s not selected (ZENTEST_TORCH_JOBS)" % key)
        if mpi and shutil.which("mpirun") is None:
            pytest.skip("no mpirun")
        return run_job(np, script, args, mpi=mpi, tmp_path=tmp_path_factory.mktemp(key))
    return fixture


job_np2 = job_fixture("np2", 2, "torch_checks.py", [])
job_np4 = job_fixture("np4", 4, "torch_checks.py", [])
job_mpi = job_fixture("mpi", 2, "torch_checks.py", [], mpi=True)
job_train2 = job_fixture("train2", 2, "torch_train.py", SCHEMES)
job_train4 = job_fixture("train4", 4, "torch_train.py", SCHEMES)

TRAIN_CHECKS = ["train.%s.sparse" % s for s in SCHEMES] + \
    ["train.zen.passes2", "train.zen.sparse_as_dense"]


@pytest.mark.parametrize("check", CHECK_NAMES)
def test_two_ranks_tcp(job_np2, check):
    assert_check(job_np2, check, 2)


@pytest.mark.parametrize("check", CHECK_NAMES)
def test_four_ranks_tcp(job_np4, check):
    assert_check(job_np4, check, 4)


@pytest.mark.parametrize("check", CHECK_NAMES)
def test_two_ranks_mpi(job_mpi, check):
    assert_check(job_mpi, check, 2)


@pytest.mark.parametrize("check", TRAIN_CHECKS)
def test_training_matches_one_process_two_ranks(job_train2, check):
    assert_check(job_train2, check, 2)


@pytest.mark.parametrize("check", TRAIN_CHECKS)
def test_training_matches_one_process_four_ranks(job_train4, check):
    assert_check(job_train4, check, 4)


def test_jobs_exit_cleanly(request):
    """Every selected job ended with exit code 0 (a rank that crashed after its last
    report, say in shutdown, fails here)."""
    for key in sorted(SELECTED - {"single", "example"}):
        fixture = {"np2": "job_np2", "np4": "job_np4", "mpi": "job_mpi",
                   "train2": "job_train2", "train4": "job_train4"}[key]
        try:
            _, proc = request.getfixturevalue(fixture)
        except pytest.skip.Exception:
            continue
        assert proc.returncode == 0, "%s: zenrun exited %d\n%s" % (key, proc.returncode,
                                                                   proc.stderr[-4000:])


def test_single_process_without_launcher():
    """Without zenrun or mpirun, init() makes a job of one and every op is the identity."""
    if "single" not in SELECTED:
        pytest.skip("job single not selected (ZENTEST_TORCH_JOBS)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEN_", "OMPI_", "PMI_"))}
    env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python")
    code = ("import torch, zen.torch as hvd\n"
            "hvd.init(); assert hvd.size() == 1 and hvd.rank() == 0\n"
            "t = torch.arange(6.).view(2, 3)\n"
            "assert torch.equal(hvd.allreduce(t), t)\n"
            "s = torch.sparse_coo_tensor([[1, 1]], torch.ones(2, 3), (4, 3))\n"
            "assert torch.equal(hvd.sparse_allreduce(s, op=hvd.Sum).to_dense(), s.to_dense())\n"
            "hvd.shutdown(); print('ok')\n")
    proc = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_word_lm_example():
    """examples/torch_word_lm.py (the fortunes corpus) runs a few steps per scheme on two
    ranks; every scheme gives the same loss, and the sparse schemes move fewer embedding
    bytes than the dense one."""
    if "example" not in SELECTED:
        pytest.skip("job example not selected (ZENTEST_TORCH_JOBS)")
    if not os.path.isdir("/usr/share/games/fortunes"):
        pytest.skip("Debian's fortunes package is not installed (tools/setup)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEN_", "ZENRUN_"))}
    env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python")
    proc = subprocess.run([ZENRUN, "-np", "2", PYTHON, os.path.join(ROOT, "examples",
                                                                    "torch_word_lm.py"),
                           "--steps", "3", "--schemes", "zen,agsparse,dense", "--vocab", "2000",
                           "--print-every", "1"],
                          capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    table = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^\[0\]<stdout>:(zen|agsparse|dense)\s+([0-9.]+)\s+[0-9]+\s+[0-9.]+"
                     r"\s+([0-9.]+)", line)
        if m:
            table[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    assert sorted(table) == ["agsparse", "dense", "zen"], proc.stdout[-4000:]
    assert len({loss for loss, _ in table.values()}) == 1, table
    assert table["zen"][1] < table["dense"][1] and table["agsparse"][1] < table["dense"][1]
