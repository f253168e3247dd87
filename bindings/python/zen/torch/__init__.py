"""zen.torch: horovod.torch's API over Zen's daemon.

    import zen.torch as hvd          # instead of: import horovod.torch as hvd
    hvd.init()
    model = ...                      # nn.Embedding(sparse=True) gradients take Zen's path
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)

Launch with tools/zenrun (TCP) or mpirun. alltoall and reducescatter are Horovod's (host
tensors). Beyond Horovod: sparse_allreduce(_async) for
torch sparse COO tensors (allreduce of a sparse tensor takes the same path), and stats()
with the daemon's counters. Zen reduces dense tensors with Average, Sum, Min, Max, Product
and Adasum (allreduce of host floating-point tensors on a power-of-two number of ranks;
DistributedOptimizer(op=Adasum) combines the optimizer's parameter deltas, as Horovod's), sparse
ones with Average and Sum. Process sets as Horovod's (zen.common.process_sets):
init(process_sets=...), add_process_set, remove_process_set, and process_set= on the
collectives and DistributedOptimizer; rank numbers in a set's collectives (broadcast's root,
alltoall's splits) are ranks within the set. SyncBatchNorm (Horovod's, on CPU and CUDA
tensors; convert_sync_batchnorm as torch's) normalizes over the global batch of a process set.
"""

from zen.torch.compression import Compression
from zen.torch.functions import (allgather_object, broadcast_object,
                                 broadcast_optimizer_state, broadcast_parameters)
from zen.torch.mpi_ops import (Adasum, Average, HorovodInternalError, Max, Min, ProcessSet,
                               Product, Sum, ZenInternalError, add_process_set, allgather,
                               allgather_async, allreduce, allreduce_, allreduce_async,
                               allreduce_async_, alltoall, alltoall_async, barrier,
                               broadcast, broadcast_,
                               broadcast_async, broadcast_async_, ccl_built, cross_rank,
                               cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled,
                               global_process_set, grouped_allgather, grouped_allgather_async,
                               grouped_allreduce, grouped_allreduce_, grouped_allreduce_async,
                               grouped_allreduce_async_, grouped_reducescatter,
                               grouped_reducescatter_async, init, is_homogeneous, is_initialized,
                               join, local_rank, local_size, mpi_built, mpi_enabled,
                               mpi_threads_supported, nccl_built, poll, rank,
                               reducescatter, reducescatter_async, remove_process_set,
                               rocm_built, shutdown, size,
                               sparse_allreduce, sparse_allreduce_async, start_timeline,
                               stats, stop_timeline, sycl_built, synchronize)
from zen.torch.optimizer import DistributedOptimizer
from zen.torch.sync_batch_norm import SyncBatchNorm
from zen.torch import elastic  # noqa: E402 - after what it imports from zen.torch

__all__ = [
    "Adasum", "Average", "Compression", "DistributedOptimizer", "HorovodInternalError",
    "Max", "Min", "ProcessSet", "Product", "Sum", "ZenInternalError", "add_process_set",
    "allgather", "allgather_async", "allgather_object", "allreduce", "allreduce_",
    "allreduce_async", "allreduce_async_", "alltoall", "alltoall_async", "barrier",
    "broadcast", "broadcast_", "broadcast_async", "broadcast_async_", "broadcast_object",
    "broadcast_optimizer_state", "broadcast_parameters", "ccl_built", "cross_rank",
    "cross_size", "cuda_built", "ddl_built", "elastic", "gloo_built", "gloo_enabled",
    "global_process_set", "grouped_allgather", "grouped_allgather_async",
    "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async",
    "grouped_allreduce_async_", "grouped_reducescatter", "grouped_reducescatter_async",
    "init", "is_homogeneous", "is_initialized", "join",
    "local_rank", "local_size", "mpi_built", "mpi_enabled", "mpi_threads_supported",
    "nccl_built", "poll", "rank", "reducescatter", "reducescatter_async",
    "remove_process_set", "rocm_built", "shutdown", "size", "sparse_allreduce",
    "sparse_allreduce_async", "start_timeline", "stats", "stop_timeline", "sycl_built",
    "synchronize",
    "SyncBatchNorm",
]
