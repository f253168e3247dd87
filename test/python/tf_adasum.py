"""What every rank runs in test_tensorflow.py's adasum jobs: DistributedOptimizer(op=Adasum)
(zen.tensorflow.adasum_optimizer) and DistributedGradientTape(op=Adasum), check by check.

    tools/zenrun -np N .venv-tf/bin/python tf_adasum.py [CHECK ...]

A small float64 Keras model trains a few steps on rank-dependent data. Every rank rebuilds
every rank's step independently: the gradients by a plain tf.GradientTape on a copy of the
model (no zen), each rank's local optimizer delta in numpy (Keras 3's SGD, momentum and Adam
formulas, their state per rank), the deltas combined per variable by adasum_reference.py's
tree; the variables after each step must equal the reference and be the same bits on every
rank. Prints one line per check and rank: `ZENTEST {"check": ..., ...}`.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

# float64 throughout, Keras' learning_rate variable and Model.fit's loss too, so that the
# reference can hold the optimizers to TOL.
keras.config.set_floatx("float64")

from rank_report import Checks, add_checkout_package, expect_raises, run_checks  # noqa: E402

add_checkout_package()

import zen.tensorflow as hvd  # noqa: E402
from adasum_reference import adasum_tree, assert_close  # noqa: E402

CHECKS = Checks()
check = CHECKS.check
TOL = 1e-10  # float64, a few steps
STEPS, BATCH, LR = 4, 5, 0.1


def fresh():
    keras.utils.set_random_seed(7)
    model = keras.Sequential([keras.Input((6,), dtype="float64"),
                              keras.layers.Dense(5, activation="tanh", dtype="float64"),
                              keras.layers.Dense(3, dtype="float64")])
    return model


def data(rank, step, k=0):
    """Rank rank's batch for backward pass k of step: every rank's differs."""
    rng = np.random.default_rng(10000 * rank + 100 * step + k)
    return rng.standard_normal((BATCH, 6)), rng.standard_normal((BATCH, 3))


def loss(model, rank, step, k=0):
    x, y = data(rank, step, k)
    return tf.reduce_mean(tf.square(model(x) - y))


def local_grads(model, rank, step, k=0):
    with tf.GradientTape() as tape:
        value = loss(model, rank, step, k)
    return tape, value


def grads(weights, rank, step, passes):
    """Rank rank's gradients (summed over passes) at weights (list of arrays), by a plain
    tf.GradientTape on a copy of the model."""
    model = fresh()
    model.set_weights(weights)
    total = [np.zeros_like(w) for w in weights]
    for k in range(passes):
        tape, value = local_grads(model, rank, step, k)
        for i, g in enumerate(tape.gradient(value, model.trainable_variables)):
            total[i] += g.numpy()
    return total


def f32(x):
    """A hyperparameter as Keras 3 steps a float64 variable with it: ops.cast(momentum or beta,
    float64) goes through a float32 tensor."""
    return float(np.float32(x))


class Sgd:
    """keras.optimizers.SGD's delta (no nesterov) in numpy, one rank's state."""

    def __init__(self, momentum=0.0):
        self.momentum, self.m = momentum, {}

    def delta(self, i, g):
        if not self.momentum:
            return -LR * g
        self.m[i] = self.m.get(i, 0.0) * f32(self.momentum) - g * LR
        return self.m[i]


class Adam:
    """keras.optimizers.Adam's delta in numpy, one rank's state."""

    def __init__(self, b1=0.9, b2=0.999, eps=1e-7):
        self.b1, self.b2, self.eps, self.state = b1, b2, eps, {}

    def delta(self, i, g):
        t, m, v = self.state.get(i, (0, 0.0, 0.0))
        t = t + 1
        m = m + (g - m) * (1 - self.b1)
        v = v + (g * g - v) * (1 - self.b2)
        self.state[i] = (t, m, v)
        alpha = LR * np.sqrt(1 - f32(self.b2) ** t) / (1 - f32(self.b1) ** t)
        return -(m * alpha) / (np.sqrt(v) + self.eps)


def reference(make_opt, passes=1, combine_grads=False):
    """The weights after each step: every rank's local delta from its own gradients and
    optimizer state, combined per variable by the Adasum tree. combine_grads: the tape's
    Adasum instead (the gradients combined, then one SGD step)."""
    size = hvd.size()
    weights = fresh().get_weights()
    opts = [make_opt() for _ in range(size)]
    out = []
    for step in range(STEPS):
        per_rank = [grads(weights, r, step, passes) for r in range(size)]
        for i, w in enumerate(weights):
            if combine_grads:
                g = adasum_tree([p[i] for p in per_rank]).reshape(w.shape)
                combined = opts[0].delta(i, g)
            else:
                combined = adasum_tree([opts[r].delta(i, per_rank[r][i])
                                        for r in range(size)]).reshape(w.shape)
            weights[i] = w + combined
        out.append([w.copy() for w in weights])
    return out


def train(make_keras_opt, passes=1, **kwargs):
    """The weights after each step of DistributedOptimizer(op=Adasum), eagerly through
    apply_gradients (passes calls per step)."""
    rank = hvd.rank()
    model = fresh()
    opt = hvd.DistributedOptimizer(make_keras_opt(), op=hvd.Adasum,
                                   backward_passes_per_step=passes, **kwargs)
    out = []
    for step in range(STEPS):
        for k in range(passes):
            tape, value = local_grads(model, rank, step, k)
            opt.apply_gradients(zip(tape.gradient(value, model.trainable_variables),
                                    model.trainable_variables))
        out.append(model.get_weights())
    return out


def assert_matches(got, want, tol, what):
    for step, (g, w) in enumerate(zip(got, want)):
        for i, (a, b) in enumerate(zip(g, w)):
            assert_close(a, b.ravel(), tol, "%s: variable %d after step %d" % (what, i, step))
    # The same bits on every rank.
    flat = np.concatenate([w.ravel() for w in got[-1]]).reshape(1, -1)
    gathered = hvd.allgather(tf.constant(flat), name="adasum.bits.%s" % what).numpy()
    assert all(np.array_equal(gathered[0].view(np.uint64), g.view(np.uint64))
               for g in gathered), what


def sgd(momentum=0.0):
    return lambda: keras.optimizers.SGD(LR, momentum=momentum)


# ---- checks ----

@check
def adasum_sgd():
    """Plain SGD: the delta is -lr * gradient, and Adasum is scale-equivariant, so this one
    cannot tell deltas from gradients; momentum and Adam below can."""
    assert_matches(train(sgd()), reference(Sgd), TOL, "sgd")


@check
def adasum_sgd_momentum():
    """Each rank's momentum advances with its own gradients (Adasum of the deltas, not of the
    gradients: this is where the two differ)."""
    assert_matches(train(sgd(0.9)), reference(lambda: Sgd(0.9)), TOL, "momentum")


@check
def adasum_adam():
    assert_matches(train(lambda: keras.optimizers.Adam(LR)), reference(Adam), TOL, "adam")


@check
def adasum_model_fit():
    """Model.fit traces the optimizer's apply into its train function: the same steps."""
    rank = hvd.rank()
    model = fresh()
    model.compile(optimizer=hvd.DistributedOptimizer(sgd(0.9)(), op=hvd.Adasum), loss="mse",
                  jit_compile=False)
    got = []
    for step in range(STEPS):
        x, y = data(rank, step)
        model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
        got.append(model.get_weights())
    assert_matches(got, reference(lambda: Sgd(0.9)), TOL, "fit")


@check
def adasum_two_backward_passes():
    """backward_passes_per_step=2: the local apply takes the gradients summed over both
    passes (the pass in between moves nothing)."""
    assert_matches(train(sgd(0.9), passes=2), reference(lambda: Sgd(0.9), passes=2), TOL,
                   "passes2")


@check
def adasum_tape():
    """DistributedGradientTape(op=Adasum), as Horovod's: the gradients combined by Adasum,
    then one plain SGD step (the same on every rank)."""
    rank = hvd.rank()
    model = fresh()
    opt = keras.optimizers.SGD(LR)
    got = []
    for step in range(STEPS):
        tape, value = local_grads(model, rank, step)
        tape = hvd.DistributedGradientTape(tape, op=hvd.Adasum)
        opt.apply_gradients(zip(tape.gradient(value, model.trainable_variables),
                                model.trainable_variables))
        got.append(model.get_weights())
    assert_matches(got, reference(Sgd, combine_grads=True), TOL, "tape")


@check
def adasum_refusals():
    """What Adasum cannot take fails on every rank with a clear ValueError, the variables
    untouched: tf.IndexedSlices gradients (an embedding), Compression.topk."""
    emb = keras.layers.Embedding(10, 3, dtype="float64")
    emb.build((None,))
    before = emb.embeddings.numpy().copy()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(LR), op=hvd.Adasum)
    with tf.GradientTape() as tape:
        value = tf.reduce_sum(emb(tf.constant([1, 2])))
    grad = tape.gradient(value, emb.trainable_variables)
    assert isinstance(grad[0], tf.IndexedSlices)
    e = expect_raises(ValueError, lambda: opt.apply_gradients(zip(grad, emb.trainable_variables)),
                      "tf.IndexedSlices")
    assert "dense-only" in str(e), str(e)
    assert np.array_equal(emb.embeddings.numpy(), before)
    with tf.GradientTape() as tape:
        value = tf.reduce_sum(emb(tf.constant([1, 2])))
    dtape = hvd.DistributedGradientTape(tape, op=hvd.Adasum)
    expect_raises(ValueError, lambda: dtape.gradient(value, emb.trainable_variables),
                  "dense-only")
    for what in ("DistributedOptimizer", "DistributedGradientTape"):
        def make():
            topk = hvd.Compression.topk(0.1)
            if what == "DistributedOptimizer":
                return hvd.DistributedOptimizer(keras.optimizers.SGD(LR), op=hvd.Adasum,
                                                compression=topk)
            return hvd.DistributedGradientTape(tf.GradientTape(), op=hvd.Adasum,
                                               compression=topk)
        expect_raises(ValueError, make, "%s(op=Adasum): Compression.topk" % what)


@check
def adasum_sparse_as_dense():
    """sparse_as_dense=True: an embedding's tf.IndexedSlices gradient is made dense first (as
    Horovod asks): the optimizer's and the tape's results against the tree of every rank's
    dense gradient (rank r touches rows r and r + 1)."""
    size, rank = hvd.size(), hvd.rank()

    def dense_grad(r):
        g = np.zeros((10, 3))
        g[[r, r + 1]] = 1.0
        return g

    want = adasum_tree([-LR * dense_grad(r) for r in range(size)]).reshape(10, 3)
    for use_tape in (False, True):
        emb = keras.layers.Embedding(10, 3, dtype="float64")
        emb.build((None,))
        emb.embeddings.assign(tf.zeros([10, 3], tf.float64))
        with tf.GradientTape() as tape:
            value = tf.reduce_sum(emb(tf.constant([rank, rank + 1])))
        opt = keras.optimizers.SGD(LR)
        if use_tape:
            tape = hvd.DistributedGradientTape(tape, op=hvd.Adasum, sparse_as_dense=True)
        else:
            opt = hvd.DistributedOptimizer(opt, op=hvd.Adasum, sparse_as_dense=True)
        grad = tape.gradient(value, emb.trainable_variables)
        opt.apply_gradients(zip(grad, emb.trainable_variables))
        assert_close(emb.embeddings.numpy(), want.ravel(), TOL, ("sparse_as_dense", use_tape))


@check
def adasum_world_not_power_of_two():
    """On a world that is not a power of two the daemon's error reaches every rank from
    apply_gradients (the variables put back); on one that is, a step works."""
    size = hvd.size()
    model = fresh()
    before = model.get_weights()
    opt = hvd.DistributedOptimizer(sgd(0.9)(), op=hvd.Adasum)
    tape, value = local_grads(model, hvd.rank(), 0)
    grad = tape.gradient(value, model.trainable_variables)
    step = lambda: opt.apply_gradients(zip(grad, model.trainable_variables))  # noqa: E731
    if size & (size - 1):
        expect_raises(tf.errors.InvalidArgumentError, step, "power-of-two")
        for w, b in zip(model.get_weights(), before):
            assert np.array_equal(w, b)
        return
    step()
    assert any(not np.array_equal(w, b) for w, b in zip(model.get_weights(), before))


if __name__ == "__main__":
    sys.exit(run_checks(hvd, CHECKS, sys.argv[1:], hvd.barrier))
