"""zen.tensorflow.keras: horovod.tensorflow.keras's API (Keras 3) over Zen's daemon.

    import zen.tensorflow.keras as hvd    # instead of: import horovod.tensorflow.keras as hvd
    hvd.init()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1 * hvd.size())),
                  loss=...)
    model.fit(x, y, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                               hvd.callbacks.MetricAverageCallback(),
                               hvd.callbacks.LearningRateWarmupCallback(0.1 * hvd.size())])

allreduce, allgather, broadcast and reducescatter take any tensor-like value (numpy, lists)
and return a tensor, as Horovod's Keras versions do eagerly. broadcast_global_variables is
TensorFlow 1's (graph mode, run in the default session): it raises under eager execution, as
Horovod's; Keras 3 itself has no TensorFlow 1 session. Model parallelism: the optimizer's
register_local_var(var) and PartialDistributedOptimizer(local_layers=...) leave those
variables' gradients on their rank (zen.tensorflow.local_gradients). Elastic training:
zen.tensorflow.keras.elastic (KerasState, CommitStateCallback, UpdateBatchStateCallback,
UpdateEpochStateCallback, run), as Horovod's. Process sets:
init(process_sets=...), add_process_set, remove_process_set, and
DistributedOptimizer(process_set=...) (zen.tensorflow's). SyncBatchNormalization is
zen.tensorflow's (horovod.tensorflow exports it).
"""

import keras
import tensorflow as tf

from zen.common import basics as _basics
from zen.common.basics import (ccl_built, cuda_built, ddl_built, gloo_built, gloo_enabled,
                               is_homogeneous, mpi_built, mpi_enabled, mpi_threads_supported,
                               nccl_built, rocm_built, sycl_built)
from zen.tensorflow import (Adasum, Average, Compression, Max, Min, ProcessSet, Product, Sum, SyncBatchNormalization, add_process_set,
                            broadcast_variables, cross_rank, cross_size, global_process_set,
                            init, is_initialized, local_rank, local_size, rank,
                            remove_process_set, shutdown, size, start_timeline, stop_timeline)
from zen.tensorflow import allgather as _allgather
from zen.tensorflow import allreduce as _allreduce
from zen.tensorflow import broadcast as _broadcast
from zen.tensorflow import broadcast_global_variables as _broadcast_global_variables
from zen.tensorflow import reducescatter as _reducescatter
from zen.tensorflow import optimizer as _optimizer
from zen.tensorflow.optimizer import PartialDistributedOptimizer
from zen.tensorflow.keras import callbacks, elastic

__all__ = [
    "Adasum", "Average", "Compression", "DistributedOptimizer", "Max", "Min",
    "PartialDistributedOptimizer", "ProcessSet", "Product", "Sum", "SyncBatchNormalization",
    "add_process_set", "allgather", "allreduce", "broadcast", "broadcast_global_variables",
    "broadcast_variables", "callbacks", "cross_rank", "cross_size", "elastic",
    "global_process_set", "init", "is_initialized", "load_model", "local_rank", "local_size",
    "rank", "reducescatter", "remove_process_set", "shutdown", "size", "start_timeline",
    "stop_timeline",
] + list(_basics.BUILD_INFO)


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """zen.tensorflow.DistributedOptimizer with horovod.tensorflow.keras's arguments, in
    its order (no use_locking; op after gradient_predivide_factor), so positional calls
    written for Horovod mean the same here."""
    return _optimizer.DistributedOptimizer(
        optimizer, name=name, device_dense=device_dense, device_sparse=device_sparse,
        compression=compression, sparse_as_dense=sparse_as_dense,
        backward_passes_per_step=backward_passes_per_step, op=op,
        gradient_predivide_factor=gradient_predivide_factor,
        average_aggregated_gradients=average_aggregated_gradients, num_groups=num_groups,
        groups=groups, process_set=process_set, scale_local_gradients=scale_local_gradients)


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0,
              op=None, compression=Compression.none):
    """The average (default) or op (Sum, Min, Max, Product) of value over all ranks."""
    return _allreduce(tf.constant(value), name=name, average=average, op=op,
                      prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                      compression=compression)


def allgather(value, name=None):
    """Every rank's value concatenated along the first dimension, in rank order."""
    return _allgather(tf.constant(value), name=name)


def broadcast(value, root_rank, name=None):
    """root_rank's value on every rank."""
    return _broadcast(tf.constant(value), root_rank, name=name)


def reducescatter(value, name=None, op=Average):
    """value (the same shape on every rank) reduced over all ranks (op: Average, the default,
    Sum, Min, Max or Product); this rank keeps its piece of the first dimension."""
    return _reducescatter(tf.constant(value), name=name, op=op)


def broadcast_global_variables(root_rank):
    """TensorFlow 1 (graph mode): runs zen.tensorflow.broadcast_global_variables(root_rank)
    in the default session, as Horovod's runs it in Keras' session. RuntimeError under eager
    execution (as Horovod's), and in graph mode without a default session: Keras 3 has none
    of its own."""
    op = _broadcast_global_variables(root_rank)
    session = tf.compat.v1.get_default_session()
    if session is None:
        raise RuntimeError("zen.tensorflow.keras.broadcast_global_variables() runs in the "
                           "default TensorFlow 1 session (Keras 3 has no session of its own): "
                           "call it under `with tf.compat.v1.Session() as sess:`, or use "
                           "callbacks.BroadcastGlobalVariablesCallback")
    return session.run(op)


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none):
    """keras.models.load_model with the model's optimizer wrapped in DistributedOptimizer,
    its state (iterations, slots) carried over, so training resumes where it stopped.
    custom_optimizers (optimizer classes) and custom_objects help Keras deserialize."""
    objects = {cls.__name__: cls for cls in custom_optimizers or ()}
    objects.update(custom_objects or {})
    model = keras.models.load_model(filepath, custom_objects=objects)
    plain = getattr(model, "optimizer", None)
    if plain is None:
        return model
    wrapped = DistributedOptimizer(plain, compression=compression)
    if plain.built:
        wrapped.build(model.trainable_variables)
        for mine, saved in zip(wrapped.variables, plain.variables):
            mine.assign(saved)
    model.optimizer = wrapped
    return model
