"""DistributedOptimizer(op=Adasum), as horovod.tensorflow's _DistributedAdasumOptimizer: the
ranks combine the wrapped optimizer's variable deltas with Adasum, not the gradients.

Each apply saves the variables, runs the wrapped optimizer's apply with this rank's gradients
(so its momentum or Adam state advances with them), takes delta = var - old, puts old back and
posts one grouped Adasum allreduce of the deltas (ops/adasum: per-tensor dot products inside
the fused bucket; dense host floating-point tensors on a power-of-two number of ranks, the
daemon refuses others on every rank, the variables left at old), then var = old + adasum(delta):
the same bits on every rank. A job of one takes the wrapped optimizer as it is
(adasum(delta) = delta), as Horovod.
"""

import tensorflow as tf

from zen.common.basics import size
from zen.tensorflow.compression import TopKCompressor
from zen.tensorflow.mpi_ops import Adasum, grouped_allreduce


def check_adasum_compression(what, compression):
    """ValueError, at construction, for a compression Adasum cannot take."""
    if isinstance(compression, TopKCompressor):
        raise ValueError("%s(op=Adasum): Compression.topk sends a sparse selection, and Zen's "
                         "Adasum is dense-only; use Compression.none or .fp16" % what)


def dense_gradient(what, grad, label, sparse_as_dense):
    """grad, a tf.IndexedSlices one made dense (sparse_as_dense) or refused; label names it."""
    if not isinstance(grad, tf.IndexedSlices):
        return grad
    if not sparse_as_dense:
        raise ValueError("%s(op=Adasum): the gradient of %s is tf.IndexedSlices; Zen's Adasum "
                         "is dense-only (pass sparse_as_dense=True, or op=Average for Zen's "
                         "sparse allreduce)" % (what, label))
    return tf.convert_to_tensor(grad)


def adasum_apply(apply_fn, grads, variables, name, compression):
    """apply_fn(grads) (the wrapped optimizer's apply) on this rank, its deltas to variables
    combined over the ranks with Adasum."""
    if size() == 1:
        return apply_fn(grads)
    moved = [v for g, v in zip(grads, variables) if g is not None]
    old = [tf.identity(tf.convert_to_tensor(v)) for v in moved]
    apply_fn(grads)
    deltas = [tf.convert_to_tensor(v) - o for v, o in zip(moved, old)]
    for v, o in zip(moved, old):
        v.assign(o)  # left there if the allreduce fails
    combined = grouped_allreduce(deltas, op=Adasum, compression=compression, name=name)
    for v, d in zip(moved, combined):
        v.assign_add(d)
    return None
