"""Local gradient aggregation for DistributedOptimizer(backward_passes_per_step=N), as
Horovod's LocalGradientAggregationHelper(Eager): each call adds this pass's gradients to
local accumulators; every Nth call allreduces the sums (divided by N when
average_aggregated_gradients), clears them and applies them; the calls in between leave the
variables and the optimizer's state alone and only count optimizer.iterations, so
iterations counts backward passes as in Horovod.

Unlike Horovod (which refuses tf.IndexedSlices here unless sparse_as_dense), an embedding's
gradient stays sparse on the wire: its accumulator is dense (the variable's shape) beside a
mask of the rows touched in the window, and the sync sends only those rows through Zen's
sparse allreduce. The state lives in plain tf.Variables on this object (not the optimizer's
variables: not saved, not broadcast), created in an init_scope on first use, so creating
them inside Model.fit's traced train step works. tf.cond picks the branch, so the same
code runs eagerly and in a tf.function; every rank takes the same branch (the counters
advance in step).
"""

import tensorflow as tf


class LocalAggregation:
    def __init__(self, passes, average, allreduce_grads):
        """allreduce_grads(grads, variables): the reduced grads."""
        self._passes = passes
        self._average = average
        self._allreduce_grads = allreduce_grads
        self._slots = {}  # gradient position -> (sum, touched-rows mask or None)
        with tf.init_scope():
            self._counter = tf.Variable(0, dtype=tf.int64, trainable=False,
                                        name="zen_backward_passes")

    def step(self, grads, variables, apply_fn, iterations):
        """Adds grads (None kept) to the sums; on the Nth pass apply_fn(reduced sums), else
        iterations += 1 (apply_fn counts it itself)."""
        for i, (grad, var) in enumerate(zip(grads, variables)):
            if grad is not None:
                self._add(i, grad, var)
        self._counter.assign_add(1)

        def sync():
            # Every sum of the window, even one whose gradient is None in this pass; the
            # list keeps its positions, which name the allreduces.
            sums = [self._read(i) if i in self._slots else None for i in range(len(grads))]
            reduced = self._allreduce_grads(sums, variables)
            if self._average:
                reduced = [None if g is None else _scale(g, 1.0 / self._passes)
                           for g in reduced]
            with tf.control_dependencies(tf.nest.flatten(reduced, expand_composites=True)):
                self._clear()
            apply_fn(reduced)
            return tf.constant(True)

        def skip():
            iterations.assign_add(1)
            return tf.constant(False)

        return tf.cond(tf.equal(self._counter, self._passes), sync, skip)

    def _slot(self, i, grad, var):
        if i not in self._slots:
            with tf.init_scope():
                total = tf.Variable(tf.zeros(var.shape, grad.dtype), trainable=False)
                rows = None
                if isinstance(grad, tf.IndexedSlices):
                    rows = tf.Variable(tf.zeros([var.shape[0]], tf.bool), trainable=False)
            self._slots[i] = (total, rows)
        return self._slots[i]

    def _add(self, i, grad, var):
        total, rows = self._slot(i, grad, var)
        if isinstance(grad, tf.IndexedSlices):
            total.scatter_add(grad)
            if rows is not None:
                rows.scatter_update(tf.IndexedSlices(tf.ones_like(grad.indices, tf.bool),
                                                     grad.indices))
            return
        total.assign_add(grad)
        if rows is not None:  # a dense gradient for a sparse slot: every row counts
            rows.assign(tf.ones_like(rows))

    def _read(self, i):
        """The window's sum: dense, or the touched rows as tf.IndexedSlices."""
        total, rows = self._slots[i]
        if rows is None:
            return tf.identity(total.read_value())
        indices = tf.reshape(tf.where(rows), [-1])
        return tf.IndexedSlices(tf.gather(total, indices), indices,
                                tf.shape(total, out_type=tf.int64))

    def _clear(self):
        self._counter.assign(0)
        for total, rows in self._slots.values():
            if rows is None:
                total.assign(tf.zeros_like(total))
                continue
            indices = tf.reshape(tf.where(rows), [-1])  # only the rows the window touched
            zeros = tf.zeros(tf.concat([tf.shape(indices), tf.shape(total)[1:]], 0),
                             total.dtype)
            total.scatter_update(tf.IndexedSlices(zeros, indices))
            rows.assign(tf.zeros_like(rows))


def _scale(grad, factor):
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values * tf.cast(factor, grad.values.dtype), grad.indices,
                                grad.dense_shape)
    return grad * tf.cast(factor, grad.dtype)
