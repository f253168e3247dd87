"""horovod.tensorflow's TensorFlow 1 API (tf.compat.v1 graphs and sessions):
broadcast_global_variables and BroadcastGlobalVariablesHook (graph mode only, as Horovod's:
eagerly there are no global variables; use broadcast_variables), and the DistributedOptimizer
of a tf.compat.v1.train optimizer (optimizer.py builds it)."""

import tensorflow as tf

from zen.tensorflow.functions import broadcast_variables


def broadcast_global_variables(root_rank):
    """An op that assigns root_rank's value of every global variable
    (tf.compat.v1.global_variables()) to it on every rank; run it in a session once the
    variables are initialized. RuntimeError under eager execution, as Horovod's."""
    if tf.executing_eagerly():
        raise RuntimeError("zen.tensorflow.broadcast_global_variables() does not support eager "
                           "execution (TensorFlow 1 graphs only); use "
                           "broadcast_variables(<model/optimizer variables>, root_rank) instead")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """A SessionRunHook (MonitoredTrainingSession's hooks=) that broadcasts every global
    variable from root_rank once the session is created (after the variables are initialized
    or restored), so that every rank starts from the same state."""

    def __init__(self, root_rank, device=""):
        super().__init__()
        self.root_rank = root_rank
        self.bcast_op = None
        self.device = device

    def begin(self):
        # The op is built again when the hook is reused with a new graph.
        if self.bcast_op is None or self.bcast_op.graph != tf.compat.v1.get_default_graph():
            with tf.device(self.device):
                self.bcast_op = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session, coord):
        session.run(self.bcast_op)


class LegacyDistributedOptimizer(tf.compat.v1.train.Optimizer):
    """DistributedOptimizer of a TensorFlow 1 optimizer (tf.compat.v1.train.*), as Horovod's:
    compute_gradients (and so minimize) returns the gradients reduced over the ranks
    (allreduce_grads, DistributedOptimizer's) but for its local variables (local, a
    local_gradients.LocalVariables: register_local_var); the rest is the wrapped optimizer's.
    With adasum (an adasum_optimizer.AdasumWindow: op=Adasum) the gradients stay local and
    apply_gradients is its Adasum step of the deltas. With aggregation (an
    aggregation.LocalAggregation: backward_passes_per_step=N),
    compute_gradients adds this pass's gradients to the sums and returns them reduced on the
    Nth pass, this pass's own before it; apply_gradients applies on the Nth pass only, and
    before it only adds 1 to global_step (Horovod's LocalGradientAggregationHelper). There
    sparse_as_dense makes tf.IndexedSlices gradients dense before they are added, as Horovod's
    helper does: the reduced sums are dense then, and both passes must return one kind."""

    def __init__(self, optimizer, name, use_locking, allreduce_grads, local, aggregation=None,
                 adasum=None, sparse_as_dense=False):
        super().__init__(name=name or "Distributed" + type(optimizer).__name__,
                         use_locking=use_locking)
        self._optimizer = optimizer
        self._allreduce_grads = allreduce_grads
        self._local = local
        self._aggregation = aggregation
        self._adasum = adasum
        self._sparse_as_dense = sparse_as_dense

    def register_local_var(self, var):
        """Marks a variable as this rank's own (model parallelism): its gradient is not
        reduced."""
        self._local.register(var)

    def compute_gradients(self, *args, **kwargs):
        grads_and_vars = self._optimizer.compute_gradients(*args, **kwargs)
        if not grads_and_vars or self._adasum is not None:
            return grads_and_vars
        grads, variables = (list(t) for t in zip(*grads_and_vars))
        if self._aggregation is None:
            return list(zip(self._reduce(grads, variables), variables))
        if self._sparse_as_dense:
            grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                     for g in grads]
        count = self._aggregation.accumulate(grads, variables)
        present = [i for i, g in enumerate(grads) if g is not None]  # tf.cond takes no None

        def sync():
            reduced = self._aggregation.reduced_sums(len(grads), variables)
            return [_matching(reduced[i]) for i in present]

        def local():
            return [_matching(grads[i]) for i in present]

        picked = tf.cond(tf.equal(count, self._aggregation.passes), sync, local)
        if not isinstance(picked, (list, tuple)):  # tf.cond unpacks a list of one
            picked = [picked]
        out = list(grads)
        for i, g in zip(present, picked):
            out[i] = g
        return list(zip(out, variables))

    def _reduce(self, grads, variables):
        """grads reduced over the ranks but for the local variables' (LocalVariables)."""
        return self._local.reduce(self._allreduce_grads, grads, variables)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = list(grads_and_vars)
        if self._adasum is not None:
            variables = [v for g, v in grads_and_vars if g is not None]
            combined = [v for v, own in zip(variables, self._local.mask(variables)) if not own]
            return self._adasum.apply(lambda: self._optimizer.apply_gradients(
                grads_and_vars, global_step, name), combined)
        if self._aggregation is None:
            return self._optimizer.apply_gradients(grads_and_vars, global_step, name)
        # After compute_gradients' outputs: the counter is read once that pass has counted.
        inputs = [g for g, _ in grads_and_vars if g is not None]
        with tf.control_dependencies(tf.nest.flatten(inputs, expand_composites=True)):
            synced = self._aggregation.synced()

        def apply():
            with tf.control_dependencies(
                    [self._optimizer.apply_gradients(grads_and_vars, global_step, name)]):
                return tf.constant(True)

        def skip():
            deps = [] if global_step is None else [global_step.assign_add(1)]
            with tf.control_dependencies(deps):
                return tf.constant(False)

        return tf.group(tf.cond(synced, apply, skip), name=name)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


def _matching(grad):
    """grad as both branches of a tf.cond return it: a new tensor, a tf.IndexedSlices one
    with int64 indices and dense_shape (the sync branch's sums have them, a gradient may
    not)."""
    if not isinstance(grad, tf.IndexedSlices):
        return tf.identity(grad)
    shape = grad.dense_shape
    if shape is None:
        raise ValueError("backward_passes_per_step > 1: a tf.IndexedSlices gradient without "
                         "dense_shape")
    return tf.IndexedSlices(tf.identity(grad.values), tf.cast(grad.indices, tf.int64),
                            tf.cast(shape, tf.int64))
