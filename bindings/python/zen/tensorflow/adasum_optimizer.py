"""DistributedOptimizer(op=Adasum), as horovod.tensorflow's _DistributedAdasumOptimizer: the
ranks combine the wrapped optimizer's variable deltas with Adasum, not the gradients.

A Keras optimizer (AdasumStep):

Each apply saves the variables, runs the wrapped optimizer's apply with this rank's gradients
(so its momentum or Adam state advances with them), takes delta = var - old, puts old back and
posts one grouped Adasum allreduce of the deltas (ops/adasum: per-tensor dot products inside
the fused bucket; dense host floating-point tensors on a power-of-two number of ranks, the
daemon refuses others on every rank, the variables left at old), then var = old + adasum(delta):
the same bits on every rank. A job of one takes the wrapped optimizer as it is
(adasum(delta) = delta), as Horovod. DistributedGradientTape(op=Adasum) combines the gradients
themselves (gradients.py), as Horovod's; both refuse here what Zen's Adasum cannot take.

A TensorFlow 1 optimizer in a graph (AdasumWindow, Horovod's design for those): every pass
the wrapped optimizer applies this rank's gradients; every Nth (backward_passes_per_step) the
ranks combine each variable's delta since the window began with Adasum, var = start +
adasum(var - start). start is copied from the variable as a window begins, so that a restore
or a broadcast between windows is no delta. (Horovod's wrapper builds this in its
_apply_dense but its apply_gradients calls the wrapped optimizer's, so there the ranks never
combine anything; Zen runs the design.) One apply per graph: a second would share the
window's counter (each step counted twice, its variables combined from starts never taken)
and post the same allreduce names, so it is refused, as aggregation.py refuses a second
compute_gradients (in Horovod's design the second _prepare's tf.get_variable("step_count")
exists already).
"""

import tensorflow as tf

from zen.common.basics import size
from zen.tensorflow.aggregation import graph_key, state_variable
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
        for v, d in zip(moved, _combine(deltas, self._compression, self._name)):
            v.assign_add(d)
        return None


class AdasumWindow:
    """A TensorFlow 1 DistributedOptimizer's apply_gradients under op=Adasum (graph mode:
    the dependencies explicit); its state is LOCAL_VARIABLES, as Horovod's aggregation's."""

    def __init__(self, name, compression, passes):
        self._name = name
        self._compression = compression
        self._passes = passes
        self._graphs = set()  # graph_key() of the graphs applied in (one apply each)
        self._starts = {}  # variable ref -> its window's start

    def apply(self, apply_fn, variables):
        """apply_fn() (the wrapped optimizer's apply_gradients op) made the Adasum step of
        variables (those it moves, the local ones left out): an op. ValueError for a second
        apply in one graph, on any number of ranks."""
        if graph_key() in self._graphs:
            raise ValueError("DistributedOptimizer(op=Adasum): apply_gradients was called "
                             "twice in one graph; both would share one window (each step "
                             "counted twice, one step counter and one allreduce name for "
                             "both): wrap a new optimizer for the second")
        self._graphs.add(graph_key())
        if size() == 1:  # adasum(delta) = delta
            return apply_fn()
        counter = state_variable(lambda: tf.constant(0, tf.int64), "zen_adasum_passes")
        starts = [self._start(v) for v in variables]

        def begin():
            with tf.control_dependencies([s.assign(v) for s, v in zip(starts, variables)]):
                return tf.constant(True)

        begun = tf.cond(tf.equal(counter % self._passes, 0), begin,
                        lambda: tf.constant(False))
        with tf.control_dependencies([begun]):
            update = apply_fn()
        with tf.control_dependencies([update]):
            count = counter.assign_add(1)

        def combine():
            deltas = [tf.convert_to_tensor(v) - s for v, s in zip(variables, starts)]
            combined = _combine(deltas, self._compression, self._name)
            with tf.control_dependencies(
                    [v.assign(s + d) for v, s, d in zip(variables, starts, combined)]):
                return tf.constant(True)

        return tf.group(tf.cond(tf.equal(count % self._passes, 0), combine,
                                lambda: tf.constant(False)))

    def _start(self, var):
        key = var.ref()
        if key not in self._starts:
            self._starts[key] = state_variable(
                lambda: tf.zeros(var.shape, var.dtype.base_dtype), "zen_adasum_start")
        return self._starts[key]


def _combine(deltas, compression, name):
    """Every rank's deltas combined by Adasum, one grouped allreduce."""
    return grouped_allreduce(deltas, op=Adasum, compression=compression, name=name)
