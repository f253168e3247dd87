"""SyncBatchNormalization, as horovod.tensorflow's: a keras.layers.BatchNormalization whose
training-mode moments are those of the global batch, every rank's inputs together (of
process_set's ranks). Only _moments changes (masks weigh the samples as the base layer's
do); the moving statistics, gamma, beta and the float16 upcast are the base layer's. Its
backward is autograd's through allreduce(op=Sum), whose gradient is the allreduce of the
gradient: each rank gets its inputs' gradient of the ranks' summed loss and its own rows'
share of gamma's and beta's, so DistributedOptimizer's average of the ranks' gradients is
the global batch's (mean losses over equal batches).

Two allreduces per training call: (count, sum) per channel, then the sum of squared
deviations from the global mean. Horovod's single allreduce of the ranks' means and means of
squares weighs every rank alike (right for equal batches only) and gives the variance as
E[x^2] - E[x]^2, which cancels catastrophically when the mean is large against the spread
(float32, mean 1e3 and std 1: an error of several percent). This is the base layer's own
two-pass computation over the global batch, exact for uneven batches, for one more round
trip of a few floats per channel.
"""

import keras
import tensorflow as tf

from zen.common import process_sets
from zen.common.basics import Sum
from zen.tensorflow.mpi_ops import allreduce


@keras.saving.register_keras_serializable(package="zen")
class SyncBatchNormalization(keras.layers.BatchNormalization):
    """keras.layers.BatchNormalization with the batch statistics over all ranks in training
    (of process_set's ranks; only its members call the layer in training). With one rank, in
    inference (training=False) and with trainable=False it is the base layer and
    communicates nothing. Every rank calls the layer equally often in the same order; its
    collectives are named after the layer (Keras gives the same names when every rank builds
    the same model), so give the layers names when ranks build them differently.

    fused: Horovod's argument, False only (Keras 3 has no fused kernel). A saved model loads
    with it (registered as zen>SyncBatchNormalization); process_set is not in get_config: a
    loaded layer synchronizes over all ranks."""

    def __init__(self, fused=False, process_set=process_sets.global_process_set, **kwargs):
        if fused in (True, None):
            raise ValueError("SyncBatchNormalization does not support fused=%r (Keras 3 has no "
                             "fused kernel): pass fused=False or leave it out" % (fused,))
        if kwargs.get("synchronized"):
            raise ValueError("SyncBatchNormalization synchronizes through zen; "
                             "synchronized=True (tf.distribute's) does not apply")
        super().__init__(**kwargs)
        self._zen_process_set = process_set
        self.supports_jit = False  # XLA cannot compile zen's collectives

    def _moments(self, inputs, mask):
        """(mean, variance) per channel of every member's inputs (mask: per sample, as the
        base layer's)."""
        ps = self._zen_process_set
        process_sets.process_set_id(ps, "SyncBatchNormalization '%s'" % self.name)
        if process_sets.set_size(ps) == 1:
            return super()._moments(inputs, mask)
        axes = self._reduction_axes
        if mask is None:
            keep = None
            channels = tf.shape(inputs, out_type=tf.int64)[self.axis]
            per_channel = tf.size(inputs, out_type=tf.int64) // channels
            count = tf.fill([channels], tf.cast(per_channel, inputs.dtype))
        else:
            # The base layer's weights: mask covers every axis but the last.
            keep = tf.broadcast_to(tf.expand_dims(tf.cast(mask, tf.bool), -1), tf.shape(inputs))
            count = tf.reduce_sum(tf.cast(keep, inputs.dtype), axes)
        local_sum = tf.reduce_sum(_kept(inputs, keep), axes)
        total = allreduce(tf.stack([count, local_sum]), op=Sum, process_set=ps,
                          name=self._collective_name("sums"))
        count, mean = total[0], total[1] / _divisor(total[0], mask)
        # As tf.nn.moments: the mean's own gradient through the deviations is zero.
        deviations = _kept(inputs - tf.stop_gradient(_along_axis(mean, inputs, self.axis)), keep)
        squares = allreduce(tf.reduce_sum(tf.square(deviations), axes), op=Sum, process_set=ps,
                            name=self._collective_name("squares"))
        return mean, squares / _divisor(count, mask)

    def _collective_name(self, what):
        """Stable per layer, so the daemon's response cache hits from the second step on; in
        a graph made unique by it, so that a layer called twice in one tf.function posts two
        names."""
        name = "syncbn.%s.%s" % (self.name, what)
        if tf.executing_eagerly():
            return name
        return tf.compat.v1.get_default_graph().unique_name(name)


def _kept(x, keep):
    return x if keep is None else tf.where(keep, x, tf.zeros_like(x))


def _divisor(count, mask):
    """The base layer's: the count, plus Keras' epsilon where a mask weighs the inputs."""
    return count if mask is None else count + keras.backend.epsilon()


def _along_axis(stat, inputs, axis):
    """A per-channel statistic shaped to broadcast against inputs (channels on axis)."""
    shape = [1] * inputs.shape.rank
    shape[axis] = -1
    return tf.reshape(stat, shape)
