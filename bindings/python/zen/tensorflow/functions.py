"""broadcast_variables, as horovod.tensorflow.functions."""

import tensorflow as tf

from zen.common.process_sets import global_process_set, process_set_id
from zen.tensorflow.mpi_ops import broadcast


def _broadcast_group(variables, root_rank, process_set):
    return tf.group(*[v.assign(broadcast(v, root_rank, name="variables.%d" % i,
                                         process_set=process_set))
                      for i, v in enumerate(variables)])


def broadcast_variables(variables, root_rank, process_set=global_process_set):
    """Assigns root_rank's value of every variable (tf.Variable or Keras variable) to it on
    every rank (of process_set; root_rank is the root's rank in the job); the broadcasts run concurrently (one
    tf.function, the variables captured). Every rank passes the same variables in the same
    order."""
    process_set_id(process_set, "broadcast_variables")
    variables = list(variables)
    if not variables:
        return None
    if tf.executing_eagerly():
        def group():
            _broadcast_group(variables, root_rank, process_set)
        tf.function(group, autograph=False)()
        return None
    return _broadcast_group(variables, root_rank, process_set)
