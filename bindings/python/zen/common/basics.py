"""libzen.so's process-level calls (bindings/c_api.h) through ctypes, for any framework.

Loaded RTLD_GLOBAL on first use, as zen.torch does: an MPI that libzen pulls in must be
visible to its own plugins, and every binding in the process shares this one library (one
runtime per process). Errors raise ValueError (a refused call: not initialized, bad
argument) or RuntimeError (zen_init failed), with the library's message.
"""

import ctypes
import json
import os
import threading
import warnings

from zen.common import elastic_rendezvous

# Reduce operations, numbered as Horovod's (horovod.common.basics). Zen reduces dense tensors
# with all of them (Adasum: dense allreduce of host floating-point tensors on a power-of-two
# number of ranks); sparse ones with Average and Sum only.
Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5
OP_NAMES = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max",
            Product: "Product"}
# The C API's zen_reduce_op_t.
C_OPS = {Sum: 0, Average: 1, Min: 2, Max: 3, Product: 4, Adasum: 5}
# The calls that take Adasum: dense allreduce (Horovod's rule; the daemon refuses the rest).
ADASUM_CALLS = ("allreduce",)

LIB_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib",
                        "libzen.so")

_lib = None
_lock = threading.Lock()
_atexit_registered = False


def lib():
    """The loaded libzen.so (ctypes.CDLL), loaded once."""
    global _lib
    with _lock:
        if _lib is None:
            if not os.path.exists(LIB_PATH):
                raise ImportError("zen: %s is missing; build it with tools/build-python, "
                                  "tools/build-tf or `pip install .`" % LIB_PATH)
            c = ctypes.CDLL(LIB_PATH, mode=ctypes.RTLD_GLOBAL)
            _check_symbols(c)
            for fn in ("zen_init", "zen_shutdown", "zen_is_initialized", "zen_rank", "zen_size",
                       "zen_local_rank", "zen_local_size", "zen_cross_rank", "zen_cross_size",
                       "zen_is_homogeneous", "zen_mpi_threads_supported", "zen_mpi_built",
                       "zen_nccl_built", "zen_cuda_built", "zen_stop_timeline"):
                getattr(c, fn).restype = ctypes.c_int
                getattr(c, fn).argtypes = []
            for fn in ("zen_backend", "zen_version", "zen_last_error"):
                getattr(c, fn).restype = ctypes.c_char_p
                getattr(c, fn).argtypes = []
            c.zen_start_timeline.restype = ctypes.c_int
            c.zen_start_timeline.argtypes = [ctypes.c_char_p, ctypes.c_int]
            c.zen_stats_json.restype = ctypes.c_int
            c.zen_stats_json.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
            c.zen_free.restype = None
            c.zen_free.argtypes = [ctypes.c_void_p]
            _lib = c
        return _lib


# Every C API call the Python package makes. A libzen.so built before one of them was added (a
# checkout's copy left from an older tools/build-python) fails here, naming what to rebuild,
# instead of with an AttributeError at the first call that needs it.
_SYMBOLS = ("zen_init", "zen_shutdown", "zen_is_initialized", "zen_rank", "zen_size",
            "zen_local_rank", "zen_local_size", "zen_cross_rank", "zen_cross_size",
            "zen_is_homogeneous", "zen_mpi_threads_supported", "zen_mpi_built", "zen_nccl_built",
            "zen_cuda_built", "zen_stop_timeline", "zen_backend", "zen_version",
            "zen_last_error", "zen_start_timeline", "zen_stats_json", "zen_free",
            "zen_add_process_set", "zen_remove_process_set", "zen_process_set_ranks")


def _check_symbols(c):
    missing = [fn for fn in _SYMBOLS if not hasattr(c, fn)]
    if missing:
        raise ImportError("zen: %s is older than this zen package (it lacks %s); rebuild it with "
                          "tools/build-python, tools/build-tf or `pip install .`" %
                          (LIB_PATH, ", ".join(missing)))


def last_error():
    return lib().zen_last_error().decode("utf-8", "replace")


def check_init_args(who, comm=None):
    """Refuses what Horovod's init(comm) takes and Zen has not; who: the calling function
    ("zen.torch.init")."""
    if comm is not None:
        raise NotImplementedError("%s: comm is not supported; launch with zenrun or mpirun" %
                                  who)


def init():
    """Starts this rank's daemon from the environment (zenrun: TCP; mpirun: MPI; otherwise a
    job of one); blocks until every rank has connected. Idempotent. Registers a shutdown at
    exit, as Horovod does. An elastic worker (zenrun --min-np ...) first joins the next round
    (zen.common.elastic_rendezvous), which sets its placement in the environment."""
    global _atexit_registered
    c = lib()
    if not c.zen_is_initialized() and elastic_rendezvous.enabled():
        elastic_rendezvous.join()
    if c.zen_init() != 0:  # ctypes releases the GIL during the call
        raise RuntimeError("zen init: " + last_error())
    with _lock:
        if not _atexit_registered:
            import atexit
            atexit.register(_shutdown_at_exit)
            _atexit_registered = True


def _shutdown_at_exit():
    if _lib is not None and _lib.zen_is_initialized():
        _lib.zen_shutdown()


def shutdown():
    """Stops the daemon on every rank. Returns the cause the job stopped with when another
    rank stopped it first, "" otherwise."""
    return "" if lib().zen_shutdown() == 0 else last_error()


def is_initialized():
    return bool(lib().zen_is_initialized())


def _placement(fn):
    value = fn()
    if value < 0:
        raise ValueError("zen has not been initialized; use hvd.init().")
    return value


def rank():
    return _placement(lib().zen_rank)


def size():
    return _placement(lib().zen_size)


def local_rank():
    return _placement(lib().zen_local_rank)


def local_size():
    return _placement(lib().zen_local_size)


def cross_rank():
    return _placement(lib().zen_cross_rank)


def cross_size():
    return _placement(lib().zen_cross_size)


def backend():
    """"tcp", "mpi" or "in-process"; "" before init."""
    return lib().zen_backend().decode()


# ---- build and launch facts, as horovod.common.basics (the same in every binding) ----

def is_homogeneous():
    """True when every host runs the same number of ranks; the same on every rank, settled
    once by init() (the ranks compare their local sizes while connecting). ValueError before
    init."""
    return bool(_placement(lib().zen_is_homogeneous))


def mpi_enabled():
    """True when this job runs over MPI (launched by mpirun); False before init."""
    return backend() == "mpi"


def mpi_threads_supported():
    """Whether MPI provided MPI_THREAD_MULTIPLE, so that other MPI users (mpi4py) may run
    beside Zen. As Horovod's: ValueError unless the job runs over MPI (before init too)."""
    if not mpi_enabled():
        raise ValueError("zen: MPI is not enabled: launch with mpirun (zenrun --mpi) to use it")
    return bool(_placement(lib().zen_mpi_threads_supported))


def mpi_built():
    """True when libzen has the MPI backend (CMake ZEN_WITH_MPI=ON)."""
    return bool(lib().zen_mpi_built())


def gloo_enabled():
    """False: Zen's TCP backend is its own, not Gloo."""
    return False


def gloo_built():
    return False


def nccl_built():
    """NCCL_VERSION_CODE of the NCCL libzen was built with (e.g. 22809 for 2.28.9), else 0,
    as Horovod's."""
    return int(lib().zen_nccl_built())


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    """Whether libzen takes CUDA tensors (a CUDA build with NCCL). Posting one to a build
    without CUDA raises ValueError ("built without CUDA")."""
    return bool(lib().zen_cuda_built())


def rocm_built():
    return False


def sycl_built():
    """Intel GPUs (Horovod's SYCL build; its TF2 examples ask it to name the device)."""
    return False


# What zen.torch, zen.tensorflow and zen.tensorflow.keras re-export from here.
BUILD_INFO = ("is_homogeneous", "mpi_enabled", "mpi_threads_supported", "mpi_built",
              "gloo_enabled", "gloo_built", "nccl_built", "ddl_built", "ccl_built",
              "cuda_built", "rocm_built", "sycl_built")


def version():
    return lib().zen_version().decode()


def stats():
    """This rank's daemon counters (zen_stats_json) as a dict; "config": the settings it
    started with (ZEN_* variables, their HOROVOD_* aliases, zenrun's flags)."""
    c = lib()
    out = ctypes.c_void_p()
    if c.zen_stats_json(ctypes.byref(out)) != 0:
        raise ValueError(last_error())
    try:
        return json.loads(ctypes.string_at(out.value).decode())
    finally:
        c.zen_free(out)


def start_timeline(file_path, mark_cycles=False):
    """Writes a Chrome trace per rank (".rank<N>" inserted into file_path) until
    stop_timeline()."""
    if lib().zen_start_timeline(str(file_path).encode(), 1 if mark_cycles else 0) != 0:
        raise ValueError(last_error())


def stop_timeline():
    if lib().zen_stop_timeline() != 0:
        raise ValueError(last_error())


def check_op(op, average=None, what="allreduce", warn_average=False):
    """Horovod's op/average arguments as one of Average, Sum, Adasum, Min, Max, Product;
    raises NotImplementedError for Adasum outside dense allreduce (what not in ADASUM_CALLS)
    and ValueError for what is no op at all.
    warn_average: a DeprecationWarning when average is given (as horovod.torch)."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if average is not None:
        if warn_average:
            warnings.warn("Parameter `average` has been replaced with `op` and will be removed",
                          DeprecationWarning)
        op = Average if average else Sum
    if op is None:
        op = Average
    if op == Adasum and what not in ADASUM_CALLS:
        raise NotImplementedError("%s: zen runs Adasum for dense allreduce only; use "
                                  "op=Average, Sum, Min, Max or Product" % what)
    if op not in C_OPS:
        raise ValueError("%s: unknown op %r (Average, Sum, Adasum, Min, Max or Product)" %
                         (what, op))
    return op
