"""Local variables (model parallelism), as Horovod's: a rank's own variables, whose gradients
are not reduced, only divided by the set's size when scale_local_gradients (Horovod's
default, so that a local layer's step matches the averaged layers' scale). Shared by
DistributedGradientTape (register_local_source, PartialDistributedGradientTape) and
DistributedOptimizer (register_local_var, PartialDistributedOptimizer)."""

import keras
import tensorflow as tf

from zen.common.process_sets import set_size


class LocalVariables:
    def __init__(self, process_set, scale_local_gradients):
        self._process_set = process_set
        self._scale = scale_local_gradients
        self._keys = set()

    def register(self, var):
        self._keys.add(_key(var))

    def mask(self, variables):
        """Per variable: is it local."""
        return [_key(v) in self._keys for v in variables]

    def reduce(self, allreduce_grads, grads, variables):
        """allreduce_grads of the non-local grads; the local ones scaled, in place. Every rank
        has the same local variables, so the reduced ones keep matching names."""
        if not self._keys:
            return allreduce_grads(grads)
        local = self.mask(variables)
        reduced = iter(allreduce_grads([g for g, own in zip(grads, local) if not own]))
        scale = set_size(self._process_set) if self._scale else 1
        return [_scaled(g, scale) if own else next(reduced) for g, own in zip(grads, local)]


def layers_variables(local_layers):
    """The trainable variables of local_layers (a keras layer, a list of them, or None), as
    Horovod's Partial* take them."""
    if local_layers is None:
        return []
    if isinstance(local_layers, keras.layers.Layer):
        local_layers = [local_layers]
    elif not all(isinstance(layer, keras.layers.Layer) for layer in local_layers):
        raise ValueError("All local layers must be of keras.layers.Layer type.")
    return [var for layer in local_layers for var in layer.trainable_weights]


def _key(var):
    """A variable's identity: ref() of a tf.Variable or tensor; a Keras 3 variable, which
    has none, by the object (the layer holds it)."""
    return var.ref() if hasattr(var, "ref") else id(var)


def _scaled(grad, size):
    """grad divided by size (a local variable's gradient, as Horovod scales it)."""
    if grad is None or size == 1:
        return grad
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values / size, grad.indices, grad.dense_shape)
    return grad / size
