"""DistributedGradientTape, as horovod.tensorflow.DistributedGradientTape."""

import tensorflow as tf

from zen.common.basics import Average
from zen.common.process_sets import global_process_set
from zen.tensorflow.compression import Compression
from zen.tensorflow.gradients import make_allreduce_grads_fn


class _DistributedGradientTape(tf.GradientTape):
    def __init__(self, tape, compression, sparse_as_dense, op, gradient_predivide_factor,
                 process_set, persistent=False, watch_accessed_variables=True):
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

    def gradient(self, target, sources, output_gradients=None, **kwargs):
        grads = super(self.__class__, self).gradient(target, sources, output_gradients,
                                                     **kwargs)
        return tf.nest.pack_sequence_as(grads, self._allreduce_grads(tf.nest.flatten(grads)))

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
                   process_set, gradtape._persistent, gradtape._watch_accessed_variables)
    return cls(gradtape, compression, sparse_as_dense, op, gradient_predivide_factor,
               process_set, gradtape._persistent)
