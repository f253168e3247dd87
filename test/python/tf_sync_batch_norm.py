"""What every rank runs in test_tensorflow.py's SyncBatchNormalization jobs: the layer
(zen.tensorflow.SyncBatchNormalization) against a one-process keras.layers.BatchNormalization
on the global batch (every rank's input concatenated, which every rank builds itself: rank r's
input is a known function of r, and ranks hold different batch sizes), and against float64
numpy where the base layer is not the point.

    tools/zenrun -np N .venv-tf/bin/python tf_sync_batch_norm.py [CHECK ...]

Checked: outputs and moving statistics over several steps, eagerly and in tf.function, axis=-1
(2-D and NHWC) and axis=1 (NCHW); the gradients of the inputs, gamma and beta; batch sizes that
differ per rank; a large mean (the variance stays exact); masks; mixed_float16; serialization;
one layer called twice in one tf.function; inference and trainable=False without communication
(one rank alone); process sets (the ranks' two halves: {0, 1} and {2, 3} on 4 ranks) and a set
of one (the base layer bit for bit); ranks that differ in channels (an error on every rank);
Model.fit with DistributedOptimizer against one-process training. Prints
`ZENTEST {"check": ..., "ok": ..., "error": ...}` per check and rank.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from rank_report import Checks, add_checkout_package, expect_raises, run_checks  # noqa: E402

add_checkout_package()

import zen.tensorflow as hvd  # noqa: E402
import zen.tensorflow.keras as hvd_keras  # noqa: E402

CHECKS = Checks()
check = CHECKS.check
MOMENTUM, STEPS = 0.5, 3


def close(got, want, tol=2e-5, what=""):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, "%s: shape %s, want %s" % (what, got.shape, want.shape)
    diff = float(np.max(np.abs(got - want))) if got.size else 0.0
    assert diff <= tol * max(1.0, float(np.max(np.abs(want)))), \
        "%s differs by %g: got %s, want %s" % (what, diff, got, want)


def rows(rank):
    """Rank rank's batch size: every rank a different one."""
    return 2 + rank


def data(rank, step, shape, axis=-1, seed=0):
    """Rank rank's input at step: rows(rank) samples of shape, each channel (on axis) with
    its own mean and spread."""
    g = np.random.default_rng(10000 * seed + 100 * step + rank)
    x = g.normal(size=(rows(rank),) + tuple(shape))
    channels = np.arange(x.shape[axis], dtype=np.float64)
    along = [1] * x.ndim
    along[axis] = -1
    return (x * (1.0 + channels).reshape(along) + (channels - 1.0).reshape(along)).astype(
        np.float32)


def everyone(fn, ranks=None):
    """fn(r) of every rank of ranks (all by default), concatenated in rank order."""
    ranks = range(hvd.size()) if ranks is None else ranks
    return np.concatenate([fn(r) for r in ranks])


def my_rows(global_array, ranks=None):
    """This rank's rows of global_array, every rank's rows concatenated in rank order."""
    ranks = list(range(hvd.size()) if ranks is None else ranks)
    offset = sum(rows(r) for r in ranks[:ranks.index(hvd.rank())])
    return global_array[offset:offset + rows(hvd.rank())]


def pair(shape, axis=-1, process_set=hvd.global_process_set, name=None):
    """(SyncBatchNormalization, keras.layers.BatchNormalization), built for samples of shape
    with the same gamma, beta and moving statistics, none of them trivial."""
    sync = hvd.SyncBatchNormalization(axis=axis, momentum=MOMENTUM, process_set=process_set,
                                      name=name)
    base = keras.layers.BatchNormalization(axis=axis, momentum=MOMENTUM)
    channels = ((None,) + tuple(shape))[axis]
    start = [np.linspace(0.5, 1.5, channels), np.linspace(-0.5, 0.5, channels),
             np.linspace(-1.0, 1.0, channels), np.linspace(1.0, 2.0, channels)]
    for layer in (sync, base):
        layer.build((None,) + tuple(shape))
        layer.set_weights([w.astype(np.float32) for w in start])
    return sync, base


def assert_same_state(sync, base, what):
    for got, want, name in zip(sync.get_weights(), base.get_weights(),
                               ("gamma", "beta", "moving_mean", "moving_variance")):
        close(got, want, what="%s: %s" % (what, name))


def train_against_base(shape, axis=-1, function=False, ranks=None, process_set=None, seed=0):
    """STEPS training calls of a pair's layers, the sync one on this rank's input, the base
    one on the inputs of every rank of ranks; the outputs (this rank's rows) and the moving
    statistics after each step must agree."""
    sync, base = pair(shape, axis, process_set or hvd.global_process_set)
    call = tf.function(lambda x: sync(x, training=True)) if function else \
        (lambda x: sync(x, training=True))
    for step in range(STEPS):
        out = call(tf.constant(data(hvd.rank(), step, shape, axis, seed)))
        want = base(everyone(lambda r: data(r, step, shape, axis, seed), ranks), training=True)
        close(out, my_rows(np.asarray(want), ranks), what="step %d output" % step)
        assert_same_state(sync, base, "step %d" % step)
    return sync, base


@check
def exported_by_tensorflow_and_keras():
    assert hvd_keras.SyncBatchNormalization is hvd.SyncBatchNormalization
    assert issubclass(hvd.SyncBatchNormalization, keras.layers.BatchNormalization)
    assert hvd.SyncBatchNormalization().name.startswith("sync_batch_normalization")
    expect_raises(ValueError, lambda: hvd.SyncBatchNormalization(fused=True), "fused")
    expect_raises(ValueError, lambda: hvd.SyncBatchNormalization(synchronized=True),
                  "synchronized")
    layer = hvd.SyncBatchNormalization(axis=1, momentum=0.25, epsilon=0.01)
    again = keras.layers.deserialize(keras.layers.serialize(layer))
    assert type(again) is hvd.SyncBatchNormalization, type(again)
    assert (again.axis, again.momentum, again.epsilon) == (1, 0.25, 0.01), again.get_config()


@check
def training_matches_the_global_batch():
    """Batch sizes 2, 3, ... by rank: the moments weigh every sample once."""
    train_against_base((5,))


@check
def nhwc_in_a_function():
    train_against_base((3, 2, 4), axis=-1, function=True, seed=1)


@check
def nchw_axis_1_eager_and_in_a_function():
    train_against_base((4, 3, 2), axis=1, seed=2)
    train_against_base((4, 3, 2), axis=1, function=True, seed=3)


@check
def mixed_float16():
    """Under the mixed_float16 policy (float16 in and out, float32 variables) the layer
    upcasts as the base layer does: the moments travel in float32."""
    shape = (3,)
    sync = hvd.SyncBatchNormalization(momentum=MOMENTUM, dtype="mixed_float16")
    base = keras.layers.BatchNormalization(momentum=MOMENTUM, dtype="mixed_float16")
    for step in range(2):
        out = sync(tf.constant(data(hvd.rank(), step, shape, seed=10), tf.float16),
                   training=True)
        want = base(tf.constant(everyone(lambda r: data(r, step, shape, seed=10)), tf.float16),
                    training=True)
        assert out.dtype == tf.float16, out.dtype
        close(out, my_rows(np.asarray(want)), tol=2e-3, what="step %d output" % step)
        for got, ref in zip(sync.get_weights(), base.get_weights()):
            close(got, ref, tol=1e-4, what="step %d state" % step)


@check
def uneven_batches_weighted_by_count():
    """Rank 0 holds one sample far from the others' many: an average of the ranks' moments
    that ignored the counts would be far off (and is checked to be)."""
    def skewed(r):
        g = np.random.default_rng(50 + r)
        n = 1 if r == 0 else 6
        return (g.normal(size=(n, 3)) + (20.0 if r == 0 else 0.0)).astype(np.float32)

    sync = hvd.SyncBatchNormalization(momentum=0.0)
    sync(tf.constant(skewed(hvd.rank())), training=True)
    x = everyone(skewed).astype(np.float64)
    close(sync.moving_mean.numpy(), x.mean(0), tol=1e-5, what="mean")
    close(sync.moving_variance.numpy(), x.var(0), tol=1e-5, what="variance")
    unweighted = np.mean([skewed(r).mean(0) for r in range(hvd.size())], axis=0)
    assert np.max(np.abs(unweighted - x.mean(0))) > 1.0, (unweighted, x.mean(0))


@check
def large_mean_keeps_the_variance_exact():
    """Mean 1000, spread 1, float32: E[x^2] - E[x]^2 would be off by ~ulp(1e6) = 0.06 (checked
    here on numpy's float32); the two-pass moments are exact to float32 rounding."""
    def shifted(r):
        return (np.random.default_rng(70 + r).normal(size=(rows(r), 4)) + 1000.0).astype(
            np.float32)

    sync = hvd.SyncBatchNormalization(momentum=0.0)
    sync(tf.constant(shifted(hvd.rank())), training=True)
    x = everyone(shifted)
    want = x.astype(np.float64).var(0)
    got = sync.moving_variance.numpy()
    assert np.max(np.abs(got - want) / want) < 1e-3, (got, want)
    naive = np.mean(np.square(x), 0, dtype=np.float32) - np.square(np.mean(x, 0))
    assert np.max(np.abs(naive - want) / want) > 1e-2, (naive, want)


@check
def gradients_of_inputs_gamma_and_beta():
    """loss = sum(out * w) over every rank's rows: each rank's input gradient is its rows of
    the global one; its gamma and beta gradients are its own rows' share (sum of w * x_hat
    and of w over its rows, x_hat normalized by the global moments), which sum over the ranks
    to the global gradient. Eagerly and in a tf.function."""
    shape = (3,)
    weights = lambda r: data(r, 9, shape, seed=4)  # noqa: E731 - the loss's weights, per rank
    x_all, w_all = everyone(lambda r: data(r, 0, shape)), everyone(weights)
    for function in (False, True):
        sync, base = pair(shape)
        x = tf.constant(data(hvd.rank(), 0, shape))
        w = tf.constant(weights(hvd.rank()))

        def grads(layer, inputs, w):
            with tf.GradientTape() as tape:
                tape.watch(inputs)
                loss = tf.reduce_sum(layer(inputs, training=True) * w)
            return tape.gradient(loss, [inputs, layer.gamma, layer.beta])

        mine = tf.function(lambda x, w: grads(sync, x, w)) if function else \
            (lambda x, w: grads(sync, x, w))
        got = mine(x, w)
        want = grads(base, tf.constant(x_all), tf.constant(w_all))
        close(got[0], my_rows(want[0].numpy()), what="input gradient")
        x64 = x_all.astype(np.float64)
        x_hat = (x64 - x64.mean(0)) / np.sqrt(x64.var(0) + sync.epsilon)
        w_mine = weights(hvd.rank()).astype(np.float64)
        close(got[1], (w_mine * my_rows(x_hat)).sum(0), what="gamma gradient (own rows)")
        close(got[2], w_mine.sum(0), what="beta gradient (own rows)")
        for g, ref, name in ((got[1], want[1], "gamma"), (got[2], want[2], "beta")):
            close(hvd.allreduce(g, op=hvd.Sum, name="check.grad.%s.%d" % (name, function)),
                  ref, what="%s gradient summed over ranks" % name)


@check
def masked_samples_are_left_out():
    """A mask over (batch, time): the base layer's weighted moments, over every rank's."""
    shape = (4, 3)

    def mask(r):
        return np.random.default_rng(90 + r).random((rows(r), shape[0])) < 0.6

    sync, base = pair(shape)
    for step in range(2):
        out = sync(tf.constant(data(hvd.rank(), step, shape, seed=5)), training=True,
                   mask=tf.constant(mask(hvd.rank())))
        want = base(everyone(lambda r: data(r, step, shape, seed=5)), training=True,
                    mask=tf.constant(everyone(mask)))
        close(out, my_rows(np.asarray(want)), what="step %d output" % step)
        assert_same_state(sync, base, "step %d" % step)


@check
def one_layer_twice_in_a_function():
    """Two calls of one layer in a tf.function post different names (unique in the graph),
    in flight together; the moving statistics take both updates in order."""
    shape = (3,)
    sync, base = pair(shape)

    @tf.function
    def twice(a, b):
        return sync(a, training=True), sync(b, training=True)

    outs = twice(tf.constant(data(hvd.rank(), 0, shape)), tf.constant(data(hvd.rank(), 1, shape)))
    for step, out in enumerate(outs):
        want = base(everyone(lambda r: data(r, step, shape)), training=True)
        close(out, my_rows(np.asarray(want)), what="call %d" % step)
    assert_same_state(sync, base, "after both calls")


@check
def inference_does_not_communicate():
    """After training, rank 0 alone calls the layer with training=False (eagerly and in a
    tf.function) and with trainable=False: the moving statistics, nothing posted (a posted
    collective would wait for ranks that never join it)."""
    shape = (3,)
    sync, base = train_against_base(shape, seed=6)
    if hvd.rank() == 0:
        x = tf.constant(data(0, 7, shape))
        want = base(x, training=False)
        close(sync(x, training=False), want, what="eager inference")
        close(tf.function(lambda v: sync(v, training=False))(x), want, what="tf.function")
        sync.trainable = base.trainable = False
        close(sync(x, training=True), base(x, training=True), what="trainable=False")
        assert_same_state(sync, base, "after inference")


@check
def process_set_halves():
    """The ranks split in two sets (on 4 ranks {0, 1} and {2, 3}): each layer synchronizes
    within its set only; a rank outside a layer's set is refused in training, clearly, and
    runs its inference."""
    half = hvd.size() // 2
    sets = [hvd.ProcessSet(list(range(half))), hvd.ProcessSet(list(range(half, hvd.size())))]
    for s in sets:
        hvd.add_process_set(s)
    try:
        own, other = sets if hvd.rank() < half else sets[::-1]
        train_against_base((3,), ranks=own.ranks, process_set=own, seed=7)
        train_against_base((2, 2, 3), axis=1, function=True, ranks=own.ranks,
                           process_set=own, seed=8)
        stranger, _ = pair((3,), process_set=other)
        x = tf.constant(data(hvd.rank(), 0, (3,)))
        expect_raises(ValueError, lambda: stranger(x, training=True), "not a member")
        stranger(x, training=False)
    finally:
        hvd.barrier()
        for s in sets:
            hvd.remove_process_set(s)


@check
def set_of_one_is_the_base_layer():
    """Over a set of this rank alone the layer is the base layer, bit for bit."""
    singles = [hvd.ProcessSet([r]) for r in range(hvd.size())]
    for s in singles:
        hvd.add_process_set(s)
    try:
        sync, base = pair((4,), process_set=singles[hvd.rank()])
        for step in range(2):
            x = tf.constant(data(hvd.rank(), step, (4,), seed=9))
            assert np.array_equal(sync(x, training=True), base(x, training=True)), step
            for got, want in zip(sync.get_weights(), base.get_weights()):
                assert np.array_equal(got, want), (step, got, want)
    finally:
        hvd.barrier()
        for s in singles:
            hvd.remove_process_set(s)


@check
def different_channels_fail_on_every_rank():
    """Ranks whose layers differ in channels: every rank gets the daemon's error, naming the
    layer's collective, instead of a hang."""
    channels = 3 if hvd.rank() == 0 else 4
    sync = hvd.SyncBatchNormalization(name="syncbn_mismatch")
    e = expect_raises(tf.errors.OpError,
                      lambda: sync(tf.ones([2, channels]), training=True))
    assert "syncbn_mismatch" in e.message, e.message


# ---- Model.fit ----

IN, HIDDEN, OUT, LOCAL_BATCH, FIT_STEPS = 3, 4, 2, 3, 3


def fit_model(bn_layer):
    """Two batch normalizations, bn_layer() each (their collectives must not collide)."""
    model = keras.Sequential([keras.Input((IN,)), keras.layers.Dense(HIDDEN), bn_layer(),
                              keras.layers.Activation("tanh"), keras.layers.Dense(HIDDEN),
                              bn_layer(), keras.layers.Activation("tanh"),
                              keras.layers.Dense(OUT)])
    g = np.random.default_rng(123)
    for layer in model.layers:  # the batch normalization keeps its (fixed) initial values
        if isinstance(layer, keras.layers.Dense):
            layer.set_weights([g.normal(size=w.shape).astype(np.float32)
                               for w in layer.get_weights()])
    return model


def fit_data(rank, step):
    g = np.random.default_rng(200 + 10 * step + rank)
    return (g.normal(size=(LOCAL_BATCH, IN)).astype(np.float32),
            g.normal(size=(LOCAL_BATCH, OUT)).astype(np.float32))


@check
def model_fit_matches_one_process():
    """Dense, SyncBatchNormalization, tanh (twice), Dense, trained by Model.fit with the Keras
    DistributedOptimizer (equal local batches: the average of the ranks' mean losses is the
    global batch's) against the same model with BatchNormalization trained by plain SGD on
    the global batches; every weight, the moving statistics included."""
    lr = 0.1

    def batches(ranks, part):
        return np.concatenate([np.concatenate([fit_data(r, s)[part] for r in ranks])
                               for s in range(FIT_STEPS)])

    mine = [hvd.rank()]
    model = fit_model(lambda: hvd.SyncBatchNormalization(momentum=MOMENTUM))
    model.compile(optimizer=hvd_keras.DistributedOptimizer(keras.optimizers.SGD(lr)),
                  loss="mse")
    model.fit(batches(mine, 0), batches(mine, 1), batch_size=LOCAL_BATCH, shuffle=False,
              verbose=0)
    ranks = range(hvd.size())
    reference = fit_model(lambda: keras.layers.BatchNormalization(momentum=MOMENTUM))
    reference.compile(optimizer=keras.optimizers.SGD(lr), loss="mse")
    reference.fit(batches(ranks, 0), batches(ranks, 1), batch_size=LOCAL_BATCH * hvd.size(),
                  shuffle=False, verbose=0)
    for i, (got, want) in enumerate(zip(model.get_weights(), reference.get_weights())):
        close(got, want, tol=1e-4, what="weight %d" % i)
    moved = model.get_weights()[0] - fit_model(keras.layers.BatchNormalization).get_weights()[0]
    assert np.max(np.abs(moved)) > 1e-3, "training did not move the first layer"


if __name__ == "__main__":
    sys.exit(run_checks(hvd, CHECKS, sys.argv[1:], hvd.barrier))
