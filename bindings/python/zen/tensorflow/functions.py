"""broadcast_variables, broadcast_ (in place), broadcast_object, broadcast_object_fn and
allgather_object, as horovod.tensorflow's: eagerly, in a tf.function (the variables), or in
a TensorFlow 1 graph and session (tf.compat.v1)."""

import contextlib
import pickle

import numpy as np
import tensorflow as tf

from zen.common import basics
from zen.common import objects
from zen.common.process_sets import global_process_set, process_set_id, set_size
from zen.tensorflow.mpi_ops import allgather, broadcast, group_prefix


def _broadcast_group(variables, root_rank, process_set):
    prefix = group_prefix("variables")
    return tf.group(*[v.assign(broadcast(v, root_rank, name="%s.%d" % (prefix, i),
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
        return None if tf.executing_eagerly() else tf.no_op()
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
    prefix = "broadcast_." + (name or group_prefix("noname"))
    for i, v in enumerate(variables):
        v.assign(broadcast(v, root_rank, name="%s.%d" % (prefix, i), process_set=process_set))
    return variables


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """root_rank's picklable object on every rank (of process_set; root_rank is the root's
    rank in the job): its length, then its pickled bytes. Eagerly; in graph mode (TensorFlow
    1) the broadcasts are added to session's graph and run in it (default: the default
    session), as Horovod's."""
    process_set_id(process_set, "broadcast_object")
    name = objects.op_name(name)
    run, graph = _runner("broadcast_object", session)
    with graph:
        return _broadcast_pickled(
            obj, root_rank,
            lambda length: run(broadcast(tf.constant(length, dtype=tf.int64), root_rank,
                                         name=name + ".sz", process_set=process_set)),
            lambda payload: run(broadcast(tf.constant(payload), root_rank, name=name + ".t",
                                          process_set=process_set)))


def _broadcast_pickled(obj, root_rank, send_length, send_payload):
    """root_rank's obj, pickled: send_length([n]) and send_payload(uint8 array) run the two
    broadcasts (the root's values, zeros elsewhere) and return what arrived, as numpy."""
    root = basics.rank() == root_rank
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8) if root else None
    length = send_length([payload.size if root else 0])
    if not root:
        payload = np.zeros(int(length[0]), dtype=np.uint8)
    received = send_payload(payload)
    return obj if root else pickle.loads(received.tobytes())


def _runner(what, session):
    """(run: a tensor's value as numpy, the context to build the tensors in): eagerly
    without a session; else in session (a tf.compat.v1.Session) or the default session."""
    if session is None and tf.executing_eagerly():
        return (lambda t: t.numpy()), contextlib.nullcontext()
    session = session or tf.compat.v1.get_default_session()
    if session is None:
        raise ValueError("zen.tensorflow.%s in graph mode runs in a session: pass session= or "
                         "call it under `with tf.compat.v1.Session() as sess:`" % what)
    return session.run, session.graph.as_default()


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """A function fn(obj) that returns root_rank's obj on every rank (of process_set), as
    Horovod's: each call is one broadcast_object under this name (default
    "broadcast_object_fn"), eagerly, or, with a session or in graph mode, two broadcasts
    built once in the session's graph (fed through placeholders) and run in it."""
    name = name or "broadcast_object_fn"
    process_set_id(process_set, "broadcast_object_fn")
    if session is None and tf.executing_eagerly():
        return lambda obj: broadcast_object(obj, root_rank, name=name, process_set=process_set)
    run, graph = _runner("broadcast_object_fn", session)
    with graph:
        length_in = tf.compat.v1.placeholder(tf.int64, [1], name="bcast_object_size")
        length = broadcast(length_in, root_rank, name=name + ".sz", process_set=process_set)
        data_in = tf.compat.v1.placeholder(tf.uint8, [None], name="bcast_object_data")
        data = broadcast(data_in, root_rank, name=name + ".t", process_set=process_set)
    return lambda obj: _broadcast_pickled(obj, root_rank, lambda n: run(length, {length_in: n}),
                                          lambda payload: run(data, {data_in: payload}))


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Every rank's picklable object (of process_set's ranks), as a list in rank order: the
    lengths, then the pickled bytes, gathered. Eagerly, or in session's graph (default: the
    default session) in graph mode, as broadcast_object."""
    process_set_id(process_set, "allgather_object")
    name = objects.op_name(name)
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    run, graph = _runner("allgather_object", session)
    with graph:
        sizes = run(allgather(tf.constant([payload.size], dtype=tf.int64), name=name + ".sz",
                              process_set=process_set))
        gathered = run(allgather(tf.constant(payload), name=name + ".t",
                                 process_set=process_set))
    out = objects.split_gathered(gathered.tobytes(), sizes.tolist())
    assert len(out) == set_size(process_set)
    return out
