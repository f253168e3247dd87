"""What every rank runs in test_tensorflow.py's graph jobs: zen.tensorflow's TensorFlow 1 API
(tf.compat.v1 graphs and sessions, eager execution disabled in this process):
broadcast_global_variables, BroadcastGlobalVariablesHook in a MonitoredTrainingSession,
broadcast_object_fn(session=), broadcast_object / allgather_object in the default session,
zen.tensorflow.keras.broadcast_global_variables and DistributedOptimizer of a TensorFlow 1
optimizer (with backward_passes_per_step and op=Adasum against hand-computed values, with
Compression.topk against dgc_reference.py, in two graphs, and with clip_norm; two of them in one
session.run),
zen.tensorflow.elastic.TensorFlowState in a session and run recovering from a failure there
(also with Compression.topk's residuals).

    tools/zenrun -np N .venv-tf/bin/python tf_graph.py [CHECK ...]

Prints `ZENTEST {"check": ..., "ok": ..., "error": ...}` per check and rank (rank_report.py).
Every rank's variables start from values of its own; rank `root`'s must reach every rank.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from adasum_reference import adasum_tree, assert_close  # noqa: E402
from dgc_reference import (BIAS, MIN_SIZE, SHAPE, clip_factor, dgc_reference,  # noqa: E402
                           step_grads)
import elastic_steps  # noqa: E402
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
    expect_raises(ValueError, lambda: hvd.DistributedOptimizer(
        tf.compat.v1.train.MomentumOptimizer(1.0, 0.9),
        compression=hvd.Compression.topk(0.5, momentum=0.9)), "momentum=0")
    expect_raises(ValueError, lambda: hvd.DistributedOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(1.0), op=hvd.Adasum,
        average_aggregated_gradients=True), "average_aggregated_gradients")
    # horovod.tensorflow's order: use_locking third, as TF1 scripts pass it.
    with tf.Graph().as_default():
        locking = hvd.DistributedOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(1.0), "Locked", True)
    assert locking._use_locking is True and locking.get_name() == "Locked"


@check
def two_optimizers_in_one_session_run():
    """Two DistributedOptimizers of the same class (a GAN's generator and discriminator), each
    training its own variable, run in one session.run three times: each step moves each
    variable by the average of the ranks' gradients, 2 (r + 1) v, so v becomes
    v0 (1 - 0.1 (size + 1))^3. Their gradient lists run at once, so their names must differ
    (they were both DistributedOptimizer.GradientDescentOptimizer.0: "already in flight")."""
    rank, size = hvd.rank(), hvd.size()
    with tf.Graph().as_default():
        a = tf.compat.v1.Variable(np.array([1, 2], np.float32), name="a")
        b = tf.compat.v1.Variable(np.array([3], np.float32), name="b")
        trains = []
        for v in (a, b):
            loss = tf.reduce_sum(v * v) * (rank + 1)
            optimizer = hvd.DistributedOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.1))
            trains.append(optimizer.minimize(loss, var_list=[v]))
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for _ in range(3):
                session.run(trains)
            got_a, got_b = session.run([a, b])
    factor = (1 - 0.1 * (size + 1)) ** 3
    assert np.allclose(got_a, np.array([1, 2]) * factor), got_a
    assert np.allclose(got_b, np.array([3]) * factor), got_b


@check
def topk_of_a_tf1_optimizer():
    """compression=Compression.topk(0.02) in a Session, the same optimizer in two graphs
    (each its own residuals): compute_gradients returns DGC's update of W (dgc_reference's
    dense re-computation), the plain average of b (below min_size), and nothing is lost:
    size * (sum of W's updates) + every rank's residual = every rank's gradients."""
    size, rank, steps, ratio = hvd.size(), hvd.rank(), 4, 0.02
    compression = hvd.Compression.topk(ratio, min_size=MIN_SIZE)
    optimizer = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0),
                                         compression=compression)
    want, want_residuals = dgc_reference(size, steps, ratio)
    total = sum(step_grads(r, s)[0] for r in range(size) for s in range(steps))
    for _ in range(2):
        with tf.Graph().as_default():
            g = tf.compat.v1.placeholder(tf.float64, SHAPE)
            h = tf.compat.v1.placeholder(tf.float64, [BIAS])
            w = tf.compat.v1.Variable(np.zeros(SHAPE), name="w")
            b = tf.compat.v1.Variable(np.zeros(BIAS), name="b")
            grads_and_vars = optimizer.compute_gradients(
                tf.reduce_sum(w * g) + tf.reduce_sum(b * h), [w, b])
            train = optimizer.apply_gradients(grads_and_vars)
            residual = compression.residual("DistributedOptimizer.GradientDescentOptimizer.0")
            residuals = hvd.allreduce(residual.read_value(), op=hvd.Sum, name="topk.residuals")
            with tf.compat.v1.Session() as session:
                session.run([tf.compat.v1.global_variables_initializer(),
                             tf.compat.v1.local_variables_initializer()])
                for step in range(steps):
                    gw, gh = step_grads(rank, step)
                    (uw, ub), _ = session.run([[gv[0] for gv in grads_and_vars], train],
                                              {g: gw, h: gh})
                    assert np.abs(uw - want[step]).max() < 1e-12, step
                    mean_h = sum(step_grads(r, step)[1] for r in range(size)) / size
                    assert np.abs(ub - mean_h).max() < 1e-12, step
                got_w, got_residual, got_residuals = session.run([w, residual, residuals])
        assert np.abs(got_w + sum(want)).max() < 1e-10, "w is not minus the sum of updates"
        assert np.abs(got_residual - want_residuals[rank]).max() < 1e-12
        assert np.abs(size * -got_w + got_residuals.reshape(SHAPE) - total).max() < 1e-10


@check
def topk_clips_in_a_tf1_graph():
    """Compression.topk(clip_norm=...) in a Session: each rank's gradients of a step are
    clipped together before the residual takes them (W's updates: dgc_reference with
    clip_norm; b's: the average of the clipped ones)."""
    size, rank, steps, ratio = hvd.size(), hvd.rank(), 3, 0.05
    clip_norm = 40 * size ** 0.5  # a rank's gradient norm is ~45
    optimizer = hvd.DistributedOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(1.0),
        compression=hvd.Compression.topk(ratio, min_size=MIN_SIZE, clip_norm=clip_norm))
    want, _ = dgc_reference(size, steps, ratio, clip_norm=clip_norm)
    with tf.Graph().as_default():
        g = tf.compat.v1.placeholder(tf.float64, SHAPE)
        h = tf.compat.v1.placeholder(tf.float64, [BIAS])
        w = tf.compat.v1.Variable(np.zeros(SHAPE), name="w")
        b = tf.compat.v1.Variable(np.zeros(BIAS), name="b")
        grads = [gv[0] for gv in optimizer.compute_gradients(
            tf.reduce_sum(w * g) + tf.reduce_sum(b * h), [w, b])]
        with tf.compat.v1.Session() as session:
            session.run([tf.compat.v1.global_variables_initializer(),
                         tf.compat.v1.local_variables_initializer()])
            for step in range(steps):
                gw, gh = step_grads(rank, step)
                uw, ub = session.run(grads, {g: gw, h: gh})
                factors = [clip_factor(size, r, step, 1, clip_norm) for r in range(size)]
                assert max(factors) < 0.95, factors
                assert np.abs(uw - want[step]).max() < 1e-12, step
                mean_h = sum(step_grads(r, step)[1] * f for r, f in enumerate(factors)) / size
                assert np.abs(ub - mean_h).max() < 1e-12, step


def pass_grad(rank, step, dtype=np.float32):
    """Rank's gradient of w in a step (not parallel across ranks: Adasum has something to
    do)."""
    return (np.arange(3) * (step + 1) + rank + 1).astype(dtype)


def pass_rows(rank, step):
    """The embedding rows rank's step gathers (distinct)."""
    return np.array([rank % 2, 2 + step % 2], np.int32)


@check
def backward_passes_in_a_session():
    """DistributedOptimizer(GradientDescentOptimizer(1.0), backward_passes_per_step=2) in a
    tf.compat.v1 Session: w moves on every second step only, by the average over the ranks
    of the two steps' gradients summed (halved with average_aggregated_gradients); an
    embedding's (tf.IndexedSlices gradients: Zen's sparse allreduce; with sparse_as_dense
    dense ones, as Horovod's, whose helper takes embeddings only so) likewise; global_step
    counts every step."""
    rank, size = hvd.rank(), hvd.size()
    for average, dense in ((False, False), (True, False), (False, True)):
        with tf.Graph().as_default():
            x = tf.compat.v1.placeholder(tf.float32, [3])
            rows = tf.compat.v1.placeholder(tf.int32, [2])
            w = tf.compat.v1.Variable(np.ones(3, np.float32), name="w")
            emb = tf.compat.v1.Variable(np.ones((4, 2), np.float32), name="emb")
            global_step = tf.compat.v1.train.get_or_create_global_step()
            loss = tf.reduce_sum(w * x) + tf.reduce_sum(tf.gather(emb, rows))
            optimizer = hvd.DistributedOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(1.0), backward_passes_per_step=2,
                average_aggregated_gradients=average, sparse_as_dense=dense)
            train = optimizer.minimize(loss, global_step=global_step)
            want_w, want_emb = np.ones(3), np.ones((4, 2))
            window_w, window_emb = np.zeros(3), np.zeros((4, 2))
            with tf.compat.v1.Session() as session:
                session.run([tf.compat.v1.global_variables_initializer(),
                             tf.compat.v1.local_variables_initializer()])
                for step in range(4):
                    session.run(train, {x: pass_grad(rank, step), rows: pass_rows(rank, step)})
                    for r in range(size):
                        window_w += pass_grad(r, step) / size
                        np.add.at(window_emb, pass_rows(r, step), 1.0 / size)
                    if step % 2 == 1:
                        want_w -= window_w / (2 if average else 1)
                        want_emb -= window_emb / (2 if average else 1)
                        window_w[:], window_emb[:] = 0, 0
                    got_w, got_emb, got_step = session.run([w, emb, global_step])
                    assert np.allclose(got_w, want_w), (average, step, got_w, want_w)
                    assert np.allclose(got_emb, want_emb), (average, step, got_emb, want_emb)
                    assert got_step == step + 1, (step, got_step)


@check
def backward_passes_in_a_monitored_session():
    """backward_passes_per_step=3 of Adam in a MonitoredTrainingSession with
    BroadcastGlobalVariablesHook (Adam's slots are made inside the apply's cond; the
    aggregation's state is initialized as local variables): the variables stay at root's on
    the first two steps, move on the third, the same on every rank."""
    rank = hvd.rank()
    with tf.Graph().as_default():
        w = tf.compat.v1.Variable(np.ones(3, np.float32) * (rank + 1), name="w")
        loss = tf.reduce_sum(w * pass_grad(rank, 0))
        global_step = tf.compat.v1.train.get_or_create_global_step()
        train = hvd.DistributedOptimizer(tf.compat.v1.train.AdamOptimizer(0.1),
                                         backward_passes_per_step=3).minimize(loss, global_step)
        gathered = hvd.allgather(tf.reshape(w, [1, 3]))
        hooks = [hvd.BroadcastGlobalVariablesHook(0)]
        with tf.compat.v1.train.MonitoredTrainingSession(hooks=hooks) as session:
            for step in range(3):
                session.run(train)
                got = session.run(gathered)
                assert (got == got[0]).all(), got
                assert np.array_equal(got[0], np.ones(3)) == (step < 2), (step, got)
            assert session.run(global_step) == 3


@check
def backward_passes_in_two_graphs_and_twice_in_one():
    """One DistributedOptimizer(backward_passes_per_step=2) in two graphs: each graph has its
    own window (w moves on the second step by the sum of both steps' averages); a second
    compute_gradients in one graph would share the window: ValueError."""
    rank, size = hvd.rank(), hvd.size()
    optimizer = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0),
                                         backward_passes_per_step=2)
    for _ in range(2):
        with tf.Graph().as_default():
            x = tf.compat.v1.placeholder(tf.float32, [3])
            w = tf.compat.v1.Variable(np.ones(3, np.float32), name="w")
            train = optimizer.minimize(tf.reduce_sum(w * x))
            with tf.compat.v1.Session() as session:
                session.run([tf.compat.v1.global_variables_initializer(),
                             tf.compat.v1.local_variables_initializer()])
                for step in range(2):
                    session.run(train, {x: pass_grad(rank, step)})
                got = session.run(w)
            expect_raises(ValueError, lambda: optimizer.minimize(tf.reduce_sum(w * x)),
                          "twice in one graph")
        want = 1 - sum(pass_grad(r, s) for r in range(size) for s in range(2)) / size
        assert np.allclose(got, want), (got, want)


@check
def adasum_of_a_tf1_optimizer():
    """DistributedOptimizer(GradientDescentOptimizer(lr), op=Adasum) in a Session, float64:
    every rank steps by -lr times its own gradients; on every backward_passes_per_step-th step
    the variables become the window's start plus adasum_tree (adasum_reference.py) of the
    ranks' deltas since it, per variable, on every rank; the steps before it are the local
    ones. On a world that is not a power of two the daemon's error reaches every rank from
    the session's run. A second minimize in one graph would share the window: ValueError."""
    rank, size = hvd.rank(), hvd.size()
    lr = 0.25  # exact in float32, which GradientDescentOptimizer casts it through

    def v_grad(r, step):
        return np.array([r + 1.0, -(step + 1.0) * (r + 2)])
    for passes in (1, 2):
        with tf.Graph().as_default():
            x = tf.compat.v1.placeholder(tf.float64, [3])
            y = tf.compat.v1.placeholder(tf.float64, [2])
            w = tf.compat.v1.Variable(np.ones(3), name="w")
            v = tf.compat.v1.Variable(np.zeros(2), name="v")
            loss = tf.reduce_sum(w * x) + tf.reduce_sum(v * y)
            optimizer = hvd.DistributedOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(lr), op=hvd.Adasum,
                backward_passes_per_step=passes)
            train = optimizer.minimize(loss)
            expect_raises(ValueError, lambda: optimizer.minimize(loss), "twice in one graph")
            with tf.compat.v1.Session() as session:
                session.run([tf.compat.v1.global_variables_initializer(),
                             tf.compat.v1.local_variables_initializer()])
                feed = lambda s: {x: pass_grad(rank, s, np.float64), y: v_grad(rank, s)}  # noqa
                if size & (size - 1):
                    expect_raises(tf.errors.OpError, lambda: session.run(train, feed(0)),
                                  "power-of-two")
                    return
                start = [np.ones(3), np.zeros(2)]
                local = [[s.copy() for s in start] for _ in range(size)]
                for step in range(2 * passes):
                    session.run(train, feed(step))
                    for r in range(size):
                        local[r][0] -= lr * pass_grad(r, step, np.float64)
                        local[r][1] -= lr * v_grad(r, step)
                    want = local[rank]
                    if step % passes == passes - 1:
                        want = [s + adasum_tree([local[r][i] - s for r in range(size)])
                                for i, s in enumerate(start)]
                        start = want
                        local = [[s.copy() for s in start] for _ in range(size)]
                    for got, expected, what in zip(session.run([w, v]), want, "wv"):
                        assert_close(got, expected, 1e-12, "%s passes=%d step %d"
                                     % (what, passes, step))


@check
def elastic_state_with_a_session():
    """zen.tensorflow.elastic.TensorFlowState in graph mode: the default session's global
    variables by default; restore undoes what changed since the last commit, sync makes rank
    0's variables and objects every rank's (then saved); save, restore and sync build no ops
    after the constructor's."""
    rank = hvd.rank()
    with tf.Graph().as_default() as graph, tf.compat.v1.Session() as session:
        variables = rank_variables(rank)
        bump = tf.group(tf.compat.v1.assign_add(variables[0], tf.ones([2, 3])),
                        tf.compat.v1.assign_add(variables[1], 1))
        session.run(tf.compat.v1.global_variables_initializer())
        state = hvd.elastic.TensorFlowState(epoch=rank, seen=[rank])
        assert [v.name for v in state.variables] == [v.name for v in variables]
        ops = len(graph.get_operations())
        session.run(bump)
        state.epoch, state.seen = 9, state.seen + [9]
        state.restore()
        assert_values(session.run(variables), rank_values(rank))
        assert state.epoch == rank and state.seen == [rank]
        session.run(bump)
        state.commit()
        session.run(bump)
        state.restore()
        assert_values(session.run(variables), [v + 1 for v in rank_values(rank)])
        state.sync()
        assert_values(session.run(variables), [v + 1 for v in rank_values(0)])
        assert state.epoch == 0 and state.seen == [0]
        session.run(bump)
        state.restore()
        assert_values(session.run(variables), [v + 1 for v in rank_values(0)])
        assert len(graph.get_operations()) == ops


def run_eight_steps(state, fail, fail_at, run_step):
    """Steps state.step..7, committing after every fourth, failing once before fail_at
    (elastic_steps.run_failing_once). Whether it failed (then steps were redone)."""
    steps_run = elastic_steps.run_failing_once(hvd.elastic.run, state, 8, 4, fail_at, fail,
                                               lambda state: run_step(state.step))
    return len(steps_run) > 8


@check
def elastic_run_with_a_session():
    """zen.tensorflow.elastic.run around session.run: a failed allreduce in the graph (a
    shape mismatch: every rank's fails) becomes HorovodInternalError; the state restores the
    last commit (step 4), Zen resets, the sync runs the session's ops again, steps 4 and 5
    are redone; w ends as without the failure, the same on every rank."""
    rank, size = hvd.rank(), hvd.size()

    def train(fail_at):
        with tf.Graph().as_default(), tf.compat.v1.Session() as session:
            w = tf.compat.v1.Variable(np.full(3, rank, np.float64), name="w")
            x = tf.compat.v1.placeholder(tf.float64, [3])
            update = w.assign_sub(0.5 * hvd.allreduce(x, op=hvd.Sum, name="graph.el.g"))
            fail = hvd.allreduce(tf.zeros([3 if rank == 1 else 2], tf.float64),
                                 name="graph.el.fail")
            gathered = hvd.allgather(tf.reshape(w, [1, 3]), name="graph.el.w")
            session.run(tf.compat.v1.global_variables_initializer())
            state = hvd.elastic.TensorFlowState([w], session=session, step=0)
            failed = run_eight_steps(state, lambda: session.run(fail), fail_at, lambda step:
                                     session.run(update, {x: pass_grad(rank, step, np.float64)}))
            return session.run(gathered), failed

    plain, failed = train(-1)
    assert not failed
    got, failed = train(6)
    assert failed
    assert np.array_equal(got, plain) and (got == got[0]).all(), (got, plain)
    want = -0.5 * sum(pass_grad(r, s, np.float64) for r in range(size) for s in range(8))
    assert np.allclose(got[0], want), (got[0], want)


@check
def elastic_run_restores_topk_residuals():
    """TensorFlowState(session=) saves and restores a DistributedOptimizer's Compression.topk
    residuals (per rank) with each commit: after a failure at step 6 the steps from the
    commit at step 4 run again from the residuals of step 4, so W ends as without the failure
    (with the failed step's residuals the redone steps would send what they had left a
    second time)."""
    rank = hvd.rank()

    def train(fail_at):
        compression = hvd.Compression.topk(0.05, min_size=MIN_SIZE)
        with tf.Graph().as_default(), tf.compat.v1.Session() as session:
            optimizer = hvd.DistributedOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(1.0), compression=compression)
            g = tf.compat.v1.placeholder(tf.float64, SHAPE)
            h = tf.compat.v1.placeholder(tf.float64, [BIAS])
            w = tf.compat.v1.Variable(np.zeros(SHAPE), name="w")
            b = tf.compat.v1.Variable(np.zeros(BIAS), name="b")
            train_op = optimizer.minimize(tf.reduce_sum(w * g) + tf.reduce_sum(b * h))
            fail = hvd.allreduce(tf.zeros([3 if rank == 1 else 2], tf.float64),
                                 name="graph.topk.fail")
            gathered = hvd.allgather(tf.reshape(w, [1, -1]), name="graph.topk.w")
            session.run([tf.compat.v1.global_variables_initializer(),
                         tf.compat.v1.local_variables_initializer()])
            state = hvd.elastic.TensorFlowState([w, b], session=session, step=0)

            def run_step(step):
                gw, gh = step_grads(rank, step)
                session.run(train_op, {g: gw, h: gh})

            failed = run_eight_steps(state, lambda: session.run(fail), fail_at, run_step)
            return session.run(gathered), failed

    plain, failed = train(-1)
    assert not failed
    got, failed = train(6)
    assert failed
    assert np.abs(got - plain).max() < 1e-12 and (got == got[0]).all(), \
        np.abs(got - plain).max()
    want, _ = dgc_reference(hvd.size(), 8, 0.05)
    assert np.abs(got[0] + sum(want).reshape(-1)).max() < 1e-10


def barrier():
    """hvd.barrier() is an op here: run it in a session of its own."""
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        session.run(hvd.barrier())


if __name__ == "__main__":
    sys.exit(run_checks(hvd, CHECKS, sys.argv[1:], barrier))
