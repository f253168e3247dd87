"""zen.run (Horovod's horovod.run; bindings/python/zen/runner/run_func.py, run_task.py) on real
ranks: functions (closures, defined here, so cloudpickled by value) run on 2 launched ranks
under zen.torch return their values by rank; an exception on one rank fails the call naming
the rank and the error; it runs from a thread other than the main one; Horovod's arguments
zenrun lacks are refused, saying why.

The caller is this pytest process (its Python: /usr/bin/python3 under CTest); the ranks import
zen from BINDINGS, which zen.run puts on their PYTHONPATH itself. Every job is bounded by
--start-timeout and the library's ZEN_TIMEOUT, and the test by CTest's timeout.
"""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from rank_jobs import BINDINGS, CHECK_ENV, require_zen_torch

try:
    import cloudpickle  # noqa: F401
except ImportError:
    pytest.fail("zen.run needs cloudpickle: run tools/setup (python3-cloudpickle)", pytrace=False)
sys.path.insert(0, BINDINGS)

import zen  # noqa: E402
from zen.runner import RunError  # noqa: E402

ENV = dict(os.environ, **CHECK_ENV)


def test_returns_each_ranks_value_in_rank_order():
    require_zen_torch()
    offset = 100  # captured by the closure: travels with it

    def allreduce_rank(scale, power=1):
        import torch
        import zen.torch as zt

        zt.init()
        total = zt.allreduce(torch.tensor([float(zt.rank() + 1)]), op=zt.Sum).item()
        return {"rank": zt.rank(), "size": zt.size(), "value": total * scale ** power + offset}

    got = zen.run(allreduce_rank, args=(2,), kwargs={"power": 3}, np=2, env=ENV,
                  start_timeout=60)
    assert got == [{"rank": r, "size": 2, "value": 3 * 8 + offset} for r in (0, 1)]


def test_lambda_under_the_old_and_new_names(capfd):
    assert zen.run(lambda: print("no newline", end="") or "x", num_proc=2,
                   env=ENV) == ["x", "x"]
    from zen.runner import run

    assert run(lambda a: int(os.environ["ZEN_RANK"]) * a, args=(5,), env=ENV,
               use_gloo=True) == [0]
    out = capfd.readouterr().out
    assert "[1]<stdout>:no newline\n" in out and "ZENRUN_TASK" not in out, out


def test_from_another_thread():
    """Signal handlers can be set only by the main thread: zenrun's are left out there."""
    got = []
    t = threading.Thread(target=lambda: got.append(zen.run(lambda: 7, np=2, env=ENV)))
    t.start()
    t.join(120)
    assert got == [[7, 7]]


def test_an_exception_on_a_rank_fails_the_call_naming_it():
    def fail_on_rank_1():
        if os.environ["ZEN_RANK"] == "1":
            raise KeyError("no such thing on rank 1")
        return "ok"

    with pytest.raises(RunError) as caught:
        zen.run(fail_on_rank_1, np=2, env=ENV)
    e = caught.value
    assert str(e).startswith("zen.run: rank 1 raised KeyError: 'no such thing on rank 1'"), e
    assert "fail_on_rank_1" in e.traceback and e.rank == 1
    assert isinstance(e.__cause__, KeyError) and e.error.args == ("no such thing on rank 1",)


def test_unpicklable_exception_and_exit_without_result():
    class Odd(Exception):
        def __init__(self, a, b):  # pickles as Odd(message): cannot be rebuilt
            super().__init__(f"{a}/{b}")

        def __reduce__(self):
            raise TypeError("not this one")

    def raise_odd():
        raise Odd(1, 2)

    with pytest.raises(RunError, match=r"rank 0 raised Odd: 1/2") as caught:
        zen.run(raise_odd, env=ENV)
    assert caught.value.error is None and "raise Odd(1, 2)" in caught.value.traceback
    with pytest.raises(RunError, match=r"exit code 3.*no result from rank 0"):
        zen.run(lambda: os._exit(3), env=ENV)

    def explode():
        raise ImportError("only on the ranks")

    class LoadsOnlyThere:
        def __reduce__(self):
            return explode, ()

    with pytest.raises(RunError, match=r"rank 0's result cannot be unpickled here: "
                                       r"ImportError: only on the ranks"):
        zen.run(LoadsOnlyThere, env=ENV)


@pytest.mark.parametrize("kwargs,message", [
    ({"min_np": 1}, "min_np not supported: zen.run runs fixed-size jobs only"),
    ({"max_num_proc": 4, "slots": 2}, "max_num_proc, slots not supported"),
    ({"cooldown_range": (1, 2)}, "cooldown_range not supported"),
    ({"use_gloo": True, "use_mpi": True}, "use_gloo and use_mpi exclude each other"),
    ({"hosts": "localhost:1", "hostfile": "x"}, "hosts and hostfile exclude each other"),
    ({"np": 0}, "-np must be >= 1, not 0"),
    ({"np": 2, "num_proc": 3}, "num_proc=3 and np=2 disagree"),
    ({"np": 3, "hosts": "localhost:2"}, "-np 3 but the hosts offer only 2 slots"),
    ({"hostfile": "/nonexistent/hosts"}, "--hostfile: cannot read '/nonexistent/hosts'"),
    ({"start_timeout": "soon"}, "--start-timeout (or ZENRUN_START_TIMEOUT) must be a number"),
    ({"ssh_port": 70000}, "--ssh-port must be in [1, 65535]"),
])
def test_refusals(kwargs, message):
    with pytest.raises(ValueError) as caught:
        zen.run(lambda: None, env=ENV, **kwargs)
    assert str(caught.value).startswith("zen.run: ") and message in str(caught.value), \
        caught.value


def test_ctrl_c_in_the_caller_stops_the_ranks_and_raises_keyboard_interrupt(tmp_path):
    """Horovod's run lets the caller's KeyboardInterrupt through; zen.run does too, after
    zenrun's handler has stopped the ranks (not as RunError, exit code 130)."""
    def report_and_sleep(folder):
        import time

        with open(os.path.join(folder, f"pid.{os.environ['ZEN_RANK']}"), "w") as f:
            f.write(str(os.getpid()))
        time.sleep(300)

    files = [tmp_path / f"pid.{r}" for r in (0, 1)]

    def interrupt_when_both_sleep():
        deadline = time.monotonic() + 60
        while not all(f.exists() and f.read_text() for f in files):
            if time.monotonic() > deadline:
                return  # the job runs into pytest's timeout, failing the test
            time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_when_both_sleep, daemon=True).start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        zen.run(report_and_sleep, args=(str(tmp_path),), np=2, env=ENV, start_timeout=60)
    assert time.monotonic() - start < 120
    pids = [int(f.read_text()) for f in files]
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)], pids


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_stall_flags_are_checked_against_the_jobs_environment(monkeypatch):
    """zen.run's env= is what the ranks get: the stall-flag check reads it, not os.environ."""
    from zen.runner import args as arglib

    monkeypatch.delenv("HOROVOD_STALL_CHECK_DISABLE", raising=False)
    monkeypatch.delenv("ZEN_STALL_CHECK_TIME_SECONDS", raising=False)
    argv = ["-np", "2", "--stall-check-shutdown-time-seconds", "30", "--", "true"]
    with pytest.raises(arglib.UsageError, match="HOROVOD_STALL_CHECK_DISABLE=1 turns off"):
        arglib.parse(argv, raise_errors=True, environ={"HOROVOD_STALL_CHECK_DISABLE": "1"})
    with pytest.raises(arglib.UsageError, match="is below ZEN_STALL_CHECK_TIME_SECONDS"):
        arglib.parse(argv, raise_errors=True, environ={"ZEN_STALL_CHECK_TIME_SECONDS": "40"})
    monkeypatch.setenv("ZEN_STALL_CHECK_TIME_SECONDS", "40")  # the caller's: not the job's
    arglib.parse(argv, raise_errors=True, environ={"ZEN_STALL_CHECK_TIME_SECONDS": "10"})


def test_func_must_be_callable_and_small():
    with pytest.raises(TypeError, match="func must be callable, not int"):
        zen.run(3)
    with pytest.raises(ValueError, match="pass large data through files"):
        zen.run(len, args=(b"x" * (1 << 20),), env=ENV)


def test_large_function_through_the_remote_launch_path(monkeypatch):
    """A function of several environment variables' worth, to ranks started as remote ones (the
    environment as the wrapper's stdin line) through a launch command that stays on this
    machine, and to local ones."""
    monkeypatch.setenv("ZENRUN_LAUNCH_COMMAND", "env ZENTEST_FAKE_HOST={host} sh -c")
    data = bytes(range(256)) * 1200  # 300 KiB: four variables once base64-encoded

    def digest():
        import hashlib

        return os.environ.get("ZENTEST_FAKE_HOST"), hashlib.sha256(data).hexdigest()

    import hashlib

    want = hashlib.sha256(data).hexdigest()
    assert zen.run(digest, np=2, hosts="fakehost:2", env=ENV) == [("fakehost", want)] * 2
    assert zen.run(digest, np=2, env=ENV) == [(None, want)] * 2


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun (openmpi-bin)")
def test_mpi_mode():
    assert zen.run(lambda: os.environ["OMPI_COMM_WORLD_RANK"], np=2, use_mpi=True,
                   env=ENV) == ["0", "1"]


TF_CALLER = """
import os, sys
sys.path.insert(0, os.environ["ZENTEST_PYTHONPATH"])
import zen

def step(x):
    import tensorflow as tf
    import zen.tensorflow as hvd

    hvd.init()
    return float(hvd.allreduce(tf.constant([x * (hvd.rank() + 1)]), op=hvd.Sum).numpy()[0])

print("RESULTS", zen.run(step, args=(1.5,), np=2))
"""


@pytest.mark.skipif(not os.environ.get("ZENTEST_ZEN_RUN_TF"),
                    reason="CTest's python_zen_run_tf runs it (zen.tensorflow built)")
def test_tensorflow_venv_caller():
    """zen.run called by the TensorFlow venv's python (its cloudpickle from PyPI), ranks
    running zen.tensorflow's allreduce."""
    from rank_jobs import TF_ENV, TF_PYTHON, require_zen_tensorflow

    require_zen_tensorflow()
    env = dict(ENV, **TF_ENV, ZENTEST_PYTHONPATH=BINDINGS)
    proc = subprocess.run([TF_PYTHON, "-c", TF_CALLER], env=env, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0 and "RESULTS [4.5, 4.5]" in proc.stdout, \
        proc.stdout + proc.stderr
