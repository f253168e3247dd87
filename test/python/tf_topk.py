"""What every rank runs in test_tensorflow.py's topk jobs: zen.tensorflow's Compression.topk
(Deep Gradient Compression through Zen's sparse allreduce, zen.tensorflow.topk), check by
check, against the dense re-computation of dgc_reference.py (float64).

    tools/zenrun -np N .venv-tf/bin/python tf_topk.py [CHECK ...]

Prints one line per check and rank: `ZENTEST {"check": ..., "ok": ..., "error": ...}`.
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
from dgc_reference import (BIAS, MIN_SIZE, SAMPLED_NUMEL, SHAPE,  # noqa: E402
                           check_clipped_updates, dgc_reference, grads, largest,
                           sampled_cases, step_grads)
from zen.common.compression import topk_sample_plan  # noqa: E402

CHECKS = Checks()
check = CHECKS.check
TOL = 1e-12


def assert_close(got, want, what, tol=TOL):
    diff = float(np.abs(np.asarray(got) - want).max())
    assert diff <= tol, "%s differs by %g" % (what, diff)


def tape_updates(compression, steps, passes=1, ratios=None):
    """W's and b's gradients through DistributedGradientTape per step (passes summed
    locally first), with this rank's closed-form gradients; ratios: compression.ratio set
    before each step."""
    w = tf.Variable(tf.zeros(SHAPE, tf.float64))
    b = tf.Variable(tf.zeros(BIAS, tf.float64))
    updates = []
    for step in range(steps):
        if ratios is not None:
            compression.ratio = ratios[step]
        g, h = step_grads(hvd.rank(), step, passes)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w * g) + tf.reduce_sum(b * h)
        tape = hvd.DistributedGradientTape(tape, compression=compression)
        gw, gb = tape.gradient(loss, [w, b])
        updates.append((gw.numpy(), gb.numpy()))
    return updates


@check
def topk_bad_arguments():
    for ratio in (0, -0.1, 1.5, None, True):
        expect_raises(ValueError, lambda: hvd.Compression.topk(ratio), "ratio")
    expect_raises(ValueError, lambda: hvd.Compression.topk(0.1, min_size=0), "min_size")
    expect_raises(ValueError, lambda: hvd.Compression.topk(0.1, nesterov=True), "nesterov")
    for clip_norm in (0, -1.0, float("inf"), float("nan"), True, "1"):
        expect_raises(ValueError, lambda: hvd.Compression.topk(0.1, clip_norm=clip_norm),
                      "clip_norm")
    expect_raises(ValueError, lambda: hvd.DistributedOptimizer(
        keras.optimizers.SGD(0.1, momentum=0.9),
        compression=hvd.Compression.topk(0.1, momentum=0.9)), "momentum=0")
    expect_raises(ValueError, lambda: hvd.DistributedGradientTape(
        tf.GradientTape(), compression=hvd.Compression.topk), "Compression.topk(0.01)")
    expect_raises(ValueError, lambda: hvd.allreduce(
        tf.ones(SHAPE), compression=hvd.Compression.topk(0.1)), "key")


@check
def topk_tape_matches_reference_and_conserves():
    """DistributedGradientTape with topk(0.02): W's updates are DGC's, b (below min_size) is
    the plain average, and size * (sum of updates) + every rank's residual = every
    gradient."""
    size, rank, steps, ratio = hvd.size(), hvd.rank(), 4, 0.02
    compression = hvd.Compression.topk(ratio, min_size=MIN_SIZE)
    updates = tape_updates(compression, steps)
    want, want_residuals = dgc_reference(size, steps, ratio)
    for step, ((uw, ub), ref) in enumerate(zip(updates, want)):
        assert_close(uw, ref, "W's update of step %d" % step)
        assert_close(ub, sum(step_grads(r, step)[1] for r in range(size)) / size,
                     "b's update of step %d" % step)
    residual = compression.residual("DistributedGradientTape.0")  # W, the first gradient
    assert_close(residual.numpy(), want_residuals[rank], "rank %d's residual" % rank)
    residuals = hvd.allreduce(residual.read_value(), op=hvd.Sum, name="topk.residuals")
    total = sum(step_grads(r, s)[0] for r in range(size) for s in range(steps))
    sent = size * sum(uw for uw, _ in updates)
    assert_close(sent + residuals.numpy().reshape(SHAPE), total, "sent + residuals", 1e-10)


@check
def topk_ratio_set_between_steps():
    """DGC's warm-up: ratio set between DistributedGradientTape steps sends the new k from
    that step on and keeps the residual (W's updates and residual are DGC's with the same
    ratios); a tf.function traced before the change fails its next call naming the retrace,
    and one traced anew sends the new k; a TensorFlow 1 graph's compressor refuses a change."""
    size, steps = hvd.size(), 6
    ratios = [0.25, 0.25, 0.05, 0.05, 0.01, 0.01]
    compression = hvd.Compression.topk(ratios[0], min_size=MIN_SIZE)
    updates = tape_updates(compression, steps, ratios=ratios)
    want, want_residuals = dgc_reference(size, steps, ratios)
    for step, ((uw, _), ref) in enumerate(zip(updates, want)):
        assert_close(uw, ref, "W's update of step %d (ratio %g)" % (step, ratios[step]))
    residual = compression.residual("DistributedGradientTape.0")
    assert_close(residual.numpy(), want_residuals[hvd.rank()], "the residual")
    expect_raises(ValueError, lambda: setattr(compression, "ratio", 0), "ratio")
    assert compression.ratio == 0.01
    x = tf.ones([1000], tf.float64)
    traced = tf.function(lambda t: compression.compress(t, "traced")[0].values)
    assert traced(x).shape == [10]
    compression.ratio = 0.5
    expect_raises(tf.errors.InvalidArgumentError, lambda: traced(x), "trace it again")
    retraced = tf.function(lambda t: compression.compress(t, "traced")[0].values)
    assert retraced(x).shape == [500]
    graph_compression = hvd.Compression.topk(0.1, min_size=MIN_SIZE)
    with tf.Graph().as_default():
        graph_compression.compress(tf.ones([1000], tf.float64), "graph")
    expect_raises(ValueError, lambda: setattr(graph_compression, "ratio", 0.5), "TensorFlow 1")
    assert graph_compression.ratio == 0.1


@check
def topk_tape_momentum_correction():
    size, steps, ratio = hvd.size(), 4, 0.05
    for nesterov in (False, True):
        updates = tape_updates(hvd.Compression.topk(ratio, min_size=MIN_SIZE, momentum=0.9,
                                                    nesterov=nesterov), steps)
        want, _ = dgc_reference(size, steps, ratio, momentum=0.9, nesterov=nesterov)
        velocity = np.zeros(BIAS)  # b goes dense: the average of every rank's momentum
        for step, ((uw, ub), ref) in enumerate(zip(updates, want)):
            what = "step %d (nesterov %s)" % (step, nesterov)
            assert_close(uw, ref, "W's update of " + what)
            g = sum(step_grads(r, step)[1] for r in range(size)) / size
            velocity = 0.9 * velocity + g
            assert_close(ub, g + 0.9 * velocity if nesterov else velocity, "b's update of " + what)


@check
def topk_tape_local_gradient_clipping():
    """DGC's local gradient clipping: with clip_norm each rank's gradients of a step (W's and
    b's together) are scaled to at most clip_norm / sqrt(size) in global norm before the
    momentum and the residual: W's updates are DGC's of the clipped gradients, b's the
    average of the clipped ones (with momentum: of the momenta); a clip_norm above every norm
    changes nothing."""
    size, steps, ratio = hvd.size(), 4, 0.05
    clip_norm = 40 * size ** 0.5  # a rank's gradient norm is ~45 (one pass) or ~63 (two)
    for passes, momentum in ((1, 0.0), (2, 0.9)):
        updates = tape_updates(hvd.Compression.topk(ratio, min_size=MIN_SIZE, momentum=momentum,
                                                    clip_norm=clip_norm), steps, passes)
        check_clipped_updates(updates, size, ratio, passes, momentum, clip_norm, assert_close,
                              "passes %d, momentum %g" % (passes, momentum))
    updates = tape_updates(hvd.Compression.topk(ratio, min_size=MIN_SIZE, clip_norm=1e6), 2)
    for step, ((uw, _), ref) in enumerate(zip(updates, dgc_reference(size, 2, ratio)[0])):
        assert_close(uw, ref, "W's update of step %d, clip_norm above the norms" % step)


@check
def topk_selects_largest():
    """compress(tensor, key) on its own: the k elements of residual + gradient largest in
    magnitude."""
    compression = hvd.Compression.topk(0.01, min_size=MIN_SIZE)
    residual = np.zeros(SHAPE[0] * SHAPE[1])
    for step in range(3):
        g = grads(hvd.rank(), step)[0]
        accumulated = residual + g.reshape(-1)
        slices, _ = compression.compress(tf.constant(g), "w")
        chosen = set(slices.indices.numpy().tolist())
        want = largest(accumulated, 20)
        assert chosen == want, sorted(chosen ^ want)
        residual = accumulated.copy()
        residual[sorted(chosen)] = 0
        assert_close(compression.residual("w").numpy(), residual, "residual")


@check
def topk_sampled_threshold_is_exact():
    """Above topk_sample_plan's size the k largest magnitudes are found among those at or
    above a sampled threshold: the same magnitudes as tf.math.top_k of all of them (ties may
    pick other indices of equal magnitude) for random, tied, zero, skewed and infinite inputs,
    eagerly and in a tf.function, also when the threshold leaves fewer than k (forced: the
    whole tensor's top_k); NaNs count as largest (tf.math.top_k alone places them anywhere:
    the reference ranks them as infinities)."""
    import zen.tensorflow.topk as topk_module
    n = SAMPLED_NUMEL
    rng = np.random.default_rng(100 + hvd.rank())
    skewed = np.zeros(n, np.float32)
    skewed[:n // 64] = rng.random(n // 64) + 1  # the large ones all in one block
    with_inf = rng.standard_normal(n).astype(np.float32)
    with_inf[3] = np.inf
    with_nan = rng.standard_normal(n).astype(np.float32)
    with_nan[[7, n - 1]] = np.nan
    inputs = {"nan": with_nan, "normal": rng.standard_normal(n).astype(np.float32),
              "tied": rng.integers(0, 3, n).astype(np.float32),
              "zeros": np.zeros(n, np.float32), "skewed": skewed, "inf": with_inf,
              "float64": rng.standard_normal(n)}
    for label, k, plan in sampled_cases():
        traced = tf.function(lambda m, k=k, plan=plan: topk_module._largest_by(m, k, plan))
        for name, values in inputs.items():
            magnitudes = tf.abs(tf.constant(values))
            ranked = np.nan_to_num(np.abs(values), nan=np.inf, posinf=np.inf)
            want = np.sort(tf.math.top_k(ranked, k).values.numpy())
            for how, largest_of in (
                    ("eager", lambda m, k=k, plan=plan: topk_module._largest_by(m, k, plan)),
                    ("tf.function", traced)):
                chosen = largest_of(magnitudes).numpy()
                what = "%s at %s, %s" % (name, label, how)
                assert chosen.dtype == np.int64, what
                assert len(set(chosen.tolist())) == k == len(chosen), what
                assert np.array_equal(np.sort(ranked[chosen]), want), what
    assert topk_sample_plan(4096, 40) is None  # small: top_k of all


@check
def topk_half_precision_keeps_float32_state():
    """float16 and bfloat16 gradients: the residual (and the momentum) are float32 and the
    elements sent travel in the gradient's dtype, what that rounding drops kept in the
    residual: over 100 steps of small gradients, what was sent plus the residual is their sum
    to float32 precision; the daemon sums what is sent in the gradient's dtype (the same
    gradients on every rank: size times each rank's)."""
    n, steps, size = 4096, 100, hvd.size()
    for dtype in (tf.float16, tf.bfloat16):
        rng = np.random.default_rng(7)
        compression = hvd.Compression.topk(0.01, min_size=MIN_SIZE)
        with_momentum = hvd.Compression.topk(0.01, min_size=MIN_SIZE, momentum=0.9)
        total, sent_total = np.zeros(n), np.zeros(n)
        for step in range(steps):
            grad = tf.cast(rng.random(n) * 1e-3 + 1e-3, dtype)
            total += tf.cast(grad, tf.float64).numpy()
            slices, _ = compression.compress(grad, "w")
            assert slices.values.dtype == dtype, slices.values.dtype
            sent = tf.scatter_nd(tf.expand_dims(slices.indices, 1), slices.values, [n])
            sent_total += tf.cast(sent, tf.float64).numpy()
            with_momentum.compress(grad, "w")
            if step == steps - 1:
                out = hvd.allreduce(slices, op=hvd.Sum, name="topk.half.%s" % dtype.name)
                dense = tf.scatter_nd(tf.expand_dims(out.indices, 1), out.values, [n])
                assert dense.dtype == dtype
                assert np.array_equal(tf.cast(dense, tf.float64).numpy(),
                                      tf.cast(sent, tf.float64).numpy() * size)
        residual = compression.residual("w")
        assert residual.dtype == tf.float32, residual.dtype
        assert with_momentum.residual("w").dtype == tf.float32
        assert with_momentum.momentum_buffer("w").dtype == tf.float32
        assert_close(sent_total + residual.numpy(), total, "sent + residual (%s)" % dtype.name,
                     1e-5)


@check
def topk_keras_ratio_one_is_dense():
    """Keras DistributedOptimizer with topk(1.0) (everything sent) and with plain SGD
    momentum against topk's momentum correction (no masking): the same variables as the
    dense runs."""
    def fit(compression, momentum):
        w = tf.Variable(tf.zeros(SHAPE, tf.float64))
        b = tf.Variable(tf.zeros(BIAS, tf.float64))
        opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=momentum),
                                       compression=compression)
        for step in range(3):
            g, h = step_grads(hvd.rank(), step)
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(w * g) + tf.reduce_sum(b * h)
            opt.apply_gradients(zip(tape.gradient(loss, [w, b]), [w, b]))
        return w.numpy(), b.numpy()
    for momentum in (0.0, 0.9):
        want = fit(hvd.Compression.none, momentum)
        got = fit(hvd.Compression.topk(1.0, min_size=1, momentum=momentum,
                                       momentum_masking=False), 0.0)
        # Keras's SGD holds its momentum as float32 (0.9 is 0.89999998): 1e-7, not 1e-12.
        tol = 1e-7 if momentum else TOL
        assert_close(got[0], want[0], "W (momentum %g)" % momentum, tol)
        assert_close(got[1], want[1], "b (momentum %g)" % momentum, tol)


@check
def topk_keras_two_passes():
    """Keras DistributedOptimizer(backward_passes_per_step=2) with topk(0.02): the two passes
    are summed locally, then compressed once (the variables are -lr times dgc_reference's
    updates of the summed gradients)."""
    size, steps, ratio = hvd.size(), 3, 0.02
    w = tf.Variable(tf.zeros(SHAPE, tf.float64))
    b = tf.Variable(tf.zeros(BIAS, tf.float64))
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(1.0), backward_passes_per_step=2,
                                   compression=hvd.Compression.topk(ratio, min_size=MIN_SIZE))
    for step in range(steps):
        for k in range(2):
            g, h = grads(hvd.rank(), step, k)
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(w * g) + tf.reduce_sum(b * h)
            opt.apply_gradients(zip(tape.gradient(loss, [w, b]), [w, b]))
    want, _ = dgc_reference(size, steps, ratio, passes=2)
    assert_close(w.numpy(), -sum(want), "W")
    want_b = -sum(step_grads(r, s, 2)[1] for r in range(size) for s in range(steps)) / size
    assert_close(b.numpy(), want_b, "b")


@check
def topk_keras_ratio_schedule_in_fit():
    """TopKRatioScheduleCallback: Model.fit with ratios 1.0, 0.5, then 0.02 per epoch runs each
    epoch with its k (the train function traced anew), the residual kept across; the same
    changes without a retrace fail fit's next step naming the retrace."""
    from zen.tensorflow.keras.callbacks import TopKRatioScheduleCallback
    rng = np.random.default_rng(11)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    y = rng.standard_normal((64, 8)).astype(np.float32)

    def fit(compression, callback):
        keras.utils.set_random_seed(3)
        model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(8)])
        model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01),
                                                         compression=compression), loss="mse")
        model.fit(x, y, batch_size=16, epochs=4, callbacks=[callback], verbose=0)
    compression = hvd.Compression.topk(1.0, min_size=MIN_SIZE)
    ratios = []
    schedule = TopKRatioScheduleCallback(compression, [1.0, 0.5, 0.02])
    seen = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: ratios.append(compression.ratio))
    fit(compression, keras.callbacks.CallbackList([schedule, seen]))
    assert ratios == [1.0, 0.5, 0.02, 0.02], ratios
    residuals = [v for v in compression._residuals.values()]
    assert len(residuals) == 1 and float(tf.reduce_sum(tf.abs(residuals[0]))) > 0
    untraced = hvd.Compression.topk(1.0, min_size=MIN_SIZE)

    def set_ratio(epoch, logs):
        untraced.ratio = [1.0, 0.5][min(epoch, 1)]
    expect_raises(tf.errors.InvalidArgumentError,
                  lambda: fit(untraced, keras.callbacks.LambdaCallback(on_epoch_begin=set_ratio)),
                  "trace it again")


if __name__ == "__main__":
    sys.exit(run_checks(hvd, CHECKS, sys.argv[1:]))
