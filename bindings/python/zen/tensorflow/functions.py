"""broadcast_variables, broadcast_ (in place), broadcast_object, broadcast_object_fn and
allgather_object, as horovod.tensorflow's (the objects eagerly: TensorFlow 1 sessions are not
supported)."""

import pickle

import numpy as np
import tensorflow as tf

from zen.common import basics
from zen.common import objects
from zen.common.process_sets import global_process_set, process_set_id, set_size
from zen.tensorflow.mpi_ops import allgather, broadcast


def _broadcast_group(variables, root_rank, process_set):
    return tf.group(*[v.assign(broadcast(v, root_rank, name="variables.%d" % i,
                                         process_set=process_set))
                      for i, v in enumerate(variables)])


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns root_rank's value of every variable (tf.Variable or Keras variable) to it on
    every rank (of process_set; root_rank is the root's rank in the job); the broadcasts run
    concurrently (one tf.function, the variables captured). Every rank passes the same
    variables in the same order. inplace (Horovod's memory saving) changes nothing here: the
    result is assigned either way."""
    del inplace
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


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """Horovod's in-place broadcast: every variable takes root_rank's value (of process_set;
    root_rank is the root's rank in the job); returns the variables. Eagerly or in a
    tf.function."""
    variables = list(variables)
    prefix = "broadcast_." + (name or "noname")
    for i, v in enumerate(variables):
        v.assign(broadcast(v, root_rank, name="%s.%d" % (prefix, i), process_set=process_set))
    return variables


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """root_rank's picklable object on every rank (of process_set; root_rank is the root's
    rank in the job), eagerly: its length, then its pickled bytes. session (TensorFlow 1) is
    not supported."""
    _check_eager("broadcast_object", session)
    process_set_id(process_set, "broadcast_object")
    name = objects.op_name(name)
    root = basics.rank() == root_rank
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8) if root else None
    length = broadcast(tf.constant([payload.size if root else 0], dtype=tf.int64), root_rank,
                       name=name + ".sz", process_set=process_set)
    if not root:
        payload = np.zeros(int(length.numpy()[0]), dtype=np.uint8)
    received = broadcast(tf.constant(payload), root_rank, name=name + ".t",
                         process_set=process_set)
    return obj if root else pickle.loads(received.numpy().tobytes())


def _check_eager(what, session):
    if session is not None or not tf.executing_eagerly():
        raise NotImplementedError("zen.tensorflow.%s runs eagerly only (no TensorFlow 1 "
                                  "session)" % what)


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """A function fn(obj) that returns root_rank's obj on every rank (of process_set), as
    Horovod's, whose session-bound graph it stands in for: each call is one broadcast_object
    under this name (default "broadcast_object_fn"), eagerly."""
    _check_eager("broadcast_object_fn", session)
    name = name or "broadcast_object_fn"

    def bcast(obj):
        return broadcast_object(obj, root_rank, name=name, process_set=process_set)
    return bcast


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Every rank's picklable object (of process_set's ranks), as a list in rank order,
    eagerly: the lengths, then the pickled bytes, gathered."""
    _check_eager("allgather_object", session)
    process_set_id(process_set, "allgather_object")
    name = objects.op_name(name)
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    sizes = allgather(tf.constant([payload.size], dtype=tf.int64), name=name + ".sz",
                      process_set=process_set)
    gathered = allgather(tf.constant(payload), name=name + ".t", process_set=process_set)
    out = objects.split_gathered(gathered.numpy().tobytes(), sizes.numpy().tolist())
    assert len(out) == set_size(process_set)
    return out
