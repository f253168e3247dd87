"""TorchState (Horovod's horovod.torch.elastic.state): a model, an optimizer, learning-rate
schedulers, ElasticSamplers and plain objects kept across resets. Each module, optimizer,
scheduler and sampler given has a handler
that saves it (a deep copy of its state_dict), restores it (load_state_dict) and syncs it
(broadcast from rank 0); the other keyword arguments are ObjectState's.

Differences from Horovod, on purpose:
* An optimizer's sync leaves the parameters alone (broadcast_optimizer_state's zero step,
  which creates a new worker's state, moves them under weight decay) and gives every rank a
  fresh state when rank 0's has none (that zero step would count as a step).
* Each handler saves what it synced (Horovod's torch handlers kept a new worker's own initial
  values as its last commit).
* A DistributedOptimizer's Compression.topk residuals and momenta are saved and restored with
  the optimizer (Horovod has no top-k compression).
* reset re-shards the samplers over the new ranks, also when the sync is skipped (workers
  removed only), which Horovod's left sharded over the old ranks; commit merges what each
  rank's record_indices recorded, so that re-sharding starts from the same set everywhere.
"""

import copy

import torch

from zen.common.elastic import ObjectState
from zen.torch.elastic.sampler import ElasticSampler
from zen.torch.functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                                 broadcast_parameters)
from zen.torch.mpi_ops import rank
from zen.torch.topk import TopKCompressor


class StateHandler:
    """Saves, restores and syncs one framework object (value)."""

    def __init__(self, value):
        self.value = value
        self._saved = copy.deepcopy(value.state_dict())

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(copy.deepcopy(self._saved))

    def sync(self):
        raise NotImplementedError()

    def reset(self):
        """After a reset, before the sync."""

    def share(self):
        """At a commit, before the save (a collective: every rank's handler runs it)."""

    def set_value(self, value):
        """state.<name> = value: the new object, saved."""
        self.value = value
        self.save()


class ModelStateHandler(StateHandler):
    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)
        self.save()


class OptimizerStateHandler(StateHandler):
    """An optimizer; a DistributedOptimizer's Compression.topk residuals and momenta too (per
    rank, saved and restored with it: after a restore they match the committed parameters,
    so the steps run again do not send what they had left in them a second time; a sync
    keeps each rank's own, as they are this rank's unsent gradients)."""

    def __init__(self, value):
        super().__init__(value)
        self._compressor_saved = _compressor_state(value)

    def save(self):
        super().save()
        self._compressor_saved = _compressor_state(self.value)

    def restore(self):
        super().restore()
        if self._compressor_saved is not None:  # saved from this value's compressor
            _topk_compressor(self.value).load_state(self._compressor_saved)

    def sync(self):
        optimizer = self.value
        stepped = broadcast_object(len(optimizer.state) > 0, root_rank=0,
                                   name="elastic.optimizer.stepped")
        if stepped:
            # broadcast_optimizer_state creates a missing state (a worker that just joined)
            # with a step on zero gradients, which weight decay turns into a change of the
            # parameters: they are put back.
            params = [p for group in optimizer.param_groups for p in group["params"]]
            kept = [p.data.clone() for p in params] if len(optimizer.state) == 0 else None
            broadcast_optimizer_state(optimizer, root_rank=0)
            for p, value in zip(params, kept or ()):
                p.data.copy_(value)
        else:
            # Rank 0's optimizer has not stepped yet: every rank's starts afresh with rank 0's
            # options (a state made by broadcast_optimizer_state's zero step would count as a
            # step: Adam's bias correction, SGD's momentum).
            options = broadcast_object([{k: v for k, v in group.items() if k != "params"}
                                        for group in optimizer.param_groups], root_rank=0,
                                       name="elastic.optimizer.options")
            optimizer.state.clear()
            for group, values in zip(optimizer.param_groups, options):
                group.update(values)
        self.save()


def _topk_compressor(optimizer):
    """A DistributedOptimizer's Compression.topk, or None."""
    compression = getattr(optimizer, "_compression", None)
    return compression if isinstance(compression, TopKCompressor) else None


def _compressor_state(optimizer):
    compressor = _topk_compressor(optimizer)
    return compressor.state() if compressor is not None else None


class LRSchedulerStateHandler(StateHandler):
    """A learning-rate scheduler: its state_dict (epoch count, base rates; not the optimizer,
    which the scheduler keeps a reference to, so it stays the state's own optimizer)."""

    def sync(self):
        self.value.load_state_dict(broadcast_object(self.value.state_dict(), root_rank=0,
                                                    name="elastic.scheduler.state"))
        self.save()


class SamplerStateHandler(StateHandler):
    def share(self):
        # Only the indices recorded since the last merge travel: a commit's cost does not
        # grow with the epoch.
        self.value.merge_recorded(allgather_object(self.value.unshared_indices,
                                                   name="elastic.sampler.recorded"))

    def sync(self):
        # Every rank's processed indices (record_indices records this rank's only), merged,
        # and rank 0's epoch.
        processed = set().union(*allgather_object(self.value.processed_indices,
                                                  name="elastic.sampler.processed"))
        state_dict = self.value.state_dict()
        state_dict["processed_indices"] = processed
        self.value.load_state_dict(broadcast_object(state_dict, root_rank=0,
                                                    name="elastic.sampler.state"))
        self.save()

    def reset(self):
        self.value.reset()


# torch 2's public name; torch 1.13 (Debian's) has only the private one.
_LR_SCHEDULER = getattr(torch.optim.lr_scheduler, "LRScheduler",
                        torch.optim.lr_scheduler._LRScheduler)

# Which handler takes a value: the first entry whose type it is (Horovod's registry).
_HANDLERS = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (_LR_SCHEDULER, LRSchedulerStateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def _handler(value):
    for value_type, handler_type in _HANDLERS:
        if isinstance(value, value_type):
            return handler_type(value)
    return None


class TorchState(ObjectState):
    """State of a PyTorch training process (Horovod's TorchState).

    model, optimizer: optional; kwargs: more modules, optimizers, LR schedulers or
    ElasticSamplers (each kept by its handler) and plain objects (ObjectState's), all exposed
    as attributes. Assigning a new one of the former to its attribute saves it."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(dict(model=model, optimizer=optimizer))
        handlers, plain = {}, {}
        for name, value in kwargs.items():
            handler = _handler(value)
            if handler is not None:
                handlers[name] = handler
            else:
                plain[name] = value
        self._handlers = handlers
        for name, handler in handlers.items():
            setattr(self, name, handler.value)
        super().__init__(bcast_object=self._broadcast_object, get_rank=rank, **plain)

    @staticmethod
    def _broadcast_object(obj):
        return broadcast_object(obj, root_rank=0, name="elastic.state")

    def commit(self):
        for handler in self._handlers.values():
            handler.share()
        super().commit()

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super().sync()

    def reset(self):
        for handler in self._handlers.values():
            handler.reset()

    def __setattr__(self, name, value):
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers and handlers[name].value is not value:
            handlers[name].set_value(value)
        super().__setattr__(name, value)
