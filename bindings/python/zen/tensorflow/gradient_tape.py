"""DistributedGradientTape and PartialDistributedGradientTape, as horovod.tensorflow's.

Local sources (register_local_source, or PartialDistributedGradientTape's local_layers) are a
rank's own variables (model parallelism): local_gradients.py."""

import tensorflow as tf

from zen.common.basics import Average
from zen.common.process_sets import global_process_set
from zen.tensorflow.compression import Compression
from zen.tensorflow.gradients import make_allreduce_grads_fn
from zen.tensorflow.local_gradients import LocalVariables, layers_variables


class _DistributedGradientTape(tf.GradientTape):
    def __init__(self, tape, compression, sparse_as_dense, op, gradient_predivide_factor,
                 process_set, scale_local_gradients, persistent=False,
                 watch_accessed_variables=True):
        if hasattr(tape, "_watch_accessed_variables"):
            super(self.__class__, self).__init__(persistent, watch_accessed_variables)
        else:
            super(self.__class__, self).__init__(persistent)
        self._tape = tape._tape
        self._persistent = tape._persistent
        self._recording = tape._recording
        self._watched_variables = tape._watched_variables
        self._allreduce_grads = make_allreduce_grads_fn(
            "DistributedGradientTape", op, compression, sparse_as_dense,
            gradient_predivide_factor, process_set)
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self._local_sources = LocalVariables(process_set, scale_local_gradients)

    def register_local_source(self, source):
        """Marks a variable as this rank's own: its gradient is not reduced."""
        self._local_sources.register(source)

    def gradient(self, target, sources, output_gradients=None, **kwargs):
        grads = super(self.__class__, self).gradient(target, sources, output_gradients,
                                                     **kwargs)
        out = self._local_sources.reduce(self._allreduce_grads, tf.nest.flatten(grads),
                                         tf.nest.flatten(sources))
        return tf.nest.pack_sequence_as(grads, out)


def DistributedGradientTape(gradtape, device_dense="", device_sparse="",
                            compression=Compression.none, sparse_as_dense=False, op=Average,
                            gradient_predivide_factor=1.0, num_groups=0, groups=None,
                            process_set=global_process_set, scale_local_gradients=True):
    """A tape whose gradient() returns gradients averaged (op=Average) or summed (op=Sum)
    over all ranks (over process_set's ranks; a rank outside it gets its own gradients).
    tf.IndexedSlices gradients (embeddings) take Zen's sparse allreduce and stay
    tf.IndexedSlices unless sparse_as_dense. groups/num_groups are accepted: the daemon fuses
    whatever reaches it in the same cycle."""
    cls = type(gradtape.__class__.__name__, (gradtape.__class__,),
               dict(_DistributedGradientTape.__dict__))
    if hasattr(gradtape, "_watch_accessed_variables"):
        return cls(gradtape, compression, sparse_as_dense, op, gradient_predivide_factor,
                   process_set, scale_local_gradients, gradtape._persistent,
                   gradtape._watch_accessed_variables)
    return cls(gradtape, compression, sparse_as_dense, op, gradient_predivide_factor,
               process_set, scale_local_gradients, gradtape._persistent)


def PartialDistributedGradientTape(gradtape, device_dense="", device_sparse="",
                                   compression=Compression.none, sparse_as_dense=False,
                                   op=Average, gradient_predivide_factor=1.0, num_groups=0,
                                   groups=None, process_set=global_process_set,
                                   local_layers=None, scale_local_gradients=True):
    """DistributedGradientTape whose local_layers' (keras layers: a layer or a list) trainable
    variables keep this rank's own gradients, divided by the set's size when
    scale_local_gradients (Horovod's default), never reduced."""
    local = layers_variables(local_layers)
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression,
                                   sparse_as_dense, op, gradient_predivide_factor, num_groups,
                                   groups, process_set, scale_local_gradients)
    for var in local:
        tape.register_local_source(var)
    return tape
