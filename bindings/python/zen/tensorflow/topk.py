"""Compression.topk for zen.tensorflow: Deep Gradient Compression's top-k sparsification
(Lin et al., ICLR 2018) of dense gradients into Zen's sparse allreduce, as zen.torch.topk
(which documents the algorithm and what is not implemented).

Per gradient (keyed by its allreduce name, stable across steps) and step: u = momentum * u + g
(momentum correction; u = g without), v = v + u (v = v + g + momentum * u with nesterov=True),
the k = ceil(ratio * numel) elements of v largest in magnitude (flattened; exactly those of
tf.math.top_k of |v|, found among the elements at or above a sampled threshold as in
zen.torch.topk) travel as a 1-D tf.IndexedSlices through the sparse allreduce, and are cleared
from v (and from u: momentum factor masking). clip_norm is DGC's local gradient clipping, as
zen.torch.topk's: DistributedGradientTape and DistributedOptimizer scale the step's dense
gradients (all of them are in hand there) by clip_scale's factor first.
The residual v and the momentum u (float32 for float16 and bfloat16 gradients; the elements sent
travel in the gradient's dtype, and what that rounding drops stays in v) are tf.Variables on
this object, created in an init_scope on first use (so inside a traced train step too); they are
not the optimizer's variables (not saved, not broadcast). In a TensorFlow 1 graph they are
LOCAL_VARIABLES (as the aggregation's state: not broadcast with the global ones), one set per
graph, also in the graph's STATE_COLLECTION (which TensorFlowState(session=) saves), and the reads and writes are ordered by explicit control dependencies, which a graph
lacks (eagerly and in a tf.function they are no-ops). Tensors below min_size elements go dense.

ratio may be set between steps (DGC's warm-up). k is fixed where a tf.function traces the
compressor, so a traced function checks, each call, that the ratio is still the one it was
traced with (a scalar variable the setter assigns) and fails the step naming the retrace it
needs otherwise, rather than ignoring the change; the function DistributedGradientTape (and
an eager DistributedOptimizer) runs is traced anew when the ratio changes (gradients.py).
Once a TensorFlow 1 graph has built the compressor, setting ratio raises ValueError (that
graph's k is fixed, and the variable lives in its session).
"""

import tensorflow as tf

from zen.common.compression import (CLIP_EPSILON, TopKCompressorBase, topk_count,
                                    topk_sample_plan)
from zen.tensorflow.aggregation import graph_key, state_variable

__all__ = ["STATE_COLLECTION", "TopKCompressor"]

# The graph collection of every Compression.topk residual and momentum built into a TensorFlow
# 1 graph (a graph's own, not a process global): elastic's TensorFlowState(session=) saves and
# restores them with each commit.
STATE_COLLECTION = "zen_topk_state"


class TopKCompressor(TopKCompressorBase):
    """Compression.topk(ratio=0.01, min_size=1024, momentum=0.0, momentum_masking=True,
    nesterov=False, clip_norm=None) for DistributedGradientTape and DistributedOptimizer:
    each dense gradient of at least min_size elements sends its top ratio of elements through
    Zen's sparse allreduce, with error feedback; tf.IndexedSlices gradients take Zen's sparse
    path unchanged. momentum > 0 is DGC's momentum correction (nesterov=True: Nesterov's): the
    wrapped optimizer must then have no momentum of its own. clip_norm: DGC's local gradient
    clipping. hvd.allreduce(t, compression=topk) raises ValueError: it has no key for the
    residual."""

    def __init__(self, ratio=0.01, min_size=1024, momentum=0.0, momentum_masking=True,
                 nesterov=False, clip_norm=None):
        super().__init__(ratio, min_size, momentum, momentum_masking, nesterov, clip_norm)
        self._in_tf1_graph = False  # built into a TensorFlow 1 graph: its k is fixed
        self._ratio_variable = None  # the ratio traced functions check theirs against

    @TopKCompressorBase.ratio.setter
    def ratio(self, ratio):
        if self._in_tf1_graph:
            raise ValueError("Compression.topk: the ratio cannot change once a TensorFlow 1 "
                             "graph has built this compressor (its k is fixed there; a new "
                             "compressor would start from empty residuals)")
        TopKCompressorBase.ratio.fset(self, ratio)
        if self._ratio_variable is not None:
            self._ratio_variable.assign(self.ratio)

    def _ratio_check(self):
        """In a tf.function: an op failing the call when ratio is no longer the one traced."""
        if self._ratio_variable is None:
            ratio = self.ratio
            self._ratio_variable = state_variable(lambda: tf.constant(ratio, tf.float64),
                                                  "zen_topk_ratio")
        return tf.debugging.assert_equal(
            self._ratio_variable, tf.constant(self.ratio, tf.float64),
            message="Compression.topk: ratio was set after this tf.function was traced, and "
                    "its k is fixed there: trace it again (Keras: "
                    "model.make_train_function(force=True)); the ratio now, the traced one")

    def compresses(self, tensor):
        """Whether tensor travels sparse (floating point, at least min_size elements)."""
        return tensor.dtype.is_floating and tensor.shape.num_elements() is not None and \
            tensor.shape.num_elements() >= self.min_size

    def clip_scale(self, tensors, size):
        """The factor (a float64 scalar) that clips tensors, one rank's dense gradients of a
        step, to clip_threshold(size) in global L2 norm; None without clip_norm or tensors.
        A NaN or infinite norm gives NaN or 0: loud."""
        if self.clip_norm is None or not tensors:
            return None
        norms = [tf.cast(tf.norm(tf.cast(t, _accumulator_dtype(t.dtype))), tf.float64)
                 for t in tensors]
        total = tf.norm(tf.stack(norms))
        return tf.minimum(tf.constant(1.0, tf.float64),
                          self.clip_threshold(size) / (total + CLIP_EPSILON))

    def compress(self, tensor, key=None, scale=None):
        """(a 1-D tf.IndexedSlices of the selected elements, or a dense tensor; ctx). scale:
        clip_scale's factor, applied before the momentum and the residual."""
        if key is None:
            raise ValueError("Compression.topk keeps a residual per tensor, so compress needs "
                             "a key: use it with DistributedGradientTape or "
                             "DistributedOptimizer (hvd.allreduce cannot pass one)")
        tensor = tf.convert_to_tensor(tensor)
        if not tensor.dtype.is_floating:
            return tensor, None
        if tensor.shape.num_elements() is None:
            raise ValueError("Compression.topk: the gradient %r has no static shape (%s)"
                             % (key, tensor.shape))
        flat = tf.reshape(tensor, [-1])
        # float32 state for half-precision gradients, as zen.torch.topk's.
        wide = tf.cast(flat, _accumulator_dtype(flat.dtype))
        if scale is not None:
            wide = wide * tf.cast(scale, wide.dtype)
        update = wide
        if self.momentum:
            momentum = self._state(self._momenta, key, wide)
            with tf.control_dependencies([momentum.assign(momentum * self.momentum + wide)]):
                update = momentum.read_value()
            if self.nesterov:
                update = wide + self.momentum * update
        if not self.compresses(tensor):
            if self.momentum or scale is not None:
                return tf.reshape(tf.cast(update, flat.dtype), tf.shape(tensor)), tensor.shape
            return tensor, None
        checks = []
        if graph_key() is not None:
            self._in_tf1_graph = True
        elif not tf.executing_eagerly():
            checks.append(self._ratio_check())
        residual = self._state(self._residuals, key, wide)
        with tf.control_dependencies([residual.assign_add(update)] + checks):
            accumulated = residual.read_value()
        numel = tensor.shape.num_elements()
        indices = _largest(tf.abs(accumulated), topk_count(numel, self.ratio))
        chosen = tf.gather(accumulated, indices)
        values = tf.cast(chosen, flat.dtype)  # the gradient's dtype on the wire
        sent = tf.expand_dims(indices, 1)
        zeros = tf.zeros(tf.shape(chosen), chosen.dtype)
        # What the rounding to the gradient's dtype dropped stays in the residual.
        left = chosen - tf.cast(values, chosen.dtype) if values.dtype != chosen.dtype else zeros
        with tf.control_dependencies([values]):  # cleared once they are read
            cleared = [residual.scatter_nd_update(sent, left)]
            if self.momentum and self.momentum_masking:
                cleared.append(momentum.scatter_nd_update(sent, zeros))
        with tf.control_dependencies(cleared):  # sending them clears them
            values, indices = tf.identity(values), tf.identity(indices)
        slices = tf.IndexedSlices(values, indices, tf.constant([numel], tf.int64))
        return slices, tensor.shape

    @staticmethod
    def decompress(tensor, ctx):
        """The reduced tensor (tf.IndexedSlices or dense) in the gradient's shape, dense."""
        if ctx is None:
            return tensor
        return tf.reshape(tf.convert_to_tensor(tensor), ctx)

    def state(self):
        """Copies of the residuals and momenta, eagerly (what elastic's TensorFlowKerasState
        saves at a commit)."""
        return ({k: tf.identity(v) for k, v in self._residuals.items()},
                {k: tf.identity(v) for k, v in self._momenta.items()})

    def load_state(self, state):
        """The values of state() back into the variables; one made since is zeroed (the
        commit predates it)."""
        for states, saved in zip((self._residuals, self._momenta), state):
            for key, variable in states.items():
                variable.assign(saved[key] if key in saved else tf.zeros_like(variable))

    def residual(self, key):
        """What key's gradients have not sent yet (flattened) in the current graph (eagerly:
        the only one), or None before its first."""
        return self._residuals.get(_scoped(key))

    def momentum_buffer(self, key):
        """key's momentum u (flattened) in the current graph, or None."""
        return self._momenta.get(_scoped(key))

    @staticmethod
    def _state(states, key, flat):
        key = _scoped(key)
        state = states.get(key)
        if state is None:
            state = states[key] = state_variable(lambda: tf.zeros(flat.shape, flat.dtype),
                                                 "zen_topk_state")
            if graph_key() is not None:
                tf.compat.v1.add_to_collection(STATE_COLLECTION, state)
        elif state.shape != flat.shape or state.dtype != flat.dtype:
            raise ValueError("Compression.topk: the gradient %r changed from %s %s to %s %s"
                             % (key, state.dtype.name, state.shape, flat.dtype.name,
                                flat.shape))
        return state


def _accumulator_dtype(dtype):
    """The residual's and the momentum's dtype for a gradient of dtype."""
    return tf.float32 if dtype in (tf.float16, tf.bfloat16) else dtype


def _largest(magnitudes, k):
    """int64 indices of the k largest of 1-D magnitudes, through a sampled threshold where
    that is cheaper (zen.common.compression's topk_sample_plan). The sample's positions are
    fixed per size (a stateless draw: no random state to keep, the same in a graph and
    eagerly). A NaN counts as largest, as in torch.topk (tf.math.top_k places NaNs as it
    happens to, and one left in the residual would never reach the other ranks)."""
    return _largest_by(magnitudes, k, topk_sample_plan(magnitudes.shape.num_elements(), k))


def _largest_by(magnitudes, k, plan):
    """_largest with the sample plan given ((m, r), or None: the top_k of all)."""
    numel = magnitudes.shape.num_elements()

    def of_all():
        return tf.cast(tf.math.top_k(_nan_as_inf(magnitudes), k, sorted=False).indices,
                       tf.int64)

    if plan is None:
        return of_all()
    m, r = plan

    def sampled():
        positions = tf.random.stateless_uniform([m], [0x5A3D, numel], 0, numel,
                                                dtype=tf.int64)
        sample = tf.gather(magnitudes, positions)
        threshold = tf.reduce_min(tf.math.top_k(sample, r, sorted=False).values)
        candidates = tf.reshape(tf.where(magnitudes >= threshold), [-1])

        def among_candidates():
            chosen = tf.math.top_k(tf.gather(magnitudes, candidates), k, sorted=False).indices
            return tf.gather(candidates, chosen)

        # Fewer than k reach the threshold about 3 calls in 10^5 (or an infinite one).
        return tf.cond(tf.size(candidates, out_type=tf.int64) >= k, among_candidates, of_all)

    # A NaN anywhere makes the sum NaN (magnitudes are >= 0: infinities do not): then the
    # whole tensor's top_k with NaNs as infinities. (Comparisons with a threshold cannot keep
    # NaNs: grappler rewrites not(a < t) into a >= t.)
    return tf.cond(tf.math.is_nan(tf.reduce_sum(magnitudes)), of_all, sampled)


def _nan_as_inf(magnitudes):
    return tf.where(tf.math.is_nan(magnitudes), tf.constant(float("inf"), magnitudes.dtype),
                    magnitudes)


def _scoped(key):
    """key, eagerly; (the graph, key) in a TensorFlow 1 graph: its variables live there."""
    graph = graph_key()
    return key if graph is None else (graph, key)
