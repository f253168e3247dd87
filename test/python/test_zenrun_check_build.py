"""zenrun --check-build (horovodrun's -cb): the frameworks, controllers and tensor operations
it prints must be the build's, as CMake passes them to the tests (build_info.py: ZEN_WITH_MPI,
the nccl.h compiled against), and the frameworks those whose binding really imports with the
interpreter zenrun runs under. The package checked is the staged one (ZENTEST_PYTHONPATH)
that the framework tests use, built by the python_torch_build and python_tf_build fixtures."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from build_info import expected_nccl_version
from rank_jobs import BINDINGS, TF_PYTHON, TORCH_PYTHON, require_zen_tensorflow, \
    require_zen_torch

require_zen_torch()
require_zen_tensorflow()

SECTIONS = ("Available Frameworks", "Available Controllers", "Available Tensor Operations")
ENTRY = re.compile(r"^    \[([X ])\] (\S+)")


def check_build(python, bindings=BINDINGS, flag="--check-build"):
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from zen.runner import main; "
            "sys.exit(main(sys.argv[2:]))")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEN_", "ZENRUN_"))}
    env.pop("PYTHONPATH", None)
    return subprocess.run([python, "-c", code, bindings, flag], capture_output=True, text=True,
                          timeout=300, env=env)


def parse(stdout):
    """{section: {name: bool}} and the header line."""
    lines = stdout.splitlines()
    sections, current = {}, None
    for line in lines[1:]:
        if line.endswith(":") and line[:-1] in SECTIONS:
            current = sections.setdefault(line[:-1], {})
        elif current is not None and ENTRY.match(line):
            mark, name = ENTRY.match(line).groups()
            current[name] = mark == "X"
    return lines[0], sections


def imports(python, module):
    return subprocess.run([python, "-c", "import " + module], capture_output=True,
                          timeout=300).returncode == 0


def version_of_package():
    with open(os.path.join(BINDINGS, "zen", "__init__.py")) as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


@pytest.mark.parametrize("python", [TORCH_PYTHON, TF_PYTHON], ids=["system", "tf-venv"])
def test_reports_what_was_built_and_what_imports(python):
    r = check_build(python)
    assert r.returncode == 0, r.stderr
    header, sections = parse(r.stdout)
    assert header == "Zen v%s:" % version_of_package()
    assert list(sections) == list(SECTIONS), r.stdout
    frameworks = sections["Available Frameworks"]
    if python == TORCH_PYTHON:  # Debian's torch, zen.torch built for it by the fixture
        assert frameworks["PyTorch"] is True
        assert frameworks["TensorFlow"] is imports(python, "tensorflow")
    else:  # the venv's TensorFlow, zen.tensorflow built for it by the fixture
        assert frameworks["TensorFlow"] is True
        if not imports(python, "torch"):
            assert frameworks["PyTorch"] is False
    with_mpi = os.environ.get("ZENTEST_WITH_MPI")
    nccl = expected_nccl_version()
    controllers = sections["Available Controllers"]
    operations = sections["Available Tensor Operations"]
    assert controllers["TCP"] is True and operations["TCP"] is True
    if with_mpi is not None:
        assert controllers["MPI"] is (with_mpi == "1") and operations["MPI"] is (with_mpi == "1")
    if nccl is not None:
        assert operations["NCCL"] is (nccl != 0)
        if nccl:
            assert "NCCL (%d.%d.%d)" % (nccl // 10000, nccl // 100 % 100, nccl % 100) in r.stdout
    assert "(frameworks checked with " in r.stdout


def test_short_flag_needs_no_command():
    r = check_build(TORCH_PYTHON, flag="-cb")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Zen v")


def test_a_missing_library_is_an_error(tmp_path):
    bare = tmp_path / "python"
    shutil.copytree(os.path.join(BINDINGS, "zen"), bare / "zen",
                    ignore=shutil.ignore_patterns("libzen.so", "*.so"))
    r = check_build(sys.executable, bindings=str(bare))
    assert r.returncode == 1
    assert "zenrun: --check-build: libzen could not be loaded" in r.stderr
    assert "libzen.so" in r.stderr
    assert r.stdout == ""
