"""broadcast_variables, as horovod.tensorflow.functions."""

import tensorflow as tf

from zen.tensorflow.mpi_ops import broadcast


def _broadcast_group(variables, root_rank):
    return tf.group(*[v.assign(broadcast(v, root_rank, name="variables.%d" % i))
                      for i, v in enumerate(variables)])


def broadcast_variables(variables, root_rank, process_set=None):
    """Assigns root_rank's value of every variable (tf.Variable or Keras variable) to it on
    every rank; the broadcasts run concurrently (one tf.function, the variables captured).
    Every rank passes the same variables in the same order."""
    if process_set is not None:
        raise NotImplementedError("zen has no process sets other than the global one")
    variables = list(variables)
    if not variables:
        return None
    if tf.executing_eagerly():
        def group():
            _broadcast_group(variables, root_rank)
        tf.function(group, autograph=False)()
        return None
    return _broadcast_group(variables, root_rank)
