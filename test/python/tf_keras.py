"""What every rank runs in test_tensorflow.py's Keras jobs: zen.tensorflow.keras (callbacks,
load_model, the Keras collectives) and DistributedOptimizer(backward_passes_per_step=N),
each against an expectation computed here without zen: closed-form learning rates, every
rank's metrics recomputed from every rank's data, and one-process training on the global
batches with plain TF gradients.

    tools/zenrun -np N .venv-tf/bin/python tf_keras.py [CHECK ...]

Prints `ZENTEST {"check": ..., "ok": ..., "error": ...}` per check and rank (rank_report.py).
Rank r's slice of a global batch is rows [r * B/N, (r + 1) * B/N); the losses are means, so
the average of the ranks' gradients is the global batch's.
"""

import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from rank_report import Checks, add_checkout_package, expect_raises, run_checks  # noqa: E402

add_checkout_package()

import zen.tensorflow.keras as hvd  # noqa: E402
from zen.tensorflow import barrier  # noqa: E402
from build_info import check_build_info  # noqa: E402

CHECKS = Checks()
check = CHECKS.check
GLOBAL_BATCH, IN, OUT = 8, 3, 2
VOCAB, DIM, LENGTH, CLASSES = 32, 4, 5, 3


def close(got, want, tol=1e-5, what=""):
    diff = float(np.max(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))))
    assert diff <= tol, "%s differs by %g: got %s, want %s" % (what, diff, got, want)


def local_rows(a, rank=None, size=None):
    """Rank's rows of every global batch of a (stacked global batches)."""
    rank = hvd.rank() if rank is None else rank
    size = hvd.size() if size is None else size
    local = GLOBAL_BATCH // size
    batches = a.reshape((-1, GLOBAL_BATCH) + a.shape[1:])
    return batches[:, rank * local:(rank + 1) * local].reshape((-1,) + a.shape[1:])


# ---- a linear model (dense gradients) and its reference ----

def linear_data(steps, seed=5):
    rs = np.random.RandomState(seed)
    return (rs.normal(size=(steps * GLOBAL_BATCH, IN)).astype(np.float32),
            rs.normal(size=(steps * GLOBAL_BATCH, OUT)).astype(np.float32))


def linear_init(offset=0.0):
    rs = np.random.RandomState(11)
    return [rs.normal(size=(IN, OUT)).astype(np.float32) + offset,
            rs.normal(size=OUT).astype(np.float32) + offset]


def linear_model(values, optimizer, **compile_args):
    model = keras.Sequential([keras.Input((IN,)), keras.layers.Dense(OUT)])
    model.set_weights(values)
    model.compile(optimizer=optimizer, loss="mse", **compile_args)
    return model


def linear_grads(values, x, y):
    """d mean((x W + b - y)^2) / d(W, b), with plain TF (no Keras, no zen)."""
    w, b = [tf.Variable(v) for v in values]
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
    return [g.numpy() for g in tape.gradient(loss, [w, b])]


def mean_over_ranks(fn):
    return np.mean([fn(r) for r in range(hvd.size())], axis=0)


# ---- BroadcastGlobalVariablesCallback ----

@check
def build_info():
    """zen.tensorflow.keras has horovod.tensorflow.keras's build and launch queries."""
    check_build_info(hvd)


@check
def broadcast_callback_gives_rank0_weights():
    """lr 0: after fit every rank holds rank 0's initial weights (each rank started from its
    own), but for the local variable, which keeps this rank's."""
    x, y = linear_data(1)
    model = linear_model(linear_init(hvd.rank()),
                         hvd.DistributedOptimizer(keras.optimizers.SGD(0.0)))
    kernel, bias = model.layers[0].kernel, model.layers[0].bias
    cb = hvd.callbacks.BroadcastGlobalVariablesCallback(0, local_variables=[bias])
    model.fit(local_rows(x), local_rows(y), batch_size=GLOBAL_BATCH // hvd.size(),
              shuffle=False, verbose=0, callbacks=[cb])
    assert cb.broadcast_done
    close(kernel.numpy(), linear_init(0)[0], 0, "kernel")
    close(bias.numpy(), linear_init(hvd.rank())[1], 0, "local bias")


@check
def broadcast_callback_after_first_batch():
    """SGD with momentum, each rank from its own weights: the first step averages gradients
    taken at different weights and applies them to rank 0's; the broadcast at the end of
    that batch makes weights and momentum rank 0's; the rest is data-parallel SGD."""
    steps, lr, mom = 3, 0.1, 0.9
    x, y = linear_data(steps)
    model = linear_model(linear_init(hvd.rank()),
                         hvd.DistributedOptimizer(keras.optimizers.SGD(lr, momentum=mom)))
    model.fit(local_rows(x), local_rows(y), batch_size=GLOBAL_BATCH // hvd.size(),
              shuffle=False, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    want, velocity = linear_init(0), [0.0, 0.0]
    for step in range(steps):
        rows = slice(step * GLOBAL_BATCH, (step + 1) * GLOBAL_BATCH)
        if step == 0:
            grads = mean_over_ranks(lambda r: np.concatenate([g.ravel() for g in linear_grads(
                linear_init(r), local_rows(x[rows], r), local_rows(y[rows], r))]))
            grads = [grads[:IN * OUT].reshape(IN, OUT), grads[IN * OUT:]]
        else:
            grads = linear_grads(want, x[rows], y[rows])
        velocity = [mom * v - lr * g for v, g in zip(velocity, grads)]
        want = [w + v for w, v in zip(want, velocity)]
    for got, w, what in zip(model.get_weights(), want, ("kernel", "bias")):
        close(got, w, 1e-5, what)
    close(model.optimizer.momentums[0].numpy(), velocity[0], 1e-5, "momentum")


# ---- MetricAverageCallback ----

@check
def metric_average_callback_logs():
    """Logs in a rank-dependent order with rank-dependent values: each becomes the mean."""
    rank, size = hvd.rank(), hvd.size()
    items = [("loss", 1.0 + rank), ("acc", 10.0 * rank), ("val_loss", rank * rank)]
    logs = dict(items if rank % 2 == 0 else reversed(items))
    hvd.callbacks.MetricAverageCallback().on_epoch_end(0, logs)
    ranks = np.arange(size)
    want = {"loss": np.mean(1.0 + ranks), "acc": np.mean(10.0 * ranks),
            "val_loss": np.mean(ranks * ranks)}
    assert sorted(logs) == sorted(want), logs
    for name in want:
        close(logs[name], want[name], 1e-6, name)


@check
def metric_average_callback_in_fit():
    """lr 0 (fixed weights): History's loss, mae, val_loss and val_mae are the means over the
    ranks of each rank's value, recomputed here from every rank's data."""
    x, y = linear_data(2)
    vx, vy = linear_data(1, seed=9)
    values = linear_init(0)
    model = linear_model(values, hvd.DistributedOptimizer(keras.optimizers.SGD(0.0)),
                         metrics=["mae"])
    history = model.fit(local_rows(x), local_rows(y), batch_size=GLOBAL_BATCH // hvd.size(),
                        validation_data=(local_rows(vx), local_rows(vy)), shuffle=False,
                        verbose=0, callbacks=[hvd.callbacks.MetricAverageCallback()])

    def errors(r, xs, ys):
        return np.asarray(local_rows(xs, r) @ values[0] + values[1] - local_rows(ys, r),
                          np.float64)

    want = {"loss": mean_over_ranks(lambda r: np.mean(errors(r, x, y) ** 2)),
            "mae": mean_over_ranks(lambda r: np.mean(np.abs(errors(r, x, y)))),
            "val_loss": mean_over_ranks(lambda r: np.mean(errors(r, vx, vy) ** 2)),
            "val_mae": mean_over_ranks(lambda r: np.mean(np.abs(errors(r, vx, vy))))}
    for name, value in want.items():
        close(history.history[name][0], value, 1e-5, name)
    if hvd.size() > 1:  # the ranks' own values differ: averaging did something
        own = np.mean(errors(hvd.rank(), x, y) ** 2)
        assert abs(own - want["loss"]) > 1e-3, (own, want["loss"])


class ScriptedScore(keras.callbacks.Callback):
    """Logs 'score' = mean[epoch] + this rank's offset (zero summed over the ranks), records
    the weights and rank 0's checkpoint file's modification time at each epoch's end."""

    def __init__(self, mean, spread, path):
        super().__init__()
        self.mean, self.spread, self.path = mean, spread, path
        self.weights, self.stamps = [], []

    def on_epoch_end(self, epoch, logs=None):
        offset = (hvd.rank() - (hvd.size() - 1) / 2) * self.spread[epoch]
        logs["score"] = self.mean[epoch] + offset

    def record(self, epoch):
        self.weights.append([w.copy() for w in self.model.get_weights()])
        self.stamps.append(os.stat(self.path).st_mtime_ns if os.path.exists(self.path)
                           else None)


@check
def best_model_checkpoint():
    """BestModelCheckpoint(monitor='score', mode='min') after MetricAverageCallback, its
    filepath set afterwards as Horovod's estimators do: rank 0 saves at the epochs where the
    ranks' mean score improves (0 and 1 of 3, 1, 2, 4; rank 0's own scores would pick other
    epochs) and the file holds epoch 1's weights; the other ranks write nothing; no filepath:
    ValueError at the start of training."""
    x, y = linear_data(2)
    path = os.path.join(tempfile.mkdtemp(), "best.keras")
    scores = ScriptedScore([3.0, 1.0, 2.0, 4.0], [0.0, -4.0, 0.0, 4.0], path)
    checkpoint = hvd.callbacks.BestModelCheckpoint(monitor="score", mode="min")
    checkpoint.filepath = path
    recorder = keras.callbacks.LambdaCallback(on_epoch_end=lambda e, _: scores.record(e))
    model = linear_model(linear_init(0), hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)))
    model.fit(local_rows(x), local_rows(y), batch_size=GLOBAL_BATCH // hvd.size(), epochs=4,
              shuffle=False, verbose=0,
              callbacks=[scores, hvd.callbacks.MetricAverageCallback(), checkpoint, recorder])
    if hvd.rank() != 0:
        assert scores.stamps == [None] * 4, scores.stamps
    else:
        saved = [e for e in range(4) if scores.stamps[e] is not None and
                 (e == 0 or scores.stamps[e] != scores.stamps[e - 1])]
        assert saved == [0, 1], saved
        for got, want in zip(keras.models.load_model(path).get_weights(), scores.weights[1]):
            close(got, want, 0, "saved weights")
        close(checkpoint.best, 1.0, 1e-6, "best")
    assert not np.allclose(scores.weights[1][0], scores.weights[3][0])  # the epochs differ
    expect_raises(ValueError, lambda: model.fit(
        local_rows(x), local_rows(y), verbose=0,
        callbacks=[hvd.callbacks.BestModelCheckpoint()]), "needs a filepath")


# ---- LearningRateScheduleCallback, LearningRateWarmupCallback ----

class LrRecorder(keras.callbacks.Callback):
    """The learning rate each batch runs with (read after the schedule set it)."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def on_train_batch_begin(self, batch, logs=None):
        self.seen.append(float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)))


def fit_recording(schedule, epochs, steps, lr=0.3, momentum=0.0):
    """Model.fit of the linear model with schedule, `steps` batches an epoch (each epoch the
    same); (learning rates per batch, History, model)."""
    x, y = linear_data(steps)
    model = linear_model(linear_init(0), hvd.DistributedOptimizer(
        keras.optimizers.SGD(lr, momentum=momentum)))
    recorder = LrRecorder()
    history = model.fit(local_rows(x), local_rows(y), batch_size=GLOBAL_BATCH // hvd.size(),
                        epochs=epochs, shuffle=False, verbose=0,
                        callbacks=[schedule, recorder])
    return recorder.seen, history, model


@check
def lr_schedule_staircase():
    """multiplier 0.5 from epoch 1 to 3: epoch 0 keeps the optimizer's 0.3, epochs 1, 2 get
    0.2 * 0.5 ** (epoch - 1), epoch 3 keeps the last; 'lr' is logged at each epoch's end."""
    schedule = hvd.callbacks.LearningRateScheduleCallback(0.2, 0.5, start_epoch=1, end_epoch=3)
    seen, history, _ = fit_recording(schedule, epochs=4, steps=2)
    want = [0.3, 0.3, 0.2, 0.2, 0.1, 0.1, 0.1, 0.1]
    close(seen, want, 1e-7, "lr per batch")
    close(history.history["lr"], [0.3, 0.2, 0.1, 0.1], 1e-7, "logged lr")


@check
def lr_schedule_smooth_with_momentum_correction():
    """staircase=False, a callable multiplier, steps_per_epoch from fit's params: lr =
    initial * f(epoch + batch / steps) at every batch. Momentum correction against Horovod's
    definition: the batch after a change runs with momentum * new_lr / old_lr."""
    epochs, steps, mom = 2, 3, 0.9

    def f(epoch):
        return 1.0 / (1.0 + epoch)

    schedule = hvd.callbacks.LearningRateScheduleCallback(0.2, f, staircase=False)
    seen, _, model = fit_recording(schedule, epochs, steps, lr=0.3, momentum=mom)
    want_lrs = [0.2 * f(e + b / steps) for e in range(epochs) for b in range(steps)]
    close(seen, want_lrs, 1e-7, "lr per batch")
    x, y = linear_data(steps)
    want, velocity, old_lr = linear_init(0), [0.0, 0.0], 0.3
    for step, lr in enumerate(want_lrs):
        rows = slice(step % steps * GLOBAL_BATCH, (step % steps + 1) * GLOBAL_BATCH)
        grads = linear_grads(want, x[rows], y[rows])
        velocity = [mom * lr / old_lr * v - lr * g for v, g in zip(velocity, grads)]
        want = [w + v for w, v in zip(want, velocity)]
        old_lr = lr
    for got, w, what in zip(model.get_weights(), want, ("kernel", "bias")):
        close(got, w, 1e-5, what)


@check
def lr_warmup():
    """initial_lr / size * ((epoch + (batch + 1) / steps) * (size - 1) / warmup + 1) during
    the warmup, then initial_lr's value reached at its last batch."""
    size, steps, warmup, lr0 = hvd.size(), 2, 2, 0.4
    schedule = hvd.callbacks.LearningRateWarmupCallback(lr0, warmup_epochs=warmup, verbose=1)
    seen, history, _ = fit_recording(schedule, epochs=3, steps=steps)
    want = [lr0 / size * ((e + (b + 1.0) / steps) * (size - 1) / warmup + 1)
            for e in range(warmup) for b in range(steps)]
    want += [lr0] * steps
    close(seen, want, 1e-7, "lr per batch")
    close(history.history["lr"][-1], lr0, 1e-7, "final lr")


# ---- DistributedOptimizer(backward_passes_per_step=N) ----

def lm_data(passes, seed=3):
    rs = np.random.RandomState(seed)
    p = 1.0 / np.arange(1, VOCAB + 1)
    ids = rs.choice(VOCAB, size=(passes * GLOBAL_BATCH, LENGTH), p=p / p.sum())
    return ids.astype(np.int64), rs.randint(0, CLASSES, size=passes * GLOBAL_BATCH)


def lm_init():
    rs = np.random.RandomState(7)
    return [rs.normal(size=(VOCAB, DIM)).astype(np.float32),
            rs.normal(size=(DIM, CLASSES)).astype(np.float32) * 0.5,
            np.zeros(CLASSES, np.float32)]


def lm_model():
    """Embedding (tf.IndexedSlices gradient) and Dense (dense gradients)."""
    model = keras.Sequential([keras.Input((LENGTH,), dtype="int64"),
                              keras.layers.Embedding(VOCAB, DIM),
                              keras.layers.GlobalAveragePooling1D(),
                              keras.layers.Activation("tanh"), keras.layers.Dense(CLASSES)])
    model.set_weights(lm_init())
    return model


LM_LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def lm_reference(passes, n, average, lr, mom):
    """One process, plain TF, dense gradients: every n passes one SGD-momentum step with the
    sum (average: mean) of the n global batches' gradients, all taken at the same weights."""
    ids, labels = lm_data(passes)
    variables = [tf.Variable(v) for v in lm_init()]
    velocity = [np.zeros_like(v) for v in lm_init()]
    total = None
    for step in range(passes):
        rows = slice(step * GLOBAL_BATCH, (step + 1) * GLOBAL_BATCH)
        with tf.GradientTape() as tape:
            emb, w, b = variables
            hidden = tf.tanh(tf.reduce_mean(tf.gather(emb, ids[rows]), axis=1))
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=labels[rows], logits=tf.matmul(hidden, w) + b))
        grads = [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, variables)]
        total = grads if total is None else [t + g for t, g in zip(total, grads)]
        if (step + 1) % n == 0:
            applied = [t / n for t in total] if average else total
            velocity = [mom * v - lr * g for v, g in zip(velocity, applied)]
            for var, v in zip(variables, velocity):
                var.assign_add(v)
            total = None
    return [v.numpy() for v in variables]


def train_with_passes(n, average, mode, passes, lr, mom):
    model = lm_model()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(lr, momentum=mom),
                                   backward_passes_per_step=n,
                                   average_aggregated_gradients=average)
    ids, labels = (local_rows(a) for a in lm_data(passes))
    local = GLOBAL_BATCH // hvd.size()
    if mode == "fit":
        model.compile(optimizer=opt, loss=LM_LOSS)
        model.fit(ids, labels, batch_size=local, shuffle=False, verbose=0)
        return model, opt

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = LM_LOSS(y, model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        assert isinstance(grads[0], tf.IndexedSlices), type(grads[0])
        opt.apply_gradients(zip(grads, model.trainable_variables))

    if mode == "function":
        step = tf.function(step)
    before = [v.numpy() for v in model.trainable_variables]
    for i in range(passes):
        step(ids[i * local:(i + 1) * local], labels[i * local:(i + 1) * local])
        if i == 0:  # a pass that only aggregates leaves weights and momentum alone
            for v, b in zip(model.trainable_variables, before):
                close(v.numpy(), b, 0, "weights after an aggregating pass")
            for m in opt.momentums:
                close(m.numpy(), np.zeros(m.shape), 0, "momentum after an aggregating pass")
    return model, opt


@check
def backward_passes_per_step():
    """N = 2 and 3, summed and averaged, under Model.fit, an eager loop and a tf.function
    loop: the weights of one-process training with the aggregated batches, every pass
    counted in iterations, the embedding's gradient aggregated as tf.IndexedSlices."""
    for n, average, mode in ((2, False, "fit"), (3, True, "fit"), (2, True, "eager"),
                             (3, False, "function")):
        label = "N=%d average=%s %s: " % (n, average, mode)
        passes, lr, mom = 2 * n, 0.5, 0.5
        model, opt = train_with_passes(n, average, mode, passes, lr, mom)
        assert int(opt.iterations) == passes, label + str(int(opt.iterations))
        assert opt._zen_aggregation._window.slots[0][1] is not None, label + "embedding not sparse"
        want = lm_reference(passes, n, average, lr, mom)
        for got, w, what in zip(model.get_weights(), want, ("embedding", "kernel", "bias")):
            close(got, w, 2e-5, label + what)


# ---- load_model, the Keras collectives, errors ----

@check
def load_model_wraps_the_optimizer():
    """A model saved while training with DistributedOptimizer: plain Keras loads a plain SGD;
    load_model a DistributedOptimizer with the saved iterations and momentum, and training
    on different data per rank goes on with equal weights on every rank."""
    x, y = linear_data(2)
    model = linear_model(linear_init(0),
                         hvd.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9)))
    model.fit(local_rows(x), local_rows(y), batch_size=GLOBAL_BATCH // hvd.size(),
              shuffle=False, verbose=0)
    path = os.path.join(tempfile.mkdtemp(), "rank%d.keras" % hvd.rank())
    model.save(path)
    plain = keras.models.load_model(path)
    assert not hasattr(plain.optimizer, "_zen_allreduce_grads")
    assert type(plain.optimizer) is keras.optimizers.SGD, type(plain.optimizer)
    loaded = hvd.load_model(path)
    assert isinstance(loaded.optimizer, keras.optimizers.SGD)
    assert hasattr(loaded.optimizer, "_zen_allreduce_grads")
    assert int(loaded.optimizer.iterations) == 2, int(loaded.optimizer.iterations)
    close(loaded.optimizer.momentums[0].numpy(), model.optimizer.momentums[0].numpy(), 0,
          "momentum")
    rs = np.random.RandomState(hvd.rank())
    loaded.fit(rs.normal(size=(4, IN)), rs.normal(size=(4, OUT)), verbose=0)
    for v in loaded.weights:
        gathered = hvd.allgather(np.asarray(v.numpy())[None])
        for r in range(hvd.size()):
            close(gathered[r], gathered[0], 0, "%s on rank %d" % (v.path, r))


@check
def keras_collectives_take_numpy():
    rank, size = hvd.rank(), hvd.size()
    value = np.full([2, 3], float(rank))
    close(hvd.allreduce(value, name="k.avg"), np.full([2, 3], (size - 1) / 2.0), 0, "avg")
    close(hvd.allreduce(value, name="k.sum", op=hvd.Sum),
          np.full([2, 3], size * (size - 1) / 2.0), 0, "sum")
    gathered = hvd.allgather([[rank, rank]], name="k.gather").numpy()
    assert gathered.tolist() == [[r, r] for r in range(size)], gathered
    assert hvd.broadcast([rank + 5], 0, name="k.bcast").numpy().tolist() == [5]
    # reducescatter: row r (of size rows, each rank's value r + rank) summed, to rank r.
    rows = np.arange(size, dtype=np.float64)[:, None] + rank
    piece = hvd.reducescatter(rows, name="k.rs", op=hvd.Sum).numpy()
    assert piece.tolist() == [[size * rank + size * (size - 1) / 2.0]], piece


@check
def invalid_arguments():
    sgd = keras.optimizers.SGD(0.1)
    for bad in (0, -1, 1.5, "2"):
        expect_raises(ValueError, lambda: hvd.DistributedOptimizer(
            sgd, backward_passes_per_step=bad), "backward_passes_per_step")
    expect_raises(ValueError, lambda: hvd.DistributedOptimizer(tf.Variable(1.0)))
    expect_raises(ValueError, lambda: hvd.callbacks.LearningRateScheduleCallback(None, 0.5),
                  "initial_lr")
    smooth = hvd.callbacks.LearningRateWarmupCallback(0.1)
    smooth.set_params({"epochs": 1})  # no steps: nothing to take steps_per_epoch from
    expect_raises(ValueError, lambda: smooth.on_train_begin(), "steps_per_epoch")


if __name__ == "__main__":
    sys.exit(run_checks(hvd, CHECKS, sys.argv[1:], barrier))
