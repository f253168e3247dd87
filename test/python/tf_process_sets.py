"""What every rank runs in test_tensorflow.py's process-set job: zen.tensorflow's process sets
(Horovod's), check by check, on 4 ranks.

    tools/zenrun -np 4 .venv-tf/bin/python tf_process_sets.py [CHECK ...]

init(process_sets=[A, B]) with A = {0, 1} and B = {2, 3}; each rank runs the collectives of
its own set (the two sets under the same names at once, eagerly and inside one tf.function),
with a global collective between, against numpy re-computations from every member's known
input; gradients through a set's ops; a set added and removed at run time ({1, 2, 3});
DistributedGradientTape and the Keras DistributedOptimizer over A (members against numpy SGD
on A's averaged gradient, ranks 2 and 3 against their local SGD); the refusals. Prints one
line per check and rank: `ZENTEST {"check": ..., "ok": ..., "error": ...}`.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from process_set_fixtures import data, process_sets  # noqa: E402
from rank_report import Checks, add_checkout_package, expect_raises, run_checks  # noqa: E402

add_checkout_package()

import keras  # noqa: E402

import zen.tensorflow as hvd  # noqa: E402

CHECKS = Checks()
check = CHECKS.check
A, B, mine = process_sets(hvd)


def assert_equal(got, want):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    assert np.array_equal(got, want), (got, want)


@check
def sets_after_init():
    assert A.process_set_id == 1 and B.process_set_id == 2, (A, B)
    assert B.ranks == [2, 3] and hvd.global_process_set.ranks == [0, 1, 2, 3]
    own, other = mine()
    assert own.included() and not other.included() and own.rank() == hvd.rank() % 2


@check
def placement_ops_of_a_set():
    """size_op and process_set_included_op of a set, eagerly and in a tf.function: its size
    on every rank, 1 on its members and 0 elsewhere."""
    own, other = mine()

    def ops():
        return [hvd.size_op(process_set_id=own.process_set_id),
                hvd.process_set_included_op(process_set_id=own.process_set_id),
                hvd.process_set_included_op(process_set_id=other.process_set_id),
                hvd.size_op()]
    for got in (ops(), tf.function(ops)()):
        assert [int(t) for t in got] == [2, 1, 0, 4], got


@check
def collectives_in_each_set():
    own, _ = mine()
    me = own.rank()
    x = data(hvd.rank())
    assert_equal(hvd.allreduce(x, op=hvd.Sum, name="x", process_set=own),
                 sum(data(r) for r in own.ranks))
    assert_equal(hvd.allreduce(x, name="x.avg", process_set=own),
                 sum(data(r) for r in own.ranks) / 2)
    grouped = hvd.grouped_allreduce([x, 2 * x], op=hvd.Sum, name="x.group", process_set=own)
    assert_equal(grouped[1], 2 * sum(data(r) for r in own.ranks))
    rows = lambda r: data(r, shape=(r + 1, 2), seed=2)  # noqa: E731 - rows differ per rank
    assert_equal(hvd.allgather(rows(hvd.rank()), name="g", process_set=own),
                 np.concatenate([rows(r) for r in own.ranks]))
    assert_equal(hvd.broadcast(data(hvd.rank(), seed=4), own.ranks[1], name="b", process_set=own),
                 data(own.ranks[1], seed=4))
    sends = {p: data(r, shape=(p + 3, 2), seed=9) for p, r in enumerate(own.ranks)}
    out, received = hvd.alltoall(sends[me], splits=[me + 1, 2], name="a", process_set=own)
    assert_equal(out, np.concatenate([sends[p][:p + 1] if me == 0 else sends[p][p + 1:]
                                      for p in range(2)]))
    assert_equal(received, np.array([p + 1 if me == 0 else 2 for p in range(2)], np.int32))
    total = sum(data(r, shape=(5, 2), seed=10) for r in own.ranks)
    assert_equal(hvd.reducescatter(data(hvd.rank(), shape=(5, 2), seed=10), op=hvd.Sum,
                                   name="rs", process_set=own),
                 total[:3] if me == 0 else total[3:])
    hvd.barrier(process_set=own)


@check
def sparse_allreduce_in_set():
    own, _ = mine()

    def slices(r):
        return tf.IndexedSlices(tf.constant(data(r, shape=(3, 2), seed=11)),
                                tf.constant([r, r + 2, 7], tf.int64), tf.constant([8, 2]))

    want = np.zeros((8, 2), np.float32)
    for r in own.ranks:
        np.add.at(want, [r, r + 2, 7], data(r, shape=(3, 2), seed=11))
    out = hvd.allreduce(slices(hvd.rank()), op=hvd.Sum, name="s", process_set=own)
    assert_equal(tf.convert_to_tensor(out), want)


@check
def same_names_in_a_function_with_a_global_collective():
    own, _ = mine()

    @tf.function
    def step(x):
        in_set = hvd.allreduce(x, op=hvd.Sum, name="fn.x", process_set=own)
        everyone = hvd.allreduce(x, op=hvd.Sum, name="fn.x.global")
        return in_set, everyone

    in_set, everyone = step(tf.constant(data(hvd.rank(), seed=5)))
    assert_equal(in_set, sum(data(r, seed=5) for r in own.ranks))
    assert_equal(everyone, sum(data(r, seed=5) for r in range(4)))


@check
def gradients_through_a_set():
    own, _ = mine()
    me = own.rank()
    x = tf.Variable(data(hvd.rank(), shape=(hvd.rank() + 1, 2), seed=3))
    with tf.GradientTape() as tape:
        y = hvd.allgather(x, name="g.grad", process_set=own)
        w = tf.reshape(tf.range(tf.size(y), dtype=tf.float32), tf.shape(y))
        loss = tf.reduce_sum(y * w)
    grad = tape.gradient(loss, x)
    # The summed gradient (every member's w), this rank's rows.
    offset = sum(r + 1 for r in own.ranks if r < hvd.rank())
    rows = sum(r + 1 for r in own.ranks)
    w = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2)
    assert_equal(grad, 2 * w[offset:offset + hvd.rank() + 1])
    z = tf.Variable(data(hvd.rank(), seed=4))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(hvd.broadcast(z, own.ranks[1], name="b.grad", process_set=own))
    want = 2 * np.ones((2, 3), np.float32) if me == 1 else np.zeros((2, 3), np.float32)
    assert_equal(tape.gradient(loss, z), want)


@check
def refusals_at_once():
    _, other = mine()
    x = data(hvd.rank())
    expect_raises(ValueError, lambda: hvd.allreduce(x, name="foreign", process_set=other),
                  "not a member")
    never = hvd.ProcessSet([0, 1])
    expect_raises(ValueError, lambda: hvd.broadcast(x, 0, name="never", process_set=never),
                  "has not been added")
    assert hvd.remove_process_set(hvd.global_process_set) is False
    assert_equal(hvd.allreduce(x, op=hvd.Sum, name="still"), sum(data(r) for r in range(4)))


@check
def add_and_remove_at_run_time():
    three = hvd.add_process_set([3, 1, 2])
    assert three.process_set_id == 3 and three.ranks == [1, 2, 3], three
    x = data(hvd.rank(), seed=12)
    if hvd.rank() == 0:
        expect_raises(ValueError, lambda: hvd.allreduce(x, name="t", process_set=three),
                      "not a member")
    else:
        assert_equal(hvd.allreduce(x, op=hvd.Sum, name="t", process_set=three),
                     sum(data(r, seed=12) for r in (1, 2, 3)))
    assert hvd.remove_process_set(three) is True and three.process_set_id is None
    expect_raises(ValueError, lambda: hvd.allreduce(x, name="t.gone", process_set=three))
    ranks = [0, 1, 2] if hvd.rank() < 2 else [0, 1, 3]
    # Refused by rank 0 (an error response on every rank), not timed out.
    expect_raises(ValueError, lambda: hvd.add_process_set(ranks), "add_process_set")


def _features(rank, step):
    g = np.random.default_rng(100 * rank + step)
    return g.standard_normal((4, 3)), g.standard_normal(4)


def _want(w0, lr, steps):
    """numpy SGD of mean((X w - y)^2): on A's averaged gradient for A's members, on the local
    gradient elsewhere."""
    def grad(w, r, step):
        x, y = _features(r, step)
        return 2.0 / len(y) * x.T @ (x @ w - y)
    w = w0.copy()
    for step in range(steps):
        if hvd.rank() in A.ranks:
            g = sum(grad(w, r, step) for r in A.ranks) / A.size()
        else:
            g = grad(w, hvd.rank(), step)
        w = w - lr * g
    return w


@check
def gradient_tape_and_keras_optimizer_over_a_set():
    lr, steps = 0.125, 3  # exact in float32, as Keras keeps the learning rate
    w0 = np.array([0.5, -0.25, 1.0])
    want = _want(w0, lr, steps)
    for keras_optimizer in (False, True):
        w = tf.Variable(w0)
        opt = keras.optimizers.SGD(lr)
        if keras_optimizer:
            opt = hvd.DistributedOptimizer(opt, name="ps.sgd", process_set=A)
        for step in range(steps):
            x, y = (tf.constant(a) for a in _features(hvd.rank(), step))
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((tf.linalg.matvec(x, w) - y) ** 2)
            if not keras_optimizer:
                tape = hvd.DistributedGradientTape(tape, process_set=A)
            grads = tape.gradient(loss, [w])
            opt.apply_gradients(zip(grads, [w]))
        assert np.allclose(w.numpy(), want, rtol=1e-12, atol=1e-12), (keras_optimizer, w, want)
    expect_raises(ValueError, lambda: hvd.DistributedOptimizer(
        keras.optimizers.SGD(lr), op=hvd.Adasum, process_set=A), "global process set only")


if __name__ == "__main__":
    hvd.init(process_sets=[A, B])
    sys.exit(run_checks(hvd, CHECKS, sys.argv[1:], hvd.barrier))
