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
    local_gradients.LocalVariables: register_local_var); the rest is the wrapped optimizer's."""

    def __init__(self, optimizer, name, use_locking, allreduce_grads, local):
        super().__init__(name=name or "Distributed" + type(optimizer).__name__,
                         use_locking=use_locking)
        self._optimizer = optimizer
        self._allreduce_grads = allreduce_grads
        self._local = local

    def register_local_var(self, var):
        """Marks a variable as this rank's own (model parallelism): its gradient is not
        reduced."""
        self._local.register(var)

    def compute_gradients(self, *args, **kwargs):
        grads_and_vars = self._optimizer.compute_gradients(*args, **kwargs)
        if not grads_and_vars:
            return grads_and_vars
        grads, variables = zip(*grads_and_vars)
        reduced = self._local.reduce(self._allreduce_grads, list(grads), list(variables))
        return list(zip(reduced, variables))

    def apply_gradients(self, *args, **kwargs):
        return self._optimizer.apply_gradients(*args, **kwargs)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)
