"""What every rank runs in test_tensorflow.py's graph jobs: zen.tensorflow's TensorFlow 1 API
(tf.compat.v1 graphs and sessions, eager execution disabled in this process):
broadcast_global_variables, BroadcastGlobalVariablesHook in a MonitoredTrainingSession,
broadcast_object_fn(session=), broadcast_object / allgather_object in the default session,
zen.tensorflow.keras.broadcast_global_variables and DistributedOptimizer of a TensorFlow 1
optimizer.

    tools/zenrun -np N .venv-tf/bin/python tf_graph.py [CHECK ...]

Prints `ZENTEST {"check": ..., "ok": ..., "error": ...}` per check and rank (rank_report.py).
Every rank's variables start from values of its own; rank `root`'s must reach every rank.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from rank_report import Checks, add_checkout_package, expect_raises, run_checks  # noqa: E402

add_checkout_package()

import zen.tensorflow as hvd  # noqa: E402
import zen.tensorflow.keras as hvd_keras  # noqa: E402

tf.compat.v1.disable_eager_execution()

CHECKS = Checks()
check = CHECKS.check


def rank_values(rank):
    """The initial values of rank's variables."""
    return [np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * rank,
            np.array(rank * 7, dtype=np.int64)]


def rank_variables(rank):
    """Global variables of the default graph that start from rank_values(rank)."""
    w, step = rank_values(rank)
    return [tf.compat.v1.Variable(w, name="w"), tf.compat.v1.Variable(step, name="step")]


def assert_values(got, want):
    for g, w in zip(got, want):
        assert np.array_equal(g, w) and np.asarray(g).dtype == w.dtype, (got, want)


@check
def broadcast_global_variables():
    """The op takes root's values of every global variable to every rank, in a session."""
    rank, size = hvd.rank(), hvd.size()
    for root in sorted({0, size - 1}):
        with tf.Graph().as_default():
            variables = rank_variables(rank)
            bcast = hvd.broadcast_global_variables(root)
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                session.run(bcast)
                assert_values(session.run(variables), rank_values(root))


@check
def broadcast_hook_in_monitored_session():
    """BroadcastGlobalVariablesHook(root): after MonitoredTrainingSession initialized the
    variables, every rank has root's; a training step after it starts from them too."""
    rank, size = hvd.rank(), hvd.size()
    root = size - 1
    hook = hvd.BroadcastGlobalVariablesHook(root)
    for _ in range(2):  # the hook is reused with a new graph: its op is built again
        with tf.Graph().as_default():
            variables = rank_variables(rank)
            step = tf.compat.v1.assign_add(variables[1], 1)
            with tf.compat.v1.train.MonitoredTrainingSession(hooks=[hook]) as session:
                assert_values(session.run(variables), rank_values(root))
                assert int(session.run(step)) == root * 7 + 1


@check
def broadcast_object_fn_with_session():
    """broadcast_object_fn(session=): root's object on every rank, call after call; the ops
    are built once (fed by placeholders)."""
    rank, size = hvd.rank(), hvd.size()
    root = size - 1
    with tf.Graph().as_default() as graph, tf.compat.v1.Session() as session:
        bcast = hvd.broadcast_object_fn(root_rank=root, session=session, name="graph.fn")
        ops = len(graph.get_operations())
        for step in range(3):
            mine = {"rank": rank, "step": step, "pad": "x" * (rank + step)}
            got = bcast(mine)
            assert got == {"rank": root, "step": step, "pad": "x" * (root + step)}, got
        assert len(graph.get_operations()) == ops


@check
def objects_in_the_default_session():
    """broadcast_object and allgather_object in graph mode run in the default session; with
    none they say so."""
    rank, size = hvd.rank(), hvd.size()
    with tf.Graph().as_default(), tf.compat.v1.Session():
        assert hvd.broadcast_object(("obj", rank), root_rank=0, name="graph.obj") == ("obj", 0)
        got = hvd.allgather_object({"r": rank, "pad": [0] * rank}, name="graph.gather")
        assert got == [{"r": r, "pad": [0] * r} for r in range(size)], got
        assert hvd.broadcast_object_fn(root_rank=0)(rank) == 0
    expect_raises(ValueError, lambda: hvd.broadcast_object(1), "session")


@check
def keras_broadcast_global_variables():
    """zen.tensorflow.keras.broadcast_global_variables runs the broadcast in the default
    session; with none it refuses (Keras 3 has no session)."""
    rank = hvd.rank()
    with tf.Graph().as_default():
        variables = rank_variables(rank)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            hvd_keras.broadcast_global_variables(0)
            assert_values(session.run(variables), rank_values(0))
        expect_raises(RuntimeError, lambda: hvd_keras.broadcast_global_variables(0),
                      "default TensorFlow 1 session")


@check
def distributed_optimizer_of_a_tf1_optimizer():
    """DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0)).minimize: a step
    moves w by the average of every rank's gradient x_r, the register_local_var variable u
    by this rank's own 2 x_r divided by the size (scale_local_gradients)."""
    rank, size = hvd.rank(), hvd.size()

    def x(r):
        return np.arange(3, dtype=np.float32) + r + 1
    with tf.Graph().as_default():
        w = tf.compat.v1.Variable(np.ones(3, np.float32), name="w")
        u = tf.compat.v1.Variable(np.ones(3, np.float32), name="u")
        loss = tf.reduce_sum(w * x(rank)) + tf.reduce_sum(u * 2 * x(rank))
        optimizer = hvd.DistributedOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(1.0))
        optimizer.register_local_var(u)
        train = optimizer.minimize(loss)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(train)
            got_w, got_u = session.run([w, u])
    assert np.allclose(got_w, 1 - sum(x(r) for r in range(size)) / size), got_w
    assert np.allclose(got_u, 1 - 2 * x(rank) / size), got_u
    expect_raises(NotImplementedError, lambda: hvd.DistributedOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(1.0), backward_passes_per_step=2),
        "TensorFlow 1 optimizer")
    # horovod.tensorflow's order: use_locking third, as TF1 scripts pass it.
    with tf.Graph().as_default():
        locking = hvd.DistributedOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(1.0), "Locked", True)
    assert locking._use_locking is True and locking.get_name() == "Locked"


def barrier():
    """hvd.barrier() is an op here: run it in a session of its own."""
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        session.run(hvd.barrier())


if __name__ == "__main__":
    sys.exit(run_checks(hvd, CHECKS, sys.argv[1:], barrier))
