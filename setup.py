"""Installs the Python package `zen` (zen.torch, zen.runner, zen.timeline) with libzen.so and
zen.torch's C++ extension, built against the installed torch (README, "PyTorch"):

    /usr/bin/python3 -m venv --system-site-packages .venv      # sees Debian's python3-torch
    .venv/bin/pip install --no-build-isolation .

libzen.so comes from CMake (target zen_shared; the Debian packages of tools/setup), built
into build-python/cmake (ZENPY_BUILD_DIR), or is taken as it is from ZENPY_LIB. In a checkout,
tools/build-python builds both in place (setup.py build_ext --inplace), so that
PYTHONPATH=bindings/python finds zen.torch.
"""

import os
import re
import shutil
import subprocess
import sys

from setuptools import find_packages, setup

ROOT = os.path.dirname(os.path.abspath(__file__))
PY_ROOT = os.path.join("bindings", "python")


def _version():
    with open(os.path.join(ROOT, PY_ROOT, "zen", "__init__.py")) as f:
        return re.search(r'__version__ = "([^"]+)"', f.read()).group(1)


def _build_libzen():
    """Path of libzen.so: ZENPY_LIB, else a CMake build of target zen_shared."""
    given = os.environ.get("ZENPY_LIB")
    if given:
        if not os.path.isfile(given):
            sys.exit("setup.py: ZENPY_LIB=%s does not exist" % given)
        return given
    build = os.environ.get("ZENPY_BUILD_DIR", os.path.join(ROOT, "build-python", "cmake"))
    jobs = os.environ.get("ZENPY_BUILD_JOBS", str(os.cpu_count() or 1))
    if not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build] + generator +
                              ["-DCMAKE_BUILD_TYPE=Release", "-DZEN_WITH_CUDA=OFF",
                               "-DZEN_BUILD_TESTS=OFF", "-DZEN_BUILD_BENCHMARKS=OFF"])
    subprocess.check_call(["cmake", "--build", build, "--target", "zen_shared", "-j", jobs])
    return os.path.join(build, "bindings", "libzen.so")


def _install_file(src, dest_dir):
    """Copies src into dest_dir atomically (a process that has the old file loaded keeps it),
    and not at all when the bytes are the same."""
    os.makedirs(dest_dir, exist_ok=True)
    dest = os.path.join(dest_dir, os.path.basename(src))
    if os.path.exists(dest):
        with open(src, "rb") as a, open(dest, "rb") as b:
            if a.read() == b.read():
                return dest
    tmp = "%s.tmp.%d" % (dest, os.getpid())
    shutil.copy2(src, tmp)
    os.replace(tmp, dest)
    return dest


def _extensions_and_commands():
    from torch.utils.cpp_extension import BuildExtension, CppExtension

    class BuildZen(BuildExtension):
        """Builds (or takes) libzen.so, puts it into zen/lib, then the torch extension."""

        def run(self):
            lib = _build_libzen()
            if self.inplace:
                dest = os.path.join(ROOT, PY_ROOT, "zen", "lib")
            else:
                dest = os.path.join(self.build_lib, "zen", "lib")
            _install_file(lib, dest)
            for ext in self.extensions:
                ext.library_dirs = [os.path.dirname(os.path.abspath(lib))]
            super().run()

    ext = CppExtension(
        name="zen.torch._zen_torch",
        sources=[os.path.join("bindings", "torch", "zen_torch.cc")],
        include_dirs=[ROOT],
        libraries=["zen"],
        # zen/torch/_zen_torch*.so finds zen/lib/libzen.so (zen.torch also preloads it).
        extra_link_args=["-Wl,-rpath,$ORIGIN/../lib"],
        extra_compile_args=["-O2"],
        depends=[os.path.join("bindings", "c_api.h")],
    )
    return [ext], {"build_ext": BuildZen.with_options(no_python_abi_suffix=False)}


ext_modules, cmdclass = _extensions_and_commands()

setup(
    name="zen",
    version=_version(),
    description="Zen: sparse-gradient synchronization for distributed training "
                "(horovod.torch-compatible bindings)",
    package_dir={"": PY_ROOT},
    packages=find_packages(PY_ROOT),
    ext_modules=ext_modules,
    cmdclass=cmdclass,
    entry_points={"console_scripts": ["zenrun = zen.runner:main",
                                      "zen-timeline = zen.timeline:main"]},
    python_requires=">=3.9",
    zip_safe=False,
    # setuptools' work files in build-python/, not build/ (tools/build's CMake tree).
    options={"build": {"build_base": os.path.join("build-python", "setuptools")}},
)
