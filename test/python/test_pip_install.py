"""`pip install .` for real, then the installed package at work outside the checkout (cwd in
a temporary directory, no PYTHONPATH to bindings/python):

- TensorFlow: the .venv-tf pip installs into a throwaway --target (setup.py finds
  tensorflow, builds zen/tensorflow/_zen_tf_ops.so, no zen.torch); with that python,
  zen.tensorflow's allreduce of a tensor and of tf.IndexedSlices on one rank,
  zen.tensorflow.keras imports from there, and the zenrun script is there.
- PyTorch: a throwaway `/usr/bin/python3 -m venv --system-site-packages` (Debian's torch)
  whose pip installs the package; zen.torch's allreduce and sparse_allreduce on one rank,
  then a 2-rank job launched by the installed zenrun.
- ZENPY_WITH_TENSORFLOW=1 where there is no TensorFlow fails, saying so.

The two installs run at once, each compiling with one job (ZENPY_BUILD_JOBS=1) into its own
temporary build base (ZENPY_BUILD_BASE), so nothing in the checkout is written (no
build-python/, no bindings/python/zen/lib), and libzen.so is taken as built (ZENPY_LIB, which
CTest's python_pip_install sets to the zen_shared target). ZENTEST_TF_PYTHON: the TensorFlow
venv's python (default .venv-tf/bin/python; its part is skipped when it has none).

Run: ZENPY_LIB=build/bindings/libzen.so /usr/bin/python3 -m pytest -q
test/python/test_pip_install.py
"""

import os
import shutil
import subprocess
import tempfile
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TF_PYTHON = os.environ.get("ZENTEST_TF_PYTHON", os.path.join(ROOT, ".venv-tf", "bin", "python"))
SYSTEM_PYTHON = "/usr/bin/python3"
LIB = os.environ.get("ZENPY_LIB", "")
INSTALL_TIMEOUT = 420

if not os.path.isfile(LIB):
    pytest.fail("ZENPY_LIB=%r is not a file: set it to a built libzen.so "
                "(build/bindings/libzen.so)" % LIB, pytrace=False)


def _has(python, module):
    return os.path.exists(python) and subprocess.run(
        [python, "-c", "import importlib.util, sys; "
         "sys.exit(importlib.util.find_spec(%r) is None)" % module],
        capture_output=True).returncode == 0


HAVE_TF = _has(TF_PYTHON, "tensorflow")
HAVE_TORCH = _has(SYSTEM_PYTHON, "torch")


def environment(**extra):
    """This environment without anything of the checkout's or a launcher's."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ZEN_", "ZENRUN_", "ZENPY_", "OMPI_", "PMI_", "PIP_")) and
           k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update({"OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
                "TF_ENABLE_ONEDNN_OPTS": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "PIP_NO_INDEX": "1", "PIP_NO_CACHE_DIR": "1"})
    env.update(extra)
    return env


def pip_env(build_base, **extra):
    return environment(ZENPY_LIB=LIB, ZENPY_BUILD_JOBS="1", ZENPY_BUILD_BASE=build_base,
                       **extra)


class Install:
    """One `pip install` running in the background; wait() returns its output, failing the
    test when pip failed and expect_ok."""

    def __init__(self, name, cmd, env, cwd, expect_ok=True):
        self.name, self.expect_ok = name, expect_ok
        self.proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self._result = None

    def wait(self):
        if self._result is None:
            try:
                out, _ = self.proc.communicate(timeout=INSTALL_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                out, _ = self.proc.communicate()
                pytest.fail("%s: pip ran past %d s:\n%s" % (self.name, INSTALL_TIMEOUT, out))
            self._result = (self.proc.returncode, out)
        rc, out = self._result
        if self.expect_ok and rc != 0:
            pytest.fail("%s: pip install failed (exit %d):\n%s" % (self.name, rc, out),
                        pytrace=False)
        return rc, out


@pytest.fixture(scope="module")
def work():
    tmp = tempfile.mkdtemp(prefix="zen-pip-")
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def installs(work):
    """Starts every install at once (each compiles with one job): {name: (Install, where)}."""
    started = {}
    cwd = os.path.join(work, "cwd")
    os.makedirs(cwd)
    if HAVE_TF:
        target = os.path.join(work, "tf-target")
        pip = os.path.join(os.path.dirname(TF_PYTHON), "pip")
        started["tf"] = (Install(
            "tensorflow", [pip, "install", "-q", "--no-build-isolation", "--no-deps",
                           "--target", target, ROOT],
            pip_env(os.path.join(work, "tf-build")), cwd), target)
    if HAVE_TORCH:
        venv = os.path.join(work, "venv")
        subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--system-site-packages", venv],
                       check=True, env=environment(), cwd=cwd, timeout=120)
        pip = os.path.join(venv, "bin", "pip")
        started["torch"] = (Install(
            "torch", [pip, "install", "-q", "--no-build-isolation", ROOT],
            pip_env(os.path.join(work, "torch-build")), cwd), venv)
        # No TensorFlow in this venv: requiring it must fail, before any compiling.
        started["tf-missing"] = (Install(
            "tf-missing", [pip, "install", "--no-build-isolation", "--no-deps", "--target",
                           os.path.join(work, "never"), ROOT],
            pip_env(os.path.join(work, "never-build"), ZENPY_WITH_TENSORFLOW="1",
                    ZENPY_WITH_TORCH="0"), cwd, expect_ok=False), venv)
    try:
        yield started
    finally:
        for install, _ in started.values():
            if install.proc.poll() is None:
                install.proc.kill()
                install.proc.wait()


def run_python(python, code, cwd, timeout=120, **env):
    proc = subprocess.run([python, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout, env=environment(**env))
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), \
        "exit %d\nstdout:\n%s\nstderr:\n%s" % (proc.returncode, proc.stdout, proc.stderr)
    return proc.stdout


@pytest.mark.skipif(not HAVE_TF, reason="no TensorFlow in %s (tools/setup)" % TF_PYTHON)
def test_tensorflow_install(installs, work):
    install, target = installs["tf"]
    install.wait()
    ops = os.path.join(target, "zen", "tensorflow", "_zen_tf_ops.so")
    assert os.path.isfile(ops) and os.path.isfile(os.path.join(target, "zen", "lib",
                                                               "libzen.so"))
    assert not os.path.exists(os.path.join(target, "zen", "torch", "_zen_torch.so"))
    runpath = subprocess.run(["readelf", "-d", ops], capture_output=True, text=True).stdout
    assert "$ORIGIN/../lib" in runpath, runpath
    assert os.access(os.path.join(target, "bin", "zenrun"), os.X_OK)
    run_python(TF_PYTHON, """
        import sys
        import zen
        assert zen.__file__.startswith(%r), zen.__file__
        assert "tensorflow" not in sys.modules and "torch" not in sys.modules
        import tensorflow as tf
        import zen.tensorflow as hvd
        hvd.init()
        assert hvd.size() == 1 and hvd.rank() == 0
        t = tf.reshape(tf.range(6.0), [2, 3])
        assert hvd.allreduce(t, op=hvd.Sum).numpy().tolist() == t.numpy().tolist()
        assert hvd.allreduce(t).numpy().tolist() == t.numpy().tolist()
        s = tf.IndexedSlices(tf.ones([2, 3]), tf.constant([1, 1]), tf.constant([4, 3]))
        out = hvd.allreduce(s, op=hvd.Sum)
        assert isinstance(out, tf.IndexedSlices)
        assert out.indices.numpy().tolist() == [1], out.indices
        assert out.values.numpy().tolist() == [[2.0] * 3], out.values
        import zen.tensorflow.keras as hvd_keras  # the subpackage is installed too
        assert hvd_keras.callbacks.__file__.startswith(%r), hvd_keras.callbacks.__file__
        assert hvd_keras.allreduce([1.0, 2.0]).numpy().tolist() == [1.0, 2.0]
        hvd.shutdown()
        print("ok")
        """ % (target + os.sep, target + os.sep), os.path.join(work, "cwd"), PYTHONPATH=target)


@pytest.mark.skipif(not HAVE_TORCH, reason="/usr/bin/python3 has no torch (tools/setup)")
def test_torch_install(installs, work):
    install, venv = installs["torch"]
    install.wait()
    python = os.path.join(venv, "bin", "python")
    run_python(python, """
        import sys
        import zen
        assert zen.__file__.startswith(%r), zen.__file__
        assert "tensorflow" not in sys.modules and "torch" not in sys.modules
        import torch
        import zen.torch as hvd
        hvd.init()
        assert hvd.size() == 1 and hvd.rank() == 0
        t = torch.arange(6.0).view(2, 3)
        assert torch.equal(hvd.allreduce(t, op=hvd.Sum), t)
        s = torch.sparse_coo_tensor([[1, 1, 3]], torch.ones(3, 2), (5, 2))
        out = hvd.sparse_allreduce(s, op=hvd.Sum)
        assert out.is_sparse and torch.equal(out.to_dense(), s.to_dense()), out
        hvd.shutdown()
        print("ok")
        """ % (venv + os.sep), os.path.join(work, "cwd"))


@pytest.mark.skipif(not HAVE_TORCH, reason="/usr/bin/python3 has no torch (tools/setup)")
def test_torch_installed_zenrun_two_ranks(installs, work):
    install, venv = installs["torch"]
    install.wait()
    script = os.path.join(work, "two_ranks.py")
    with open(script, "w") as f:
        f.write(textwrap.dedent("""
            import torch
            import zen.torch as hvd
            hvd.init()
            r, n = hvd.rank(), hvd.size()
            assert n == 2
            dense = hvd.allreduce(torch.full((3,), float(r + 1)), op=hvd.Sum)
            assert dense.tolist() == [3.0] * 3, dense
            s = torch.sparse_coo_tensor([[r, 4]], torch.ones(2, 2), (6, 2))
            out = hvd.sparse_allreduce(s, op=hvd.Sum).to_dense()
            want = torch.zeros(6, 2); want[0] = 1; want[1] = 1; want[4] = 2
            assert torch.equal(out, want), out
            hvd.shutdown()
            print("ZENTEST ok", r)
            """))
    zenrun = os.path.join(venv, "bin", "zenrun")
    proc = subprocess.run([zenrun, "-np", "2", os.path.join(venv, "bin", "python"), script],
                          capture_output=True, text=True, timeout=180,
                          cwd=os.path.join(work, "cwd"),
                          env=environment(ZEN_TIMEOUT="30", ZEN_THREADS="1",
                                          ZEN_STALL_CHECK_TIME_SECONDS="5",
                                          ZEN_STALL_SHUTDOWN_TIME_SECONDS="20"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "ZENTEST ok 0" in out and "ZENTEST ok 1" in out, out


@pytest.mark.skipif(not HAVE_TORCH, reason="/usr/bin/python3 has no torch (tools/setup)")
def test_tensorflow_required_but_missing(installs, work):
    install, _ = installs["tf-missing"]
    rc, out = install.wait()
    assert rc != 0, out
    assert "ZENPY_WITH_TENSORFLOW=1 but" in out and "cannot import tensorflow" in out, out
    assert not os.path.exists(os.path.join(work, "never"))
