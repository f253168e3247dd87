"""Tests of zen.tensorflow (bindings/python/zen/tensorflow, bindings/tensorflow): real ranks
launched by tools/zenrun run tf_checks.py (every API function) and tf_train.py
(DistributedGradientTape and DistributedOptimizer against one-process training, per scheme)
under the TensorFlow of .venv-tf; this file reads their per-check reports and needs no
TensorFlow itself.

Run: tools/build-tf && /usr/bin/python3 -m pytest -q test/python/test_tensorflow.py
(CTest: python_tf_*, which build the op library first.) ZENTEST_TF_JOBS selects the jobs
(comma-separated: np2, np4, train2, train4, single; default all); ZENTEST_TF_PYTHON is the
ranks' python (default .venv-tf/bin/python). A missing venv or op library fails, it is not
skipped: tools/test promises these tests ran.
"""

import ast
import json
import os
import re
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ZENRUN = os.path.join(ROOT, "tools", "zenrun")
PYTHON = os.environ.get("ZENTEST_TF_PYTHON", os.path.join(ROOT, ".venv-tf", "bin", "python"))
LINE = re.compile(r"^\[(\d+)\]<stdout>:ZENTEST (.*)$")
SCHEMES = ["zen", "hc", "agsparse", "blocks", "dense"]
SELECTED = set(filter(None, os.environ.get("ZENTEST_TF_JOBS", "np2,np4,train2,train4,single")
                      .split(",")))

if not os.path.exists(PYTHON):
    pytest.fail("no TensorFlow venv at %s: run tools/setup" % PYTHON, pytrace=False)
if not os.path.exists(os.path.join(ROOT, "bindings", "python", "zen", "tensorflow",
                                   "_zen_tf_ops.so")):
    pytest.fail("zen.tensorflow is not built here: run tools/build-tf", pytrace=False)


def _check_names():
    """The @check functions of tf_checks.py, in order (read without importing TensorFlow)."""
    with open(os.path.join(HERE, "tf_checks.py")) as f:
        tree = ast.parse(f.read())
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef) and
            any(getattr(d, "id", None) == "check" for d in node.decorator_list)]


CHECK_NAMES = _check_names()
TRAIN_CHECKS = ["%s.%s" % (kind, s) for s in SCHEMES for kind in ("tape", "keras")] + \
    ["tape.zen.sparse_as_dense", "tape.zen.fp16"]


def environment():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEN_", "ZENRUN_"))}
    env.update({"ZEN_STALL_CHECK_TIME_SECONDS": "5", "ZEN_STALL_SHUTDOWN_TIME_SECONDS": "20",
                "ZEN_TIMEOUT": "30", "ZEN_THREADS": "1", "OMP_NUM_THREADS": "1",
                "TF_NUM_INTEROP_THREADS": "2", "TF_NUM_INTRAOP_THREADS": "1",
                "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0",
                "PYTHONPATH": os.path.join(ROOT, "bindings", "python")})
    return env


def run_job(np, script, args, timeout=240):
    """{check: {rank: report}} of one zenrun job, and the finished process."""
    cmd = [ZENRUN, "-np", str(np), PYTHON, os.path.join(HERE, script)] + args
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=environment(), cwd=HERE)
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


def job_fixture(key, np, script, args):
    @pytest.fixture(scope="module")
    def fixture():
        if key not in SELECTED:
            pytest.skip("job %s not selected (ZENTEST_TF_JOBS)" % key)
        return run_job(np, script, args)
    return fixture


job_np2 = job_fixture("np2", 2, "tf_checks.py", [])
job_np4 = job_fixture("np4", 4, "tf_checks.py", [])
job_train2 = job_fixture("train2", 2, "tf_train.py", SCHEMES)
job_train4 = job_fixture("train4", 4, "tf_train.py", SCHEMES)
JOBS = {"np2": "job_np2", "np4": "job_np4", "train2": "job_train2", "train4": "job_train4"}


@pytest.mark.parametrize("check", CHECK_NAMES)
def test_two_ranks_tcp(job_np2, check):
    assert_check(job_np2, check, 2)


@pytest.mark.parametrize("check", CHECK_NAMES)
def test_four_ranks_tcp(job_np4, check):
    assert_check(job_np4, check, 4)


@pytest.mark.parametrize("check", TRAIN_CHECKS)
def test_training_matches_one_process_two_ranks(job_train2, check):
    assert_check(job_train2, check, 2)


@pytest.mark.parametrize("check", TRAIN_CHECKS)
def test_training_matches_one_process_four_ranks(job_train4, check):
    assert_check(job_train4, check, 4)


def test_jobs_exit_cleanly(request):
    """Every selected job ended with exit code 0 (a rank that crashed after its last report,
    say in shutdown, fails here)."""
    for key in sorted(SELECTED & set(JOBS)):
        _, proc = request.getfixturevalue(JOBS[key])
        assert proc.returncode == 0, "%s: zenrun exited %d\n%s" % (key, proc.returncode,
                                                                   proc.stderr[-4000:])


def test_single_process_without_launcher():
    """Without zenrun or mpirun, init() makes a job of one and every op is the identity;
    `import zen` loads neither TensorFlow nor torch."""
    if "single" not in SELECTED:
        pytest.skip("job single not selected (ZENTEST_TF_JOBS)")
    env = {k: v for k, v in environment().items() if not k.startswith(("ZEN_", "OMPI_", "PMI_"))}
    code = (
        "import sys, zen\n"
        "assert 'tensorflow' not in sys.modules and 'torch' not in sys.modules\n"
        "import tensorflow as tf, zen.tensorflow as hvd\n"
        "hvd.init(); assert hvd.size() == 1 and hvd.rank() == 0 and hvd.local_size() == 1\n"
        "t = tf.reshape(tf.range(6.), [2, 3])\n"
        "assert bool(tf.reduce_all(hvd.allreduce(t) == t))\n"
        "s = tf.IndexedSlices(tf.ones([2, 3]), tf.constant([1, 1]), tf.constant([4, 3]))\n"
        "out = hvd.allreduce(s, op=hvd.Sum)\n"
        "assert out.indices.numpy().tolist() == [1] and out.values.numpy().tolist() == "
        "[[2.0] * 3]\n"
        "assert int(hvd.join()) == 0\n"
        "hvd.shutdown(); print('ok')\n")
    proc = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-4000:]
