"""zen.tensorflow: horovod.tensorflow's API over Zen's daemon.

    import zen.tensorflow as hvd          # instead of: import horovod.tensorflow as hvd
    hvd.init()
    with tf.GradientTape() as tape:
        loss = ...                        # an embedding's gradient is tf.IndexedSlices
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)   # averaged over all ranks
    opt.apply_gradients(zip(grads, model.trainable_variables))
    hvd.broadcast_variables(model.variables, root_rank=0)    # after the first step

Keras: opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)). Launch with tools/zenrun
(TCP) or mpirun. tf.IndexedSlices gradients go through Zen's sparse allreduce (the scheme
ZEN_SCHEME picks) and come back as tf.IndexedSlices. Zen reduces dense tensors with Average,
Sum, Min, Max, Product and Adasum (allreduce of host floating-point tensors on a power-of-two
number of ranks; DistributedOptimizer(op=Adasum) is Horovod's Adasum optimizer, which combines
the ranks' variable deltas: adasum_optimizer.py), sparse ones with Average and Sum. Process
sets as Horovod's (zen.common.process_sets): init(process_sets=...), add_process_set,
remove_process_set, and process_set= on the collectives, DistributedGradientTape and
DistributedOptimizer; rank numbers in a set's collectives are ranks within the set.
SyncBatchNormalization: keras.layers.BatchNormalization with the training-mode moments over
the global batch (sync_batch_norm.py). broadcast_object, broadcast_object_fn and
allgather_object as Horovod's (eagerly, or in a TensorFlow 1 session). TensorFlow 1 graphs
(tf.compat.v1): broadcast_global_variables, BroadcastGlobalVariablesHook and
DistributedOptimizer of a tf.compat.v1.train optimizer (graph_mode.py, with
backward_passes_per_step and op=Adasum; broadcast_global_variables refuses eager execution, as
Horovod's).
PartialDistributedGradientTape and register_local_source (and the Keras optimizer's
register_local_var, PartialDistributedOptimizer): local layers keep their own gradients
(model parallelism). rank_op, local_rank_op, size_op, local_size_op and
process_set_included_op: the placement as int32 ops read when they run (in tf.function too).
The build and launch queries (is_homogeneous, mpi_built, nccl_built, cuda_built, ...) are
zen.common.basics', shared with zen.torch. Elastic training as Horovod's
(zen.tensorflow.elastic: TensorFlowKerasState, TensorFlowState (in a TensorFlow 1 session
too), run).
"""

from zen.common import basics as _basics
from zen.tensorflow.compression import Compression
from zen.tensorflow.functions import (allgather_object, broadcast_, broadcast_object,
                                      broadcast_object_fn, broadcast_variables)
from zen.tensorflow.gradient_tape import DistributedGradientTape, PartialDistributedGradientTape
from zen.tensorflow.graph_mode import BroadcastGlobalVariablesHook, broadcast_global_variables
from zen.tensorflow.mpi_ops import (Adasum, Average, Max, Min, ProcessSet, Product, Sum,
                                    add_process_set, allgather, allreduce, alltoall, backend,
                                    barrier, broadcast, ccl_built, cross_rank, cross_size,
                                    cuda_built, ddl_built, gloo_built, gloo_enabled,
                                    global_process_set, grouped_allgather, grouped_allreduce,
                                    grouped_reducescatter, init, is_homogeneous, is_initialized,
                                    join, local_rank, local_rank_op, local_size, local_size_op,
                                    mpi_built, mpi_enabled, mpi_threads_supported, nccl_built,
                                    process_set_included_op, rank, rank_op, reducescatter,
                                    remove_process_set, rocm_built, shutdown, size, size_op,
                                    start_timeline, stats, stop_timeline, sycl_built)
from zen.tensorflow.optimizer import DistributedOptimizer
from zen.tensorflow.sync_batch_norm import SyncBatchNormalization
from zen.tensorflow import elastic  # noqa: E402 - after what it imports from zen.tensorflow

__all__ = [
    "Adasum", "Average", "BroadcastGlobalVariablesHook", "Compression", "DistributedGradientTape",
    "DistributedOptimizer", "Max", "Min", "PartialDistributedGradientTape", "ProcessSet",
    "Product", "Sum", "SyncBatchNormalization", "add_process_set", "allgather", "allgather_object",
    "allreduce", "alltoall", "backend", "barrier", "broadcast", "broadcast_",
    "broadcast_global_variables", "broadcast_object", "broadcast_object_fn", "broadcast_variables",
    "cross_rank", "cross_size", "elastic", "global_process_set", "grouped_allgather",
    "grouped_allreduce", "grouped_reducescatter", "init", "is_initialized", "join", "local_rank",
    "local_rank_op", "local_size", "local_size_op", "process_set_included_op", "rank", "rank_op",
    "reducescatter", "remove_process_set", "shutdown", "size", "size_op", "start_timeline",
    "stats", "stop_timeline",
] + list(_basics.BUILD_INFO)
