"""DistributedOptimizer(op=Adasum), as horovod.tensorflow's _DistributedAdasumOptimizer: the
ranks combine the wrapped optimizer's variable deltas with Adasum, not the gradients.

Each apply saves the variables, runs the wrapped optimizer's apply with this rank's gradients
(so its momentum or Adam state advances with them), takes delta = var - old, puts old back and
posts one grouped Adasum allreduce of the deltas (ops/adasum: per-tensor dot products inside
the fused bucket; dense host floating-point tensors on a power-of-two number of ranks, the
daemon refuses others on every rank, the variables left at old), then var = old + adasum(delta):
the same bits on every rank. A job of one takes the wrapped optimizer as it is
(adasum(delta) = delta), as Horovod. DistributedGradientTape(op=Adasum) combines the gradients
themselves (gradients.py), as Horovod's; both refuse here what Zen's Adasum cannot take.
"""

import tensorflow as tf

from zen.common.basics import size
from zen.tensorflow.compression import TopKCompressor
from zen.tensorflow.mpi_ops import Adasum, grouped_allreduce


def check_adasum_arguments(what, compression, gradient_predivide_factor):
    """ValueError, at construction, for what Adasum cannot take."""
    if isinstance(compression, TopKCompressor):
        raise ValueError("%s(op=Adasum): Compression.topk sends a sparse selection, and Zen's "
                         "Adasum is dense-only; use Compression.none or .fp16" % what)
    if gradient_predivide_factor != 1.0:
        raise ValueError("gradient_predivide_factor not supported with op != Average")


def dense_gradient(what, grad, label, sparse_as_dense):
    """grad, a tf.IndexedSlices one made dense (sparse_as_dense) or refused; label names it."""
    if not isinstance(grad, tf.IndexedSlices):
        return grad
    if not sparse_as_dense:
        raise ValueError("%s(op=Adasum): the gradient of %s is tf.IndexedSlices; Zen's Adasum "
                         "is dense-only (pass sparse_as_dense=True, or op=Average for Zen's "
                         "sparse allreduce)" % (what, label))
    return tf.convert_to_tensor(grad)


class AdasumStep:
    """DistributedOptimizer's apply under op=Adasum, for the variables of one apply call."""

    def __init__(self, name, sparse_as_dense, compression):
        self._name = name
        self._sparse_as_dense = sparse_as_dense
        self._compression = compression

    def dense(self, grads, variables):
        return [dense_gradient("DistributedOptimizer", g, "'%s'" % getattr(v, "path", v.name),
                               self._sparse_as_dense) for g, v in zip(grads, variables)]

    def wrap(self, apply_fn, variables, local):
        """apply_fn (the wrapped optimizer's apply of grads) made Horovod's Adasum step; the
        variables marked local (register_local_var) keep this rank's own step."""
        return lambda grads: self._apply(apply_fn, grads, variables, local)

    def _apply(self, apply_fn, grads, variables, local):
        if size() == 1:
            return apply_fn(grads)
        moved = [v for g, v, own in zip(grads, variables, local) if g is not None and not own]
        old = [tf.convert_to_tensor(v) for v in moved]  # snapshots: TF copies on write
        apply_fn(grads)
        deltas = [tf.convert_to_tensor(v) - o for v, o in zip(moved, old)]
        for v, o in zip(moved, old):
            v.assign(o)  # left there if the allreduce fails
        combined = grouped_allreduce(deltas, op=Adasum, compression=self._compression,
                                     name=self._name)
        for v, d in zip(moved, combined):
            v.assign_add(d)
        return None
