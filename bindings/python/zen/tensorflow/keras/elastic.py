"""zen.tensorflow.keras.elastic: Horovod's horovod.tensorflow.keras.elastic over Zen: KerasState
(TensorFlowKerasState), run, and the callbacks that keep state.epoch and state.batch and commit.

    state = hvd.elastic.KerasState(model, epoch=0, batch=0)
    callbacks = [hvd.elastic.CommitStateCallback(state, batches_per_commit=10),
                 hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.UpdateEpochStateCallback(state)]

    @hvd.elastic.run
    def train(state):
        model.fit(x, y, initial_epoch=state.epoch, epochs=EPOCHS, callbacks=callbacks)

Differences from Horovod, on purpose:
* state.epoch counts the epochs completed and state.batch the batches completed in the current
  epoch (Horovod stored the index of the last one, so a resumed fit redid an epoch or a batch).
* CommitStateCallback commits at the start of a batch, every batches_per_commit batches: by
  then every callback has recorded the batch (Horovod committed at the batch's end, before the
  callbacks after it in the list had updated the state).
* Keras 3 reads fit's steps per epoch once, so UpdateBatchStateCallback cannot shorten the
  resumed epoch as Horovod's did through params['steps']: resume a partial epoch by fitting its
  remaining batches (from state.batch) first.
"""

import keras

from zen.tensorflow.elastic import TensorFlowKerasState, run

__all__ = ["CommitStateCallback", "KerasState", "UpdateBatchStateCallback",
           "UpdateEpochStateCallback", "run"]


class KerasState(TensorFlowKerasState):
    """State of a Keras model and optimizer (model.optimizer by default), plus plain objects
    (kwargs), exposed as attributes."""

    def __init__(self, model, optimizer=None, **kwargs):
        super().__init__(model, optimizer=optimizer, backend=keras.backend, **kwargs)


class CommitStateCallback(keras.callbacks.Callback):
    """Commits state every batches_per_commit batches (at the start of the next one)."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_train_batch_begin(self, batch, logs=None):
        if self.batches_remaining <= 0:
            self.state.commit()
            self.batches_remaining = self.batches_per_commit

    def on_train_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1


class UpdateBatchStateCallback(keras.callbacks.Callback):
    """Keeps state.batch: the batches completed in the current epoch (0 at its end)."""

    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_train_batch_end(self, batch, logs=None):
        self.state.batch += 1

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallback(keras.callbacks.Callback):
    """Keeps state.epoch: the epochs completed (fit(initial_epoch=state.epoch) resumes)."""

    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_epoch_end(self, epoch, logs=None):
        # Counted, not taken from epoch: fit's epoch numbers start from 0 unless initial_epoch
        # is given, and a partial epoch resumed by its own fit is one epoch too.
        self.state.epoch += 1
