"""The gradient allreduce behind DistributedGradientTape and DistributedOptimizer.

Every gradient is posted under a stable name (the prefix and its position in the list), so
the daemon's response cache hits from the second step on; tf.IndexedSlices (embedding
gradients) go through Zen's sparse allreduce unless sparse_as_dense. Eagerly the allreduces
run inside one tf.function (cached per configuration, as Horovod does), so they are all in
flight at once and the daemon fuses them; reduce_retracing keeps the changing row count of
sparse gradients from retracing it every step. With Compression.topk(ratio) the dense
gradients of at least min_size elements send their top-k elements (with error feedback:
zen.tensorflow.topk) through the sparse allreduce instead, under the same name, clipped
first to its clip_norm (DGC's local gradient clipping) over the step's dense gradients.
"""

import tensorflow as tf

from zen.common import process_sets
from zen.common.basics import Adasum, Average, Sum, check_op
from zen.common.compression import check_topk_called
from zen.tensorflow.adasum_optimizer import check_adasum_arguments, dense_gradient
from zen.tensorflow.compression import Compression, TopKCompressor
from zen.tensorflow.mpi_ops import allreduce, group_prefix

_cache = {}


def _reduce_topk(grad, name, op, compression, sparse_as_dense, predivide, ps, clip_scale):
    """One gradient under Compression.topk (keyed by its name): tf.IndexedSlices unchanged
    through the sparse allreduce, a dense one clipped by clip_scale (None: not) and
    compressed (or dense below min_size)."""
    if isinstance(grad, tf.IndexedSlices) and not sparse_as_dense:
        return allreduce(grad, op=op, name=name, process_set=ps)
    compressed, ctx = compression.compress(tf.convert_to_tensor(grad), name, clip_scale)
    if isinstance(compressed, tf.IndexedSlices):
        return compression.decompress(allreduce(compressed, op=op, name=name, process_set=ps),
                                      ctx)
    return compression.decompress(
        _reduce_one(compressed, name, op, Compression.none, sparse_as_dense, predivide, ps),
        ctx)


def _reduce_one(grad, name, op, compression, sparse_as_dense, predivide, ps, clip_scale=None):
    if grad is None:
        return None
    if op == Adasum:  # the raw dense allreduce (the tape's Adasum: of the gradients, as Horovod)
        grad = dense_gradient("DistributedGradientTape", grad, "'%s'" % name, sparse_as_dense)
        return allreduce(grad, op=op, name=name, compression=compression)
    if isinstance(compression, TopKCompressor):
        return _reduce_topk(grad, name, op, compression, sparse_as_dense, predivide, ps,
                            clip_scale)
    if isinstance(grad, tf.IndexedSlices):
        if not sparse_as_dense:
            return allreduce(grad, op=op, name=name, compression=compression, process_set=ps)
        grad = tf.convert_to_tensor(grad)
    prescale, postscale = 1.0, 1.0
    if op == Average and predivide != 1.0:
        prescale, postscale = 1.0 / predivide, predivide
    return allreduce(grad, op=op, name=name, compression=compression,
                     prescale_factor=prescale, postscale_factor=postscale, process_set=ps)


def _clip_scale(grads, compression, sparse_as_dense, process_set):
    """Compression.topk's clipping factor for the step's gradients that it takes (dense, or
    tf.IndexedSlices with sparse_as_dense), or None without clip_norm."""
    if not isinstance(compression, TopKCompressor) or compression.clip_norm is None:
        return None
    taken = [tf.convert_to_tensor(g) for g in grads if g is not None and g.dtype.is_floating
             and (sparse_as_dense or not isinstance(g, tf.IndexedSlices))]
    return compression.clip_scale(taken, process_sets.set_size(process_set))


def make_allreduce_grads_fn(prefix, op=Average, compression=Compression.none,
                            sparse_as_dense=False, gradient_predivide_factor=1.0,
                            process_set=process_sets.global_process_set):
    """fn(grads) -> grads averaged (or summed, or combined by Adasum) over all ranks (over
    process_set's ranks; a rank outside it keeps its own gradients, as Horovod's), None
    kept."""
    ps_id = process_sets.process_set_id(process_set, "DistributedGradientTape/"
                                        "DistributedOptimizer", members_only=False)
    if op == Adasum:  # check_op keeps Adasum to the raw allreduce, which this one calls
        if ps_id != 0:
            raise ValueError("op=Adasum runs over the global process set only, not %s" %
                             (process_set,))
        check_adasum_arguments("DistributedGradientTape", compression,
                               gradient_predivide_factor)
    else:
        op = check_op(op, None, "DistributedGradientTape/DistributedOptimizer")
    check_topk_called(compression, TopKCompressor)
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    key = (prefix, op, compression, sparse_as_dense, gradient_predivide_factor, ps_id)
    if key in _cache:
        return _cache[key]

    def allreduce_grads(grads, ratio=None):  # ratio: Compression.topk's, traced anew on a change
        del ratio
        names = group_prefix(prefix)
        clip_scale = _clip_scale(grads, compression, sparse_as_dense, process_set)
        return [_reduce_one(g, "%s.%d" % (names, i), op, compression, sparse_as_dense,
                            gradient_predivide_factor, process_set, clip_scale)
                for i, g in enumerate(grads)]

    compiled = tf.function(allreduce_grads, reduce_retracing=True)

    def run(grads):
        grads = list(grads)
        if ps_id != 0 and not process_set.included():
            return grads
        if process_sets.set_size(process_set) == 1 and op in (Average, Sum, Adasum):
            return grads
        if tf.executing_eagerly():
            return compiled(grads, getattr(compression, "ratio", None))
        return allreduce_grads(grads)

    _cache[key] = run
    return run
