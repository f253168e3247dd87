"""Keras callbacks of horovod.tensorflow.keras.callbacks, with Horovod's semantics on Keras 3:

- BroadcastGlobalVariablesCallback(root_rank): at the end of the first batch (so that the
  optimizer's slots exist) root_rank's model weights and optimizer variables on every rank.
- MetricAverageCallback(): at each epoch's end every log entry (val_* included) replaced by
  its average over the ranks, in name order (the same on every rank); list it before the
  callbacks that read the logs (ReduceLROnPlateau, TensorBoard, ModelCheckpoint).
- LearningRateScheduleCallback: lr = initial_lr * multiplier(epoch) for start_epoch <= epoch
  < end_epoch, set at the first batch of the epoch (staircase) or at every batch with the
  fractional epoch + batch / steps_per_epoch; a number multiplier means
  multiplier ** (epoch - start_epoch). Logs 'lr' at each epoch's end.
- LearningRateWarmupCallback: lr from initial_lr / size to initial_lr over warmup_epochs,
  per batch: initial_lr / size * (e * (size - 1) / warmup_epochs + 1), e = epoch + (batch +
  1) / steps_per_epoch.
- TopKRatioScheduleCallback(compression, schedule) (Zen's; no Horovod counterpart): DGC's
  warm-up of Compression.topk's ratio in Model.fit. At each epoch's start the ratio becomes
  schedule(epoch) (a callable, or a list whose last ratio holds from then on), and fit's train
  function is traced anew, as k is fixed where it is traced; the residuals stay.
- BestModelCheckpoint(monitor, verbose, save_weights_only, mode, save_freq): Keras's
  ModelCheckpoint with save_best_only=True (a save only when the monitored value improves),
  on rank 0 only. Horovod's takes no filepath (its Spark and Ray estimators set the attribute
  before training); here filepath= may follow its arguments, else set .filepath.

Momentum correction: Horovod scales the optimizer's momentum by new_lr / old_lr for the batch
after a change. Keras 3 optimizers keep momentum as a Python float that the compiled train
step has already captured, so here the momentum buffers (SGD's, RMSprop's) are scaled by
new_lr / old_lr instead, before the batch; the step is the same (momentum * r * m ==
momentum * (r * m)) for SGD and RMSprop; Nesterov SGD gets the correction of Goyal et al.
(arXiv:1706.02677), whose velocity scaling this is.
"""

import warnings

import keras
import numpy as np
import tensorflow as tf

from zen.tensorflow.functions import broadcast_variables
from zen.tensorflow.mpi_ops import allreduce, rank, size


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Broadcasts root_rank's model weights and optimizer variables to every rank once, at
    the end of the first batch, for a consistent start from random weights or a checkpoint.
    local_variables (a variable or a list) stay as they are on each rank."""

    def __init__(self, root_rank, device="", local_variables=None):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        if local_variables is None:
            local_variables = []
        elif not isinstance(local_variables, (list, tuple)):
            local_variables = [local_variables]
        self._local = {id(v) for v in local_variables}
        self.broadcast_done = False

    def on_batch_end(self, batch, logs=None):
        if self.broadcast_done:
            return
        variables = list(self.model.weights)
        if getattr(self.model, "optimizer", None) is not None:
            variables += list(self.model.optimizer.variables)
        broadcast_variables([v for v in variables if id(v) not in self._local],
                            root_rank=self.root_rank)
        self.broadcast_done = True


class MetricAverageCallback(keras.callbacks.Callback):
    """Replaces every entry of the epoch's logs by its average over all ranks, at the end of
    the epoch, so that the callbacks after it (and History) see the global metrics."""

    def __init__(self, device=""):
        super().__init__()
        self.device = device

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        for metric, value in sorted(logs.items()):  # the same order on every rank
            # As Horovod's K.constant: in floatx, so integer logs average exactly too.
            value = tf.constant(value, dtype=keras.config.floatx())
            value = allreduce(value, name="MetricAverageCallback.%s" % metric)
            value = np.asarray(value)
            logs[metric] = value.item() if value.ndim == 0 else value


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the learning rate to initial_lr * multiplier(epoch) between start_epoch and
    end_epoch (exclusive), at the first batch of each epoch (staircase=True) or at every
    batch with epoch + batch / steps_per_epoch (staircase=False; steps_per_epoch from
    Model.fit's params when not given). A number multiplier m means m ** (epoch -
    start_epoch)."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None):
        super().__init__()
        if initial_lr is None:
            raise ValueError("Parameter `initial_lr` is required")
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        if callable(multiplier):
            self.multiplier = multiplier
        else:
            self.multiplier = lambda epoch: multiplier ** (epoch - start_epoch)

    def _autodetect_steps_per_epoch(self):
        if self.params.get("steps"):
            return self.params["steps"]
        if self.params.get("samples") and self.params.get("batch_size"):
            return self.params["samples"] // self.params["batch_size"]
        raise ValueError("Could not autodetect the number of steps per epoch. Please specify "
                         "the steps_per_epoch parameter to the %s()"
                         % self.__class__.__name__)

    def _lr(self):
        return float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))

    def _adjust_learning_rate(self, epoch):
        optimizer = self.model.optimizer
        old_lr = self._lr()
        new_lr = self.initial_lr * self.multiplier(epoch)
        optimizer.learning_rate = new_lr
        if self.momentum_correction and hasattr(optimizer, "momentum") and old_lr != 0:
            for buffer in _momentum_buffers(optimizer):
                buffer.assign(buffer * (new_lr / old_lr))

    def on_train_begin(self, logs=None):
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self._autodetect_steps_per_epoch()

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def on_batch_begin(self, batch, logs=None):
        if (self.current_epoch < self.start_epoch or
                (self.end_epoch is not None and self.current_epoch >= self.end_epoch)):
            return
        if self.staircase and batch == 0:
            self._adjust_learning_rate(self.current_epoch)
        elif not self.staircase:
            self._adjust_learning_rate(self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = self._lr()


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Gradual warmup (Goyal et al., arXiv:1706.02677): the learning rate grows per batch
    from initial_lr / size to initial_lr over warmup_epochs."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        def multiplier(epoch):
            # One batch ahead, so that each epoch ends on a round value (as Horovod).
            epoch += 1.0 / self.steps_per_epoch
            return 1.0 / size() * (epoch * (size() - 1) / warmup_epochs + 1)

        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs,
                         staircase=False, momentum_correction=momentum_correction,
                         steps_per_epoch=steps_per_epoch)
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.end_epoch - 1 and self.verbose > 0 and rank() == 0:
            print("\nEpoch %d: finished gradual learning rate warmup to %g." %
                  (epoch + 1, self._lr()))


class TopKRatioScheduleCallback(keras.callbacks.Callback):
    """compression.ratio = schedule(epoch) at each epoch's start (schedule: a callable, or a
    list of ratios whose last holds from then on), fit's train function traced anew on a
    change (a traced function with the old k fails its next call: zen.tensorflow.topk)."""

    def __init__(self, compression, schedule):
        super().__init__()
        if not callable(schedule):
            ratios = list(schedule)
            if not ratios:
                raise ValueError("TopKRatioScheduleCallback: the schedule has no ratio")

            def schedule(epoch):
                return ratios[min(epoch, len(ratios) - 1)]
        self.compression = compression
        self.schedule = schedule

    def on_epoch_begin(self, epoch, logs=None):
        ratio = self.schedule(epoch)
        if ratio != self.compression.ratio:
            self.compression.ratio = ratio
            self.model.make_train_function(force=True)


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """Saves the model (or its weights) to filepath when the monitored value improves on the
    best so far, on rank 0 only: the ranks hold the same weights, and one file written by
    several ranks at once could be torn. List MetricAverageCallback before it when the value
    differs between ranks, so that rank 0 judges the global one."""

    def __init__(self, monitor="val_loss", verbose=0, save_weights_only=False, mode="auto",
                 save_freq="epoch", filepath=None):
        # Keras checks the file name's suffix: a stand-in until filepath is set.
        stand_in = "best.weights.h5" if save_weights_only else "best.keras"
        super().__init__(filepath=stand_in if filepath is None else filepath, monitor=monitor,
                         verbose=verbose, save_best_only=True,
                         save_weights_only=save_weights_only, mode=mode, save_freq=save_freq)
        if filepath is None:
            self.filepath = None

    def on_train_begin(self, logs=None):
        if self.filepath is None:
            raise ValueError("BestModelCheckpoint needs a filepath: pass filepath= or set its "
                             "filepath attribute before training (Horovod's estimators do)")
        super().on_train_begin(logs)

    def on_train_batch_end(self, batch, logs=None):
        if rank() == 0:
            super().on_train_batch_end(batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        if rank() == 0:
            super().on_epoch_end(epoch, logs)


def _momentum_buffers(optimizer):
    """The optimizer's momentum variables (SGD: momentums, RMSprop: _momentums), else none
    (with a warning: the correction is skipped). Before its first step (not built) there is
    no velocity to correct."""
    if not optimizer.built:
        return []
    for attr in ("momentums", "_momentums"):
        buffers = getattr(optimizer, attr, None)
        if buffers is not None:  # a list Keras tracks
            return list(buffers)
    warnings.warn("%s has a momentum but no momentum buffers zen knows: no momentum "
                  "correction" % type(optimizer).__name__)
    return []
