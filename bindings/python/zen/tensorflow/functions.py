"""broadcast_variables and broadcast_object, as horovod.tensorflow.functions."""

import pickle

import numpy as np
import tensorflow as tf

from zen.common import basics
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


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """root_rank's picklable object on every rank (of process_set; root_rank is the root's
    rank in the job), eagerly: its length, then its pickled bytes. session (TensorFlow 1) is
    not supported."""
    if session is not None or not tf.executing_eagerly():
        raise NotImplementedError("zen.tensorflow.broadcast_object runs eagerly only")
    process_set_id(process_set, "broadcast_object")
    # Not named after the type as Horovod does: the other ranks often pass None.
    name = "object." + (name or "noname")
    root = basics.rank() == root_rank
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8) if root else None
    length = broadcast(tf.constant([payload.size if root else 0], dtype=tf.int64), root_rank,
                       name=name + ".sz", process_set=process_set)
    if not root:
        payload = np.zeros(int(length.numpy()[0]), dtype=np.uint8)
    received = broadcast(tf.constant(payload), root_rank, name=name + ".t",
                         process_set=process_set)
    return obj if root else pickle.loads(received.numpy().tobytes())
