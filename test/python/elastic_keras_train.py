"""What test_elastic_training.py's Keras test runs: Model.fit under zen.tensorflow.keras.elastic
(KerasState, CommitStateCallback, UpdateBatchStateCallback, UpdateEpochStateCallback) in a real
elastic zenrun job, or, with --reference, the same training in one process without zen.

    zenrun --min-np 2 --max-np 3 -np 3 .venv-tf/bin/python elastic_keras_train.py \
        --die-worker I --die-step K --marker-dir D
    .venv-tf/bin/python elastic_keras_train.py --reference

Training: a float64 Dense(1), SGD with momentum, EPOCHS epochs of STEPS global batches of
GLOBAL_BATCH rows (epoch e's order shuffled by seed e); each rank fits its contiguous share of
every global batch, the loss summed (reduction "sum", the learning rate / GLOBAL_BATCH) and the
gradients summed over the ranks (DistributedOptimizer(op=Sum)), so every global step is one
process's step. A resumed epoch fits its remaining batches (from state.batch) in its own fit.
Prints `PARAMS {...}` (float.hex) at the end, and `RESET <size>` per reset.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402

from elastic_faults import die_once_at, training_main, worker_number  # noqa: E402

SAMPLES, FEATURES, GLOBAL_BATCH, EPOCHS = 36, 3, 6, 2
STEPS = SAMPLES // GLOBAL_BATCH


def data():
    rs = np.random.RandomState(3)
    x = rs.normal(size=(SAMPLES, FEATURES))
    return x, x @ np.arange(1.0, FEATURES + 1) - 1.0


def order(epoch):
    return np.random.RandomState(100 + epoch).permutation(SAMPLES)


def new_model(seed, optimizer):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1, dtype="float64")])
    model.compile(optimizer=optimizer, loss=keras.losses.MeanSquaredError(reduction="sum"))
    return model


def sgd():
    return keras.optimizers.SGD(0.02 / GLOBAL_BATCH, momentum=0.9)


def flat(model):
    return [float(v).hex() for w in model.get_weights() for v in np.ravel(w)]


def reference():
    x, y = data()
    model = new_model(0, sgd())
    for epoch in range(EPOCHS):
        idx = order(epoch)
        model.fit(x[idx], y[idx], batch_size=GLOBAL_BATCH, shuffle=False, verbose=0)
    print("PARAMS " + json.dumps({"params": flat(model), "size": 1}), flush=True)


def train(args):
    import zen.tensorflow.keras as hvd

    hvd.init()
    x, y = data()
    model = new_model(0 if worker_number() == 0 else 10 + worker_number(),
                      hvd.DistributedOptimizer(sgd(), op=hvd.Sum))
    state = hvd.elastic.KerasState(model, epoch=0, batch=0)
    state.register_reset_callbacks([lambda: print("RESET %d" % hvd.size(), flush=True)])

    class Die(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            die_once_at(args, state.epoch * STEPS + state.batch)

    callbacks = [hvd.elastic.CommitStateCallback(state, batches_per_commit=2), Die(),
                 hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.UpdateEpochStateCallback(state)]

    @hvd.elastic.run
    def loop(state):
        while state.epoch < EPOCHS:
            local = GLOBAL_BATCH // hvd.size()
            rows = order(state.epoch).reshape(STEPS, GLOBAL_BATCH)[state.batch:]
            mine = rows[:, hvd.rank() * local:(hvd.rank() + 1) * local].reshape(-1)
            model.fit(x[mine], y[mine], batch_size=local, initial_epoch=state.epoch,
                      epochs=state.epoch + 1, shuffle=False, verbose=0, callbacks=callbacks)

    loop(state)
    print("PARAMS " + json.dumps({"params": flat(model), "size": hvd.size(), "rank": hvd.rank(),
                                  "worker": worker_number()}), flush=True)


if __name__ == "__main__":
    sys.exit(training_main(reference, train))
