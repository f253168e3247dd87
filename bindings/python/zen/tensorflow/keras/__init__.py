"""zen.tensorflow.keras: horovod.tensorflow.keras's API (Keras 3) over Zen's daemon.

    import zen.tensorflow.keras as hvd    # instead of: import horovod.tensorflow.keras as hvd
    hvd.init()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1 * hvd.size())),
                  loss=...)
    model.fit(x, y, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                               hvd.callbacks.MetricAverageCallback(),
                               hvd.callbacks.LearningRateWarmupCallback(0.1 * hvd.size())])

allreduce, allgather and broadcast take any tensor-like value (numpy, lists) and return a
tensor, as Horovod's Keras versions do eagerly. Not here: broadcast_global_variables (TF1
sessions; Horovod's raises under eager execution too), reducescatter. Elastic training:
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
                               nccl_built, rocm_built)
from zen.tensorflow import (Adasum, Average, Compression, DistributedOptimizer, Max, Min,
                            ProcessSet, Product, Sum, SyncBatchNormalization, add_process_set,
                            broadcast_variables, cross_rank, cross_size, global_process_set,
                            init, is_initialized, local_rank, local_size, rank,
                            remove_process_set, shutdown, size, start_timeline, stop_timeline)
from zen.tensorflow import allgather as _allgather
from zen.tensorflow import allreduce as _allreduce
from zen.tensorflow import broadcast as _broadcast
from zen.tensorflow.keras import callbacks, elastic

__all__ = [
    "Adasum", "Average", "Compression", "DistributedOptimizer", "Max", "Min", "ProcessSet",
    "Product", "Sum", "SyncBatchNormalization", "add_process_set", "allgather", "allreduce",
    "broadcast", "broadcast_variables", "callbacks", "cross_rank", "cross_size", "elastic",
    "global_process_set", "init", "is_initialized", "load_model", "local_rank", "local_size",
    "rank", "remove_process_set", "shutdown", "size", "start_timeline", "stop_timeline",
] + list(_basics.BUILD_INFO)


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
