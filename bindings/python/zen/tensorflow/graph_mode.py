"""horovod.tensorflow's TensorFlow 1 API (tf.compat.v1 graphs and sessions):
broadcast_global_variables and BroadcastGlobalVariablesHook. Graph mode only, as Horovod's:
eagerly there are no global variables (use broadcast_variables)."""

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
