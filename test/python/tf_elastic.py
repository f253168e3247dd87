"""What every rank runs in test_tensorflow.py's elastic job: zen.tensorflow.elastic and
zen.tensorflow.keras.elastic under a plain zenrun (the same world after each reset), check by
check.

    tools/zenrun -np N .venv-tf/bin/python tf_elastic.py [CHECK ...]

A failure is a real one: rank 1 posts an allreduce of another shape, so every rank's
collective fails (tf.errors.InvalidArgumentError naming ZenAllreduce), which run() turns into
HorovodInternalError. Training after a failure must end exactly where the same training
without it ends.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import elastic_steps  # noqa: E402
from rank_report import Checks, add_checkout_package, run_checks  # noqa: E402

add_checkout_package()

import zen.tensorflow as zt  # noqa: E402
import zen.tensorflow.keras as hvd  # noqa: E402
from zen.common.exceptions import HostsUpdatedInterrupt  # noqa: E402

CHECKS = Checks()
check = CHECKS.check
IN, BATCH, STEPS = 3, 4, 8  # BATCH rows per rank and step


def data(seed=5):
    """This rank's rows: STEPS batches of BATCH."""
    rs = np.random.RandomState(seed + hvd.rank())
    x = rs.normal(size=(STEPS * BATCH, IN))
    return x, x @ np.arange(1.0, IN + 1) + 0.5


def new_model(seed):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((IN,)), keras.layers.Dense(1, dtype="float64")])
    return model


def gathered_equal(value, name):
    rows = zt.allgather(tf.reshape(tf.cast(value, tf.float64), [1, -1]), name=name).numpy()
    return all(np.array_equal(rows[0], row) for row in rows)


def fail_everywhere(name):
    """A mismatched allreduce: every rank's fails."""
    zt.allreduce(tf.zeros([3 if hvd.rank() == 1 else 2], tf.float64), name=name)


def run_failing_once(state, fail_at, name, step_fn):
    """step_fn(state) for each step up to STEPS under zen.tensorflow.elastic.run, committing
    every 2 steps; at step fail_at (once) every rank's allreduce fails."""
    elastic_steps.run_failing_once(zt.elastic.run, state, STEPS, 2, fail_at,
                                   lambda: fail_everywhere(name), step_fn)


@check
def keras_state_save_restore_sync():
    """TensorFlowKerasState / KerasState: commit saves weights, optimizer slots and objects;
    restore undoes later changes; sync makes rank 0's everyone's, a worker whose optimizer is
    not built yet included (the state builds it)."""
    x, y = data()
    model = new_model(10 + hvd.rank())
    model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9), loss="mse")
    if hvd.rank() == 0:  # rank 0 has stepped (slots built), the others have not
        model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    state = hvd.elastic.KerasState(model, epoch=2, seen=[hvd.rank()])
    assert model.optimizer.built
    state.sync()
    for i, v in enumerate(model.variables + list(model.optimizer.variables)):
        assert gathered_equal(v, "keras.sync.%d" % i), v.path
    assert state.epoch == 2 and state.seen == [0]
    committed = [np.array(v) for v in model.variables + list(model.optimizer.variables)]
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    state.seen.append(5)
    state.epoch = 3
    state.restore()
    now = [np.array(v) for v in model.variables + list(model.optimizer.variables)]
    assert all(np.array_equal(a, b) for a, b in zip(now, committed))
    assert state.epoch == 2 and state.seen == [0]


@check
def tensorflow_state_recovers_in_run():
    """TensorFlowState under zen.tensorflow.elastic.run: a failure at step 5 (last commit at
    step 4) restores, resets, syncs and redoes step 4; the variables end equal to the run
    without the failure, and every rank's equal."""
    x, y = data()

    def train(fail_at):
        rs = np.random.RandomState(1 + hvd.rank())  # the sync makes rank 0's everyone's
        w = tf.Variable(rs.normal(size=(IN,)))
        b = tf.Variable(0.0, dtype=tf.float64)
        state = zt.elastic.TensorFlowState([w, b], step=0)
        resets = []
        state.register_reset_callbacks([lambda: resets.append(zt.size())])

        def step(state):
            rows = slice(state.step * BATCH, (state.step + 1) * BATCH)
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum((tf.linalg.matvec(x[rows], w) + b - y[rows]) ** 2)
            for v, g in zip((w, b), tape.gradient(loss, [w, b])):
                v.assign_sub(0.01 * zt.allreduce(g, op=zt.Sum, name="tf.g.%s" % v.name))

        run_failing_once(state, fail_at, "tf.fail", step)
        return np.concatenate([w.numpy(), [b.numpy()]]), resets

    plain, resets = train(-1)
    assert resets == []
    got, resets = train(5)
    assert resets == [zt.size()], resets
    assert np.array_equal(got, plain), np.abs(got - plain).max()
    assert gathered_equal(got, "tf.final")


@check
def keras_state_restores_topk_residuals():
    """A DistributedOptimizer with Compression.topk(0.4, momentum 0.5, min_size=1) under
    KerasState: after a failure at step 5 (last commit at step 4) the weights, the residual
    and the momentum equal those of the run without the failure to 1e-12 (the sparse allreduce
    may sum in another order; kept at their step 5 values, step 4's unsent part would be sent
    twice)."""
    x, y = data()

    def train(fail_at):
        model = new_model(20 + hvd.rank())  # the sync makes rank 0's everyone's
        compression = hvd.Compression.topk(0.4, min_size=1, momentum=0.5)
        opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01), compression=compression)
        opt.build(model.trainable_variables)
        state = hvd.elastic.KerasState(model, opt, step=0)

        def step(state):
            rows = slice(state.step * BATCH, (state.step + 1) * BATCH)
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum((model(x[rows])[:, 0] - y[rows]) ** 2)
            variables = model.trainable_variables
            opt.apply_gradients(zip(tape.gradient(loss, variables), variables))

        run_failing_once(state, fail_at, "topk.fail", step)
        kept = [np.array(v) for v in compression._residuals.values()] + \
            [np.array(v) for v in compression._momenta.values()]
        return [np.array(v) for v in model.variables], kept

    plain, plain_kept = train(-1)
    assert plain_kept and any(np.abs(k).sum() > 0 for k in plain_kept), "no residual: no test"
    got, got_kept = train(5)
    assert len(got) == len(plain) and len(got_kept) == len(plain_kept)
    for a, b in zip(got + got_kept, plain + plain_kept):
        assert np.abs(a - b).max() <= 1e-12, (a, b)


@check
def keras_fit_recovers_with_callbacks():
    """Keras fit with CommitStateCallback (every 2 batches), UpdateBatchStateCallback,
    UpdateEpochStateCallback and a DistributedOptimizer: a failure in epoch 1 at batch 3
    (the commit at its batch 2) resumes the epoch from batch 2 through its own fit, one at
    epoch 0 batch 1 (no commit yet) starts again; the weights end equal to the run without
    it."""
    x, y = data()
    epochs = 3

    def train(fail_at):
        model = new_model(3 + hvd.rank())
        model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01,
                                                                               momentum=0.9)),
                      loss="mse")
        model.build((None, IN))
        state = hvd.elastic.KerasState(model, epoch=0, batch=0)
        seen = []

        class Fail(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                seen.append((state.epoch, state.batch))
                if (state.epoch, state.batch) == fail_at and \
                        not getattr(self, "done", False):
                    self.done = True
                    fail_everywhere("keras.fail")

        fail = Fail()
        callbacks = [hvd.elastic.CommitStateCallback(state, batches_per_commit=2), fail,
                     hvd.elastic.UpdateBatchStateCallback(state),
                     hvd.elastic.UpdateEpochStateCallback(state)]

        @hvd.elastic.run
        def loop(state):
            while state.epoch < epochs:
                start = state.batch * BATCH
                model.fit(x[start:], y[start:], batch_size=BATCH, initial_epoch=state.epoch,
                          epochs=state.epoch + 1, shuffle=False, verbose=0,
                          callbacks=callbacks)

        loop(state)
        assert state.epoch == epochs and state.batch == 0
        return [np.array(v) for v in model.weights], seen

    plain, seen = train(None)
    assert len(seen) == epochs * STEPS
    got, seen = train((1, 3))
    # Epoch 1 ran batches 0-2, failed at 3, resumed from the commit at 2.
    assert seen[STEPS:STEPS + 6] == [(1, 0), (1, 1), (1, 2), (1, 3), (1, 2), (1, 3)], seen
    assert all(np.array_equal(a, b) for a, b in zip(got, plain))
    assert all(gathered_equal(w, "keras.final.%d" % i) for i, w in enumerate(got))
    # Before the first commit: back to the start, the momentum slots to their initial zeros.
    got, seen = train((0, 1))
    assert seen[:3] == [(0, 0), (0, 1), (0, 0)], seen
    assert all(np.array_equal(a, b) for a, b in zip(got, plain))


@check
def hosts_updated_interrupt_in_keras_state():
    """A change of workers told to rank 0 reaches every rank at the same commit through the
    broadcast; run resets without restoring or syncing (workers removed only)."""

    class Scripted(hvd.elastic.KerasState):
        answers = [None, (3, True), None]

        def _pending_update(self):
            assert hvd.rank() == 0
            return self.answers.pop(0)

    model = new_model(1)
    state = Scripted(model, n=0)
    events = []
    state.register_reset_callbacks([lambda: events.append(("reset", state.n))])

    @hvd.elastic.run
    def loop(state):
        while state.n < 3:
            state.n += 1
            try:
                state.commit()
            except HostsUpdatedInterrupt as e:
                events.append(("interrupt", state.n, e.skip_sync))
                raise

    loop(state)
    assert events == [("interrupt", 2, True), ("reset", 2)], events


@check
def other_errors_propagate():
    """run lets errors that are not zen's through (Horovod's wrapper returned None)."""

    @hvd.elastic.run
    def loop(state):
        tf.reshape(tf.zeros([3]), [2])

    try:
        loop(hvd.elastic.KerasState(new_model(2)))
    except tf.errors.InvalidArgumentError as e:
        assert "Zen" not in e.message
    else:
        raise AssertionError("not raised")


if __name__ == "__main__":
    sys.exit(run_checks(zt, CHECKS, sys.argv[1:]))
