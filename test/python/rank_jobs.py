"""What the pytest drivers that launch real ranks share (test_torch.py, test_tensorflow.py,
test_deepfm_example.py, test_tf_word_lm_example.py, test_timeline_real.py, the elastic
tests): the paths, the
environment the ranks run in, one tools/zenrun launch, and reading back what the ranks
printed: the check reports of rank_report.py (`[R]<stdout>:ZENTEST {...}`) and rank 0's
lines (the examples' steps and tables). Needs no framework itself.

Each launch is bounded by a subprocess timeout; the daemon's stall shutdown (STALL) turns a
rank that stops posting into errors on every rank instead of a hang.
"""

import ast
import contextlib
import json
import os
import re
import socket
import subprocess
import threading

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ZENRUN = os.path.join(ROOT, "tools", "zenrun")
# Where the ranks import zen from: CTest's staged copy in its build directory, else the
# checkout (after tools/build-python, tools/build-tf). Every test file that imports zen itself
# puts this first on sys.path, never the checkout beside it: one pytest process running
# several files imports zen once, from whichever comes first, and zen.run gives its ranks
# that package (test_zen_run.py's would lack libzen.so after test_zenrun.py's checkout).
BINDINGS = os.environ.get("ZENTEST_PYTHONPATH") or os.path.join(ROOT, "bindings", "python")
TORCH_PYTHON = "/usr/bin/python3"
TF_PYTHON = os.environ.get("ZENTEST_TF_PYTHON", os.path.join(ROOT, ".venv-tf", "bin", "python"))
FORTUNES = "/usr/share/games/fortunes"
SCHEMES = ["zen", "hc", "agsparse", "blocks", "dense"]

STALL = {"ZEN_STALL_CHECK_TIME_SECONDS": "5", "ZEN_STALL_SHUTDOWN_TIME_SECONDS": "20"}
# The check and training jobs: bounded waits, one thread each (the machine is shared).
CHECK_ENV = dict(STALL, ZEN_TIMEOUT="30", ZEN_THREADS="1", OMP_NUM_THREADS="1")
TF_ENV = {"TF_NUM_INTEROP_THREADS": "2", "TF_NUM_INTRAOP_THREADS": "1",
          "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}

REPORT = re.compile(r"^\[(\d+)\]<stdout>:ZENTEST (.*)$")
RANK0 = "[0]<stdout>:"
STEP = re.compile(r"^\[(\w+)\] step +(\d+)  loss ([0-9.]+)")


# ---- what a test module needs ----

@contextlib.contextmanager
def held_port(host="127.0.0.1"):
    """A free TCP port of host for a job told it by hand (--controller-addr HOST:PORT), kept
    bound, with SO_REUSEADDR but not listening, until the block ends: a port probed and closed
    could be taken by another process (ctest -j) before the job binds it. Linux lets only a
    socket that sets SO_REUSEADDR too bind it meanwhile (rank 0's: the library's
    openListener, rank_probe.py) and never hands it out as an ephemeral port."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, 0))
        yield s.getsockname()[1]
    finally:
        s.close()


def require_zen_torch():
    """Skips the calling test module where this python has no torch or zen.torch is not
    built (BINDINGS)."""
    pytest.importorskip("torch")
    if not os.path.exists(os.path.join(BINDINGS, "zen", "lib", "libzen.so")):
        pytest.skip("zen.torch is not built in %s: run tools/build-python" % BINDINGS,
                    allow_module_level=True)


def require_zen_tensorflow():
    """Fails (does not skip: tools/test promises these tests ran) the calling test module
    where the TensorFlow venv or zen.tensorflow's op library is missing."""
    if not os.path.exists(TF_PYTHON):
        pytest.fail("no TensorFlow venv at %s: run tools/setup" % TF_PYTHON, pytrace=False)
    if not os.path.exists(os.path.join(BINDINGS, "zen", "tensorflow", "_zen_tf_ops.so")):
        pytest.fail("zen.tensorflow is not built in %s: run tools/build-tf" % BINDINGS,
                    pytrace=False)


def selected_jobs(variable, default):
    """The jobs $variable names (comma-separated), else default's."""
    return set(filter(None, os.environ.get(variable, default).split(",")))


# ---- launching ----

def environment(extra=(), drop=("ZEN_", "ZENRUN_", "HOROVOD_")):
    """This process's environment without the variables whose names start with drop (the
    library rejects unknown ZEN_* names, reads HOROVOD_* ones as aliases, and an outer
    launcher's must not leak in), with
    BINDINGS as PYTHONPATH and extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PYTHONPATH"] = BINDINGS
    env.update(extra)
    return env


def zenrun(np, python, script, args=(), flags=(), extra_env=(), timeout=240, cwd=None):
    """One tools/zenrun launch of np ranks of `python script args` (flags: zenrun's own);
    the finished process, its output captured."""
    cmd = [ZENRUN, "-np", str(np)] + list(flags) + [python, script] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=environment(extra_env), cwd=cwd)


def zenrun_streaming(argv, extra_env=(), timeout=240, on_line=None):
    """tools/zenrun ARGV (its flags, the program and its arguments) in HERE, on_line(line)
    called on each stdout line as it comes (the elastic tests change hosts on what the ranks
    print). (exit code, stdout, stderr); past the timeout, an AssertionError with both tails."""
    proc = subprocess.Popen([ZENRUN] + list(argv), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=environment(extra_env),
                            cwd=HERE)
    out, err = [], []

    def read(pipe, into, callback):
        for line in pipe:
            into.append(line)
            if callback is not None:
                callback(line)

    readers = [threading.Thread(target=read, args=(proc.stdout, out, on_line), daemon=True),
               threading.Thread(target=read, args=(proc.stderr, err, None), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("zenrun ran past %d s\n%s\n%s" % (timeout, "".join(out)[-3000:],
                                                                "".join(err)[-3000:]))
    for reader in readers:
        reader.join(10)
    return proc.returncode, "".join(out), "".join(err)


def hand_placement(slots):
    """Each rank's ZEN_* placement (ZEN_RANK, ZEN_SIZE, ZEN_LOCAL_*, ZEN_CROSS_*) on "hosts" of
    slots[h] ranks, filled in rank order, as zenrun -H would set it; cross rank and size are
    Horovod's (among the hosts that have this local rank)."""
    out = []
    for host, n in enumerate(slots):
        for local in range(n):
            hosts = [h for h, m in enumerate(slots) if m > local]
            out.append({"ZEN_RANK": str(len(out)), "ZEN_SIZE": str(sum(slots)),
                        "ZEN_LOCAL_RANK": str(local), "ZEN_LOCAL_SIZE": str(n),
                        "ZEN_CROSS_RANK": str(hosts.index(host)),
                        "ZEN_CROSS_SIZE": str(len(hosts))})
    return out


def run_hand_placed(python, code, slots, extra_env=(), timeout=180):
    """`python -c code` as the ranks of a TCP job on this machine whose placement says they
    run on hosts of slots[h] ranks (hand_placement; no launcher); every rank's stdout, in rank
    order, each rank having exited 0."""
    drop = ("ZEN_", "ZENRUN_", "OMPI_", "PMI_")
    with held_port() as port:
        procs = []
        for placement in hand_placement(slots):
            env = dict(CHECK_ENV, ZEN_CONTROLLER_ADDR="127.0.0.1:%d" % port,
                       ZEN_SECRET="hand-placed", **placement)
            env.update(extra_env)
            procs.append(subprocess.Popen([python, "-c", code], stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True,
                                          env=environment(env, drop)))
        results = []
        try:
            for proc in procs:
                results.append(proc.communicate(timeout=timeout))
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    for rank, (proc, (out, err)) in enumerate(zip(procs, results)):
        assert proc.returncode == 0, "rank %d exited %d\n%s" % (rank, proc.returncode,
                                                                err[-4000:])
    return [out for out, _ in results]


def homogeneity_code(module):
    """What each rank of the hand-placed jobs runs (module: "zen.torch" or "zen.tensorflow"):
    Horovod's answers before init (is_homogeneous and mpi_threads_supported raise ValueError,
    mpi_enabled False, the build queries answer), then `HOMOGENEOUS <bool>` printed after."""
    return (
        "import %s as hvd\n"
        "for refused in (hvd.is_homogeneous, hvd.mpi_threads_supported):\n"
        "    try:\n"
        "        refused()\n"
        "        raise SystemExit(refused.__name__ + ' answered before init')\n"
        "    except ValueError:\n"
        "        pass\n"
        "assert hvd.mpi_enabled() is False and isinstance(hvd.nccl_built(), int)\n"
        "hvd.init()\n"
        "print('HOMOGENEOUS', hvd.is_homogeneous(), flush=True)\n"
        "hvd.barrier()\n"
        "hvd.shutdown()\n") % module


def assert_homogeneity(python, module, slots, expected, extra_env=()):
    """Every rank of a job hand-placed on hosts of slots (run_hand_placed) says
    is_homogeneous() == expected."""
    outs = run_hand_placed(python, homogeneity_code(module), slots, extra_env)
    for rank, out in enumerate(outs):
        assert "HOMOGENEOUS %s" % expected in out, (slots, rank, out)


def run_single_process(python, code, extra_env=(), drop=("ZEN_", "OMPI_", "PMI_")):
    """`python -c code` without a launcher (no launcher's variables); it must print "ok"."""
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120,
                          env=environment(extra_env, drop))
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-4000:]


def assert_exited_cleanly(proc):
    assert proc.returncode == 0, "zenrun exited %d\n%s\n%s" % (
        proc.returncode, proc.stdout[-3000:], proc.stderr[-4000:])


def rank0_lines(proc):
    """What rank 0 printed on stdout, line by line, without zenrun's "[0]<stdout>:"."""
    return [line[len(RANK0):] for line in proc.stdout.splitlines() if line.startswith(RANK0)]


def steps(proc):
    """{scheme: [(step, loss), ...]} from rank 0's `[scheme] step N  loss X` lines (the
    examples' progress)."""
    out = {}
    for line in rank0_lines(proc):
        m = STEP.match(line)
        if m:
            out.setdefault(m.group(1), []).append((int(m.group(2)), float(m.group(3))))
    return out


# ---- check jobs: every rank reports each check (rank_report.py) ----

def check_job(np, python, script, args=(), flags=(), extra_env=(), tmp_path=None, timeout=240):
    """{check: {rank: report}} of one zenrun job of script (in this folder), and the
    finished process; tmp_path reaches the ranks as ZENTEST_TMP."""
    extra = dict(CHECK_ENV, **dict(extra_env))
    if tmp_path is not None:
        extra["ZENTEST_TMP"] = str(tmp_path)
    proc = zenrun(np, python, os.path.join(HERE, script), args, flags, extra, timeout, cwd=HERE)
    reports = {}
    for line in proc.stdout.splitlines():
        m = REPORT.match(line)
        if m:
            report = json.loads(m.group(2))
            reports.setdefault(report["check"], {})[int(m.group(1))] = report
    return reports, proc


def check_names(script):
    """The @check functions of script (in this folder), in order, read without importing it
    (nor its framework)."""
    with open(os.path.join(HERE, script)) as f:
        tree = ast.parse(f.read())
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef) and
            any(getattr(d, "id", None) == "check" for d in node.decorator_list)]


def job_fixture(selected, variable, key, launch):
    """A module-scoped fixture: launch(tmp_path) once, skipped unless key is in selected
    (the jobs $variable names)."""
    @pytest.fixture(scope="module")
    def fixture(tmp_path_factory):
        if key not in selected:
            pytest.skip("job %s not selected (%s)" % (key, variable))
        return launch(tmp_path_factory.mktemp(key))
    return fixture


def check_test(fixture, np, names):
    """A test of the job of fixture (a job_fixture's name) on np ranks, one case per check of
    names: assert_check."""
    @pytest.mark.parametrize("check", names)
    def test(request, check):
        assert_check(request.getfixturevalue(fixture), check, np)
    return test


def exit_test(fixtures, selected):
    """A test that every selected job of fixtures ({job: fixture name}) that ran ended with
    exit code 0 (a rank that crashed after its last report, say in shutdown, fails it)."""
    def test(request):
        for key in sorted(selected & set(fixtures)):
            try:
                _, proc = request.getfixturevalue(fixtures[key])
            except pytest.skip.Exception:
                continue
            assert proc.returncode == 0, "%s: zenrun exited %d\n%s" % (
                key, proc.returncode, proc.stderr[-4000:])
    return test


def assert_check(job, name, np):
    """Every one of np ranks reported check name of job (check_job's) and none failed."""
    reports, proc = job
    got = reports.get(name, {})
    failures = {r: rep["error"] for r, rep in got.items() if not rep["ok"]}
    assert not failures, "check %s failed:\n%s" % (
        name, "\n".join("rank %d:\n%s" % (r, e) for r, e in sorted(failures.items())))
    assert sorted(got) == list(range(np)), (
        "check %s reported by ranks %s of %d; zenrun exited %d\nstdout:\n%s\nstderr:\n%s" %
        (name, sorted(got), np, proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:]))


# ---- the word-LM examples (examples/torch_word_lm.py, examples/tf_word_lm.py) ----

def run_word_lm(python, example, schemes, extra_env=()):
    """A few steps of examples/<example> per scheme on two ranks (skipped without the
    fortunes corpus); the finished process, which exited 0."""
    if not os.path.isdir(FORTUNES):
        pytest.skip("Debian's fortunes package is not installed (tools/setup)")
    proc = zenrun(2, python, os.path.join(ROOT, "examples", example),
                  ["--steps", "3", "--schemes", ",".join(schemes), "--vocab", "2000",
                   "--print-every", "1"], extra_env=extra_env, cwd=ROOT)
    assert_exited_cleanly(proc)
    return proc


def assert_word_lm_table(proc, schemes):
    """Rank 0's table (examples/example_report.py) has a row per scheme; every scheme gives
    the same loss, and the sparse schemes move fewer embedding bytes than the dense one."""
    row = re.compile(r"^(%s)\s+([0-9.]+)\s+[0-9]+\s+[0-9.]+\s+([0-9.]+)" % "|".join(schemes))
    table = {}
    for line in rank0_lines(proc):
        m = row.match(line)
        if m:
            table[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    assert sorted(table) == sorted(schemes), proc.stdout[-4000:]
    assert len({loss for loss, _ in table.values()}) == 1, table
    assert table["zen"][1] < table["dense"][1] and table["agsparse"][1] < table["dense"][1]
