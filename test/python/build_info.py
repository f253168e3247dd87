"""What the ranks check zen's build and launch queries against (torch_checks.py, tf_checks.py,
tf_keras.py; Horovod's horovod.common.basics semantics): the build itself, as CMake passes it
to the tests (test/python/CMakeLists.txt), never the code under test: ZENTEST_WITH_MPI (1 or 0:
ZEN_WITH_MPI) and ZENTEST_NCCL_HEADER (the nccl.h the build compiled against, "" without
NCCL), whose NCCL_VERSION_CODE nccl_built() must return; under mpirun, Open MPI's own
ompi_info for mpi_threads_supported(). Standard library only."""

import os
import re
import shutil
import subprocess

from rank_report import expect_raises


def expected_nccl_version():
    """NCCL_VERSION_CODE of the build's nccl.h, 0 without NCCL; None when not told (a run
    outside CTest)."""
    header = os.environ.get("ZENTEST_NCCL_HEADER")
    if header is None:
        return None
    if not header:
        return 0
    with open(header) as f:
        m = re.search(r"^#define NCCL_VERSION_CODE (\d+)", f.read(), re.M)
    assert m, "no NCCL_VERSION_CODE in %s" % header
    return int(m.group(1))


def expected_mpi_threads():
    """Whether this Open MPI provides MPI_THREAD_MULTIPLE, as its ompi_info says (Zen asks for
    it at MPI_Init_thread); None without ompi_info (another MPI)."""
    if shutil.which("ompi_info") is None:
        return None
    out = subprocess.run(["ompi_info", "--parsable"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    m = re.search(r"^option:threads:.*MPI_THREAD_MULTIPLE: (yes|no)", out, re.M)
    assert m, "ompi_info --parsable names no MPI_THREAD_MULTIPLE support"
    return m.group(1) == "yes"


def check_build_info(hvd, homogeneous=True):
    """hvd's (zen.torch, zen.tensorflow or zen.tensorflow.keras) build and launch queries
    after init: every one is there and agrees with the build and this job."""
    nccl = expected_nccl_version()
    if nccl is not None:
        assert hvd.nccl_built() == nccl, (hvd.nccl_built(), nccl)
    assert isinstance(hvd.nccl_built(), int)
    assert hvd.cuda_built() == (hvd.nccl_built() != 0)  # CUDA tensors need NCCL here
    with_mpi = os.environ.get("ZENTEST_WITH_MPI")
    if with_mpi is not None:
        assert hvd.mpi_built() is (with_mpi == "1"), (hvd.mpi_built(), with_mpi)
    assert hvd.is_homogeneous() is homogeneous
    assert hvd.mpi_enabled() is ("OMPI_COMM_WORLD_RANK" in os.environ)
    if hvd.mpi_enabled():
        assert isinstance(hvd.mpi_threads_supported(), bool)
        threads = expected_mpi_threads()
        if threads is not None:
            assert hvd.mpi_threads_supported() is threads, (hvd.mpi_threads_supported(), threads)
    else:  # as Horovod's: only under MPI
        expect_raises(ValueError, hvd.mpi_threads_supported, "MPI is not enabled")
    assert hvd.gloo_enabled() is False and hvd.gloo_built() is False
    assert hvd.ddl_built() is False and hvd.ccl_built() is False and hvd.rocm_built() is False
    assert hvd.sycl_built() is False  # Horovod's TF2 examples ask it (Intel GPUs)
