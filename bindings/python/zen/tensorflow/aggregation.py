"""Local gradient aggregation for DistributedOptimizer(backward_passes_per_step=N), as
Horovod's LocalGradientAggregationHelper(Eager): each pass adds its gradients to local
accumulators; every Nth pass allreduces the sums (divided by N when
average_aggregated_gradients), clears them and applies them; the passes in between leave the
variables and the optimizer's state alone. A Keras optimizer (step) counts those passes in
optimizer.iterations, so iterations counts backward passes as in Horovod; a TensorFlow 1
optimizer (graph_mode.py: accumulate and reduced_sums in compute_gradients, synced in
apply_gradients) counts them in global_step, as Horovod's.

Unlike Horovod (which refuses tf.IndexedSlices here unless sparse_as_dense), an embedding's
gradient stays sparse on the wire: its accumulator is dense (the variable's shape) beside a
mask of the rows touched in the window, and the sync sends only those rows through Zen's
sparse allreduce. The state lives in variables on this object (not the optimizer's
variables: not saved, not broadcast; in a TensorFlow 1 graph LOCAL_VARIABLES, as Horovod's,
which local_variables_initializer and MonitoredTrainingSession initialize), created in an
init_scope on first use, so creating them inside Model.fit's traced train step works; one
set per TensorFlow 1 graph (graph_key), so the optimizer works in a second graph. Within one
graph a second accumulate is refused: the two would share one window, counting each step
twice (Horovod's helper fails there too, on an assertion).
tf.cond picks the branch and the dependencies are explicit, so the same code runs eagerly,
in a tf.function and in a TensorFlow 1 session; every rank takes the same branch (the
counters advance in step).
"""

import tensorflow as tf


class LocalAggregation:
    def __init__(self, passes, average, allreduce_grads):
        """allreduce_grads(grads, variables): the reduced grads."""
        self._passes = passes
        self._average = average
        self._allreduce_grads = allreduce_grads
        self._graphs = {}  # graph_key() -> _Window

    @property
    def _window(self):
        return self._graphs.setdefault(graph_key(), _Window())

    @property
    def passes(self):
        return self._passes

    def step(self, grads, variables, apply_fn, iterations):
        """Adds grads (None kept) to the sums; on the Nth pass apply_fn(reduced sums), else
        iterations += 1 (apply_fn counts it itself)."""
        count = self.accumulate(grads, variables)

        def sync():
            apply_fn(self.reduced_sums(len(grads), variables))
            return tf.constant(True)

        def skip():
            iterations.assign_add(1)
            return tf.constant(False)

        return tf.cond(tf.equal(count, self._passes), sync, skip)

    def accumulate(self, grads, variables):
        """Adds grads (None kept) to the sums, then counts the pass: the new count, after
        every add (explicit dependencies: a TensorFlow 1 graph has no automatic ones)."""
        window, key = self._window, graph_key()
        if key is not None:
            if window.accumulated:
                raise ValueError("DistributedOptimizer(backward_passes_per_step=%d): "
                                 "compute_gradients was called twice in one graph; both would "
                                 "add to one window of sums (each step counted twice): wrap a "
                                 "new optimizer for the second" % self._passes)
            window.accumulated = True
        adds = [self._add(i, grad, var) for i, (grad, var) in enumerate(zip(grads, variables))
                if grad is not None]
        counter = self._counter_variable()
        with tf.control_dependencies(adds):
            return counter.assign_add(1)

    def reduced_sums(self, count, variables):
        """The window's sums of the count gradient positions reduced over the ranks (divided
        by N when average), read after the last accumulate; the sums and the counter are
        cleared once the allreduces have read them. Every sum of the window, even one whose
        gradient is None in this pass; the list keeps its positions, which name the
        allreduces."""
        sums = [self._read(i) if i in self._window.slots else None for i in range(count)]
        reduced = self._allreduce_grads(sums, variables)
        if self._average:
            reduced = [None if g is None else _scale(g, 1.0 / self._passes) for g in reduced]
        with tf.control_dependencies(tf.nest.flatten(reduced, expand_composites=True)):
            cleared = self._clear()
        with tf.control_dependencies(cleared):
            return [None if g is None else _identity(g) for g in reduced]

    def synced(self):
        """True when the last accumulate was a window's Nth pass (reduced_sums reset the
        counter): TensorFlow 1's DistributedOptimizer applies then only."""
        return tf.equal(self._counter_variable(), 0)

    def _counter_variable(self):
        window = self._window
        if window.counter is None:
            window.counter = state_variable(lambda: tf.constant(0, tf.int64),
                                            "zen_backward_passes")
        return window.counter

    def _slot(self, i, grad, var):
        slots = self._window.slots
        if i not in slots:
            total = state_variable(lambda: tf.zeros(var.shape, grad.dtype),
                                    "zen_aggregated_%d" % i)
            rows = None
            if isinstance(grad, tf.IndexedSlices):
                rows = state_variable(lambda: tf.zeros([var.shape[0]], tf.bool),
                                       "zen_aggregated_rows_%d" % i)
            slots[i] = (total, rows)
        return slots[i]

    def _add(self, i, grad, var):
        """The ops that add grad to sum i (grouped)."""
        total, rows = self._slot(i, grad, var)
        if isinstance(grad, tf.IndexedSlices):
            ops = [total.scatter_add(grad)]
            if rows is not None:
                ops.append(rows.scatter_update(tf.IndexedSlices(
                    tf.ones_like(grad.indices, tf.bool), grad.indices)))
            return tf.group(ops)
        ops = [total.assign_add(grad)]
        if rows is not None:  # a dense gradient for a sparse slot: every row counts
            ops.append(rows.assign(tf.ones_like(rows)))
        return tf.group(ops)

    def _read(self, i):
        """The window's sum: dense, or the touched rows as tf.IndexedSlices."""
        total, rows = self._window.slots[i]
        if rows is None:
            return tf.identity(total.read_value())
        indices = tf.reshape(tf.where(rows), [-1])
        return tf.IndexedSlices(tf.gather(total, indices), indices,
                                tf.shape(total, out_type=tf.int64))

    def _clear(self):
        """The ops that zero the sums and the counter (a list, for control_dependencies)."""
        ops = [self._counter_variable().assign(0)]
        for total, rows in self._window.slots.values():
            if rows is None:
                ops.append(total.assign(tf.zeros_like(total)))
                continue
            indices = tf.reshape(tf.where(rows), [-1])  # only the rows the window touched
            zeros = tf.zeros(tf.concat([tf.shape(indices), tf.shape(total)[1:]], 0),
                             total.dtype)
            with tf.control_dependencies([indices]):
                ops.append(total.scatter_update(tf.IndexedSlices(zeros, indices)))
                ops.append(rows.assign(tf.zeros_like(rows)))
        return [] if tf.executing_eagerly() else ops


class _Window:
    """One graph's (or eager execution's) window state."""

    def __init__(self):
        self.slots = {}  # gradient position -> (sum, touched-rows mask or None)
        self.counter = None  # made on first use
        self.accumulated = False  # a TensorFlow 1 graph's compute_gradients has added here


def graph_key():
    """Where state variables are made: None eagerly (inside a tf.function too: init_scope
    lifts them out), else the TensorFlow 1 graph. State kept per object is kept per key, as
    a variable of one graph cannot be used in another."""
    with tf.init_scope():
        return None if tf.executing_eagerly() else tf.compat.v1.get_default_graph()


def state_variable(initial_value, name):
    """A variable outside any function or cond being built: eagerly (Keras) a plain one, in
    a TensorFlow 1 graph a local one."""
    with tf.init_scope():
        if tf.executing_eagerly():
            return tf.Variable(initial_value, trainable=False, name=name)
        return tf.compat.v1.Variable(initial_value, trainable=False, name=name,
                                     collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])


def _identity(grad):
    """grad through tf.identity (so that control dependencies hold it), a tf.IndexedSlices
    one part by part."""
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(tf.identity(grad.values), tf.identity(grad.indices),
                                grad.dense_shape)
    return tf.identity(grad)


def _scale(grad, factor):
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values * tf.cast(factor, grad.values.dtype), grad.indices,
                                grad.dense_shape)
    return grad * tf.cast(factor, grad.dtype)
