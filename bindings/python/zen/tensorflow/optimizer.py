"""DistributedOptimizer for Keras 3 optimizers, as horovod.tensorflow.keras's: a dynamic
subclass of the optimizer's class whose apply() (which apply_gradients and Model.fit call)
averages the gradients over all ranks first."""

import keras

from zen.common.basics import Average
from zen.tensorflow.compression import Compression
from zen.tensorflow.gradients import make_allreduce_grads_fn


class _DistributedOptimizer:
    """Methods copied into the dynamic subclass."""

    def apply(self, grads, trainable_variables=None):
        grads = self._zen_allreduce_grads(list(grads))
        return super(self.__class__, self).apply(grads, trainable_variables)


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=None, scale_local_gradients=True):
    """A copy of the Keras optimizer (same class, same config) that averages (op=Average) or
    sums (op=Sum) the gradients over all ranks before applying them. tf.IndexedSlices
    gradients (embeddings) take Zen's sparse allreduce unless sparse_as_dense.
    groups/num_groups are accepted: the daemon fuses whatever reaches it in one cycle."""
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise ValueError("zen.tensorflow.DistributedOptimizer wraps a Keras optimizer "
                         "(keras.optimizers.*), not %s" % type(optimizer).__name__)
    if process_set is not None:
        raise NotImplementedError("zen has no process sets other than the global one")
    if backward_passes_per_step != 1:
        raise NotImplementedError("backward_passes_per_step > 1: use the Keras optimizer's "
                                  "gradient_accumulation_steps")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    distributed = cls.from_config(optimizer.get_config())
    distributed._zen_allreduce_grads = make_allreduce_grads_fn(
        "DistributedOptimizer.%s" % (name or optimizer.name), op, compression, sparse_as_dense,
        gradient_predivide_factor)
    return distributed
