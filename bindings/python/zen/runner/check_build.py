"""zenrun --check-build: what this Zen can do, in horovodrun --check-build's layout.

The library's facts (its version, MPI, NCCL) come from libzen.so through zen.common.basics;
a framework counts as available when its binding imports in a fresh interpreter, this one
(so TensorFlow and PyTorch are never loaded into zenrun itself, and a binding whose
extension fails to load shows as missing, as in horovodrun)."""

import os
import subprocess
import sys

import zen

FRAMEWORKS = (("TensorFlow", "zen.tensorflow"), ("PyTorch", "zen.torch"))
IMPORT_TIMEOUT = 120  # seconds; TensorFlow's first import on a cold disk is slow


def _imports(module):
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(zen.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    try:
        r = subprocess.run([sys.executable, "-c", f"import {module}"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=IMPORT_TIMEOUT)
    except subprocess.TimeoutExpired:
        return False
    return r.returncode == 0


def _section(title, items):
    lines = [f"{title}:"]
    lines += [f"    [{'X' if ok else ' '}] {name}" for name, ok in items]
    return "\n".join(lines)


def report():
    """The check-build text, or raises ImportError when libzen.so cannot be loaded."""
    from zen.common import basics

    mpi = basics.mpi_built()
    nccl = basics.nccl_built()
    nccl_name = "NCCL" if not nccl else f"NCCL ({nccl // 10000}.{nccl // 100 % 100}.{nccl % 100})"
    return "\n\n".join([
        f"Zen v{basics.version()}:",
        _section("Available Frameworks", [(n, _imports(m)) for n, m in FRAMEWORKS]),
        _section("Available Controllers", [("MPI", mpi), ("TCP", True)]),
        _section("Available Tensor Operations", [(nccl_name, nccl), ("MPI", mpi), ("TCP", True)]),
    ]) + f"\n\n(frameworks checked with {sys.executable})"


def main():
    try:
        text = report()
    except (ImportError, OSError, AttributeError) as e:  # missing, unloadable, older than zen
        print(f"zenrun: --check-build: libzen could not be loaded: {e}", file=sys.stderr)
        return 1
    print(text)
    return 0
