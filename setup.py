"""Installs the Python package `zen` (zen.runner, zen.timeline, zen.common) with libzen.so and
the bindings of whichever frameworks this Python can import, as `pip install horovod` does
(README, "PyTorch" and "TensorFlow"):

    /usr/bin/python3 -m venv --system-site-packages .venv      # sees Debian's python3-torch
    .venv/bin/pip install --no-build-isolation .                # zen.torch
    .venv-tf/bin/pip install --no-build-isolation .             # zen.tensorflow

- zen.torch: the C++ extension bindings/torch/zen_torch.cc (torch.utils.cpp_extension), when
  torch is importable.
- zen.tensorflow: the op library bindings/tensorflow/*.cc, compiled with tf.sysconfig's flags
  into zen/tensorflow/_zen_tf_ops.so, when tensorflow is importable.

ZENPY_WITH_TORCH / ZENPY_WITH_TENSORFLOW: 1 requires the framework (fails when it is
missing), 0 skips it; unset, it is built when found. (ZENPY_, not ZEN_: the library rejects
ZEN_* names it does not know.) libzen.so comes from CMake (target zen_shared; the Debian
packages of tools/setup), built into build-python/cmake (ZENPY_BUILD_DIR) with
ZENPY_BUILD_JOBS jobs, or is taken as it is from ZENPY_LIB. setuptools' work files go to
build-python/setuptools, or to ZENPY_BUILD_BASE. In a checkout, tools/build-python (torch)
and tools/build-tf (TensorFlow) build in place (setup.py build_ext --inplace), so that
PYTHONPATH=bindings/python finds zen.torch and zen.tensorflow, or with --into DIR a staged
copy of the package into DIR (setup.py build --build-lib DIR; the CTest fixtures).
"""

import concurrent.futures
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

from setuptools import Distribution, Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
PY_ROOT = os.path.join("bindings", "python")
TF_EXT = "zen.tensorflow._zen_tf_ops"  # zen/tensorflow/_zen_tf_ops.so, as zen.tensorflow loads it
TF_SOURCES = [os.path.join("bindings", "tensorflow", s)
              for s in ("zen_tf_ops.cc", "zen_tf_kernels.cc", "zen_tf_placement.cc")]
TF_HEADERS = [os.path.join("bindings", "c_api.h"),
              os.path.join("bindings", "tensorflow", "zen_tf_async.h")]


def _version():
    with open(os.path.join(ROOT, PY_ROOT, "zen", "__init__.py")) as f:
        return re.search(r'__version__ = "([^"]+)"', f.read()).group(1)


def _jobs():
    return max(1, int(os.environ.get("ZENPY_BUILD_JOBS") or os.cpu_count() or 1))


def _wanted(framework):
    """ZENPY_WITH_<framework>: True (required), False (skipped) or None (when found)."""
    name = "ZENPY_WITH_" + framework
    value = os.environ.get(name, "")
    if value not in ("", "0", "1"):
        sys.exit("setup.py: %s=%s: use 1 (required), 0 (skipped) or leave it unset (built "
                 "when found)" % (name, value))
    return None if value == "" else value == "1"


def _note(message):
    print("setup.py: " + message, file=sys.stderr, flush=True)


def _build_libzen():
    """Path of libzen.so: ZENPY_LIB, else a CMake build of target zen_shared."""
    given = os.environ.get("ZENPY_LIB")
    if given:
        if not os.path.isfile(given):
            sys.exit("setup.py: ZENPY_LIB=%s does not exist" % given)
        return given
    build = os.environ.get("ZENPY_BUILD_DIR", os.path.join(ROOT, "build-python", "cmake"))
    if not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build] + generator +
                              ["-DCMAKE_BUILD_TYPE=Release", "-DZEN_WITH_CUDA=OFF",
                               "-DZEN_BUILD_TESTS=OFF", "-DZEN_BUILD_BENCHMARKS=OFF"])
    subprocess.check_call(["cmake", "--build", build, "--target", "zen_shared",
                           "-j", str(_jobs())])
    return os.path.join(build, "bindings", "libzen.so")


def _install_file(src, dest):
    """Copies src to dest atomically (a process that has the old file loaded keeps it), and
    not at all when the bytes are the same."""
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if os.path.exists(dest):
        with open(src, "rb") as a, open(dest, "rb") as b:
            if a.read() == b.read():
                return dest
    tmp = "%s.tmp.%d" % (dest, os.getpid())
    shutil.copy2(src, tmp)
    os.replace(tmp, dest)
    return dest


def _tensorflow_flags(cache):
    """(version, compile flags, link flags) of the TensorFlow this Python imports, from one
    import in a child process (seconds; keeps TensorFlow's threads out of this one), or from
    cache (a JSON file) while the same tensorflow/__init__.py is found, unchanged, by the same
    Python; raises RuntimeError with the reason when TensorFlow cannot be imported."""
    spec = importlib.util.find_spec("tensorflow")
    origin = spec.origin if spec is not None and spec.origin else None
    key = [sys.executable, origin, os.path.getmtime(origin)] if origin else None
    try:
        with open(cache) as f:
            cached = json.load(f)
        if key is not None and cached["key"] == key:
            return tuple(cached["flags"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    code = ("import json, tensorflow as tf; print(json.dumps([tf.__version__, "
            "tf.sysconfig.get_compile_flags(), tf.sysconfig.get_link_flags()]))")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd="/")
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        raise RuntimeError(lines[-1] if lines else "exit status %d" % proc.returncode)
    version, cflags, ldflags = json.loads(proc.stdout.strip().splitlines()[-1])
    # TensorFlow's headers are not ours to warn about.
    cflags = ["-isystem" + f[2:] if f.startswith("-I") else f for f in cflags]
    if key is not None:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        tmp = "%s.tmp.%d" % (cache, os.getpid())
        with open(tmp, "w") as f:
            json.dump({"key": key, "flags": [version, cflags, ldflags]}, f)
        os.replace(tmp, cache)
    return version, cflags, ldflags


def build_tensorflow_ops(out, libzen_dir, objdir, flags, log=print):
    """Compiles bindings/tensorflow/*.cc with TensorFlow's flags into objdir and links them
    into out against libzen_dir/libzen.so (found at run time through $ORIGIN/../lib). Only
    what changed: an object is rebuilt when its source or a header is newer, all of them when
    the TensorFlow version or flags changed, and out is relinked when an object or libzen.so
    is newer. Each step writes a temporary file and renames it."""
    version, cflags, ldflags = flags
    cxx = os.environ.get("CXX", "g++")
    os.makedirs(objdir, exist_ok=True)
    stamp_path = os.path.join(objdir, "flags")
    stamp = "tensorflow %s: %s %s %s" % (version, cxx, " ".join(cflags), " ".join(ldflags))
    try:
        with open(stamp_path) as f:
            same = f.read().strip() == stamp
    except OSError:
        same = False
    if not same:
        for name in os.listdir(objdir):
            if name.endswith(".o"):
                os.remove(os.path.join(objdir, name))
        if os.path.exists(out):
            os.remove(out)
        with open(stamp_path, "w") as f:
            f.write(stamp + "\n")

    def mtime(path):
        return os.path.getmtime(path) if os.path.exists(path) else -1.0

    headers = [os.path.join(ROOT, h) for h in TF_HEADERS]
    jobs, objects = [], []
    for src in TF_SOURCES:
        src = os.path.join(ROOT, src)
        obj = os.path.join(objdir, os.path.basename(src)[:-3] + ".o")
        objects.append(obj)
        if any(mtime(dep) > mtime(obj) for dep in [src] + headers):
            jobs.append((src, obj))

    def compile_one(job):
        src, obj = job
        log("[zen] compiling %s" % os.path.relpath(src, ROOT))
        tmp = "%s.tmp.%d" % (obj, os.getpid())
        subprocess.check_call([cxx, "-O2", "-fPIC", "-Wall", "-Wextra"] + cflags +
                              ["-I" + ROOT, "-c", src, "-o", tmp])
        os.replace(tmp, obj)

    with concurrent.futures.ThreadPoolExecutor(min(_jobs(), max(1, len(jobs)))) as pool:
        list(pool.map(compile_one, jobs))  # raises the first failure

    libzen = os.path.join(libzen_dir, "libzen.so")
    if any(mtime(dep) > mtime(out) for dep in objects + [libzen]):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        tmp = "%s.tmp.%d" % (out, os.getpid())
        subprocess.check_call([cxx, "-shared", "-o", tmp] + objects +
                              ["-L" + libzen_dir, "-lzen"] + ldflags +
                              ["-Wl,-rpath,$ORIGIN/../lib", "-Wl,--no-undefined"])
        os.replace(tmp, out)
        log("[zen] linked %s" % out)
    return out


class ZenDistribution(Distribution):
    def has_ext_modules(self):
        return True  # libzen.so: a platform wheel, and build_ext runs, even with no framework


def _frameworks():
    """The extensions to build and the build_ext class (torch's BuildExtension when zen.torch
    is built, so that it gets torch's flags)."""
    with_torch, with_tf = _wanted("TORCH"), _wanted("TENSORFLOW")
    extensions = []
    # TensorFlow first: a cheap look (its import takes seconds; build_ext imports it).
    if with_tf is not False:
        if importlib.util.find_spec("tensorflow") is not None:
            extensions.append(Extension(TF_EXT, sources=list(TF_SOURCES),
                                        depends=list(TF_HEADERS)))
        elif with_tf:
            sys.exit("setup.py: ZENPY_WITH_TENSORFLOW=1 but %s cannot import tensorflow; "
                     "install TensorFlow into this environment (tools/setup makes .venv-tf) "
                     "or unset ZENPY_WITH_TENSORFLOW" % sys.executable)
        else:
            _note("no tensorflow in %s: zen.tensorflow is not built" % sys.executable)
    base = build_ext
    if with_torch is not False:
        try:
            from torch.utils.cpp_extension import BuildExtension, CppExtension
        except ImportError as e:
            if with_torch:
                sys.exit("setup.py: ZENPY_WITH_TORCH=1 but %s cannot import torch (%s); use "
                         "/usr/bin/python3 (Debian's python3-torch, tools/setup) or a venv "
                         "made with --system-site-packages, or unset ZENPY_WITH_TORCH"
                         % (sys.executable, e))
            _note("no torch in %s: zen.torch is not built" % sys.executable)
        else:
            base = BuildExtension.with_options(no_python_abi_suffix=False)
            extensions.append(CppExtension(
                name="zen.torch._zen_torch",
                sources=[os.path.join("bindings", "torch", "zen_torch.cc")],
                include_dirs=[ROOT],
                libraries=["zen"],
                # zen/torch/_zen_torch*.so finds zen/lib/libzen.so (zen.torch also preloads it).
                extra_link_args=["-Wl,-rpath,$ORIGIN/../lib"],
                extra_compile_args=["-O2"],
                depends=[os.path.join("bindings", "c_api.h")],
            ))

    class BuildZen(base):
        """Builds (or takes) libzen.so and puts it into zen/lib, then the extensions: torch's
        through torch.utils.cpp_extension, TensorFlow's op library with tf.sysconfig's flags
        (build_tensorflow_ops). In place, each file is replaced atomically and only when it
        changed: other processes may be running the checkout's copies."""

        def run(self):
            lib = _build_libzen()
            self._zen_lib_dir = os.path.join(
                os.path.join(ROOT, PY_ROOT) if self.inplace else self.build_lib, "zen", "lib")
            _install_file(lib, os.path.join(self._zen_lib_dir, "libzen.so"))
            for ext in self.extensions:
                if ext.name == TF_EXT:
                    try:
                        self._zen_tf_flags = _tensorflow_flags(
                            os.path.join(self.build_temp, "tensorflow", "tensorflow.json"))
                    except RuntimeError as e:
                        if with_tf:
                            sys.exit("setup.py: ZENPY_WITH_TENSORFLOW=1 but %s cannot import "
                                     "tensorflow: %s" % (sys.executable, e))
                        _note("tensorflow does not import in %s (%s): zen.tensorflow is not "
                              "built" % (sys.executable, e))
                        self.extensions = [x for x in self.extensions if x is not ext]
                        break
            for ext in self.extensions:
                ext.library_dirs = [os.path.dirname(os.path.abspath(lib))]
            super().run()

        def get_ext_filename(self, ext_name):
            # Loaded by tf.load_op_library, not imported: no ABI suffix. (distutils passes the
            # last component of the name, setuptools the whole name.)
            if ext_name in (TF_EXT, TF_EXT.rpartition(".")[2]):
                return os.path.join(*ext_name.split(".")) + ".so"
            return super().get_ext_filename(ext_name)

        def build_extension(self, ext):
            if ext.name != TF_EXT:
                return super().build_extension(ext)
            build_tensorflow_ops(self.get_ext_fullpath(ext.name), self._zen_lib_dir,
                                 os.path.join(self.build_temp, "tensorflow"),
                                 self._zen_tf_flags)

        def copy_extensions_to_source(self):
            build_py = self.get_finalized_command("build_py")
            for ext in self.extensions:
                inplace, regular = self._get_inplace_equivalent(build_py, ext)
                _install_file(regular, inplace)

    return extensions, {"build_ext": BuildZen}


ext_modules, cmdclass = _frameworks()
build_base = os.environ.get("ZENPY_BUILD_BASE") or os.path.join("build-python", "setuptools")
options = {"build": {"build_base": build_base}}
if os.environ.get("ZENPY_BUILD_BASE"):
    # pip's metadata too, instead of bindings/python/zen.egg-info.
    os.makedirs(build_base, exist_ok=True)
    options["egg_info"] = {"egg_base": build_base}

setup(
    name="zen",
    version=_version(),
    description="Zen: sparse-gradient synchronization for distributed training "
                "(horovod.torch- and horovod.tensorflow-compatible bindings)",
    package_dir={"": PY_ROOT},
    packages=find_packages(PY_ROOT),
    distclass=ZenDistribution,
    ext_modules=ext_modules,
    cmdclass=cmdclass,
    entry_points={"console_scripts": ["zenrun = zen.runner:main",
                                      "zen-timeline = zen.timeline:main"]},
    python_requires=">=3.9",
    zip_safe=False,
    # setuptools' work files in build-python/ (or ZENPY_BUILD_BASE), not build/ (tools/build's
    # CMake tree).
    options=options,
)
