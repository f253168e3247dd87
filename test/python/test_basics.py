"""zen.common.basics' loading of libzen.so: a library older than the Python package (a
checkout's bindings/python/zen/lib copy left from an earlier tools/build-python) is refused
with an ImportError naming the path and what to rebuild; this build's library loads.

Each case copies the package's sources (bindings/python/zen) to a temporary directory with the
library under test as zen/lib/libzen.so, and imports it in a fresh interpreter.
CTest: python_basics (ZENTEST_LIBZEN: this build's libzen.so).
"""

import os
import shutil
import subprocess
import sys

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings",
                       "python", "zen")
LOAD = "import zen.common.basics as b; b.lib(); print(b.version())"


def load_with(tmp_path, library):
    shutil.copytree(PACKAGE, tmp_path / "zen",
                    ignore=shutil.ignore_patterns("lib", "*.so", "__pycache__"))
    (tmp_path / "zen" / "lib").mkdir()
    shutil.copy(library, tmp_path / "zen" / "lib" / "libzen.so")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    return subprocess.run([sys.executable, "-c", LOAD], env=env, capture_output=True, text=True,
                          timeout=60)


def test_an_older_library_is_refused_naming_what_to_rebuild(tmp_path):
    # Any shared library without the zen_* calls stands in for one built before they existed:
    # an extension module of this interpreter's.
    import _ctypes
    path = _ctypes.__file__
    result = load_with(tmp_path, path)
    assert result.returncode != 0
    assert "ImportError" in result.stderr, result.stderr
    assert str(tmp_path / "zen" / "lib" / "libzen.so") in result.stderr
    assert "older than this zen package" in result.stderr
    assert "zen_init" in result.stderr and "tools/build-python" in result.stderr


def test_this_builds_library_loads(tmp_path):
    library = os.environ.get("ZENTEST_LIBZEN")
    if not library:
        pytest.fail("ZENTEST_LIBZEN (this build's libzen.so) is not set; run through CTest")
    result = load_with(tmp_path, library)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), "zen.version() printed nothing"
