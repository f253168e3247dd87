"""Elastic training, the worker's side, for any framework (Horovod's horovod.common.elastic):
State, ObjectState, run_fn, and the exceptions they turn on.

The flow (docs/architecture.md, "Elastic training"): the training function runs under
run_fn(func, reset) with a State. state.commit() saves the state in host memory and asks
whether the job's workers changed; a failed collective (HorovodInternalError) restores the
last commit on every surviving rank; a change of workers (HostsUpdatedInterrupt, raised on
every rank at the same commit) keeps the state. Either way run_fn resets (the binding's
shutdown() then init(): under an elastic zenrun, init joins the launcher's next round and
takes its new rank and size), calls the reset callbacks, broadcasts rank 0's state to every
rank (sync) and calls the function again.

Where this differs from Horovod, on purpose:
* check_host_updates asks the launcher on rank 0 only and broadcasts the answer, so every
  rank raises at the same commit (Horovod broadcasts each rank's notification timestamps
  from rank 0 too, but collects them on every rank through a notification service); when
  rank 0 cannot ask, every rank raises the same RuntimeError instead of rank 0 alone.
* ObjectState saves copies and restores them into the objects it was given, in place (a list,
  dict, set or plain object keeps its identity: a DistributedSampler the script's DataLoader
  also holds sees state.train_sampler.set_epoch() and every restore and sync). Horovod keeps
  references, so a list changed in place after a commit stayed changed after a restore, and a
  sync replaced the objects by copies on every rank but 0.
* sync() broadcasts rank 0's current values and then saves them, for the plain objects as for
  the framework's: after a sync every rank's last commit is the state it trains from (Horovod
  broadcast the objects' last commit but the model's current values, which disagree after a
  check_host_updates between commits, and kept a new worker's own initial model as its
  commit).
"""

import copy
import functools

from zen.common import elastic_rendezvous
from zen.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt

__all__ = ["HorovodInternalError", "HostsUpdatedInterrupt", "ObjectState", "State", "run_fn"]

class State:
    """State kept in memory across resets of the job (Horovod's State).

    bcast_object(obj): rank 0's obj on every rank (the framework's broadcast_object);
    get_rank(): this process's rank. Subclasses implement save, restore and sync, and may
    override reset (called after each reset, before the callbacks and the sync)."""

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Functions called, in order, after every reset (the new size known): for example to
        scale the learning rate with the number of workers."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state (a copy in host memory: commit less often than every batch when
        that copy is dear) and then checks for a change of workers, raising
        HostsUpdatedInterrupt on every rank when there is one."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank when the launcher recorded a change of
        workers since this round formed. A collective: every rank calls it at the same point.
        Rank 0 asks (_pending_update) and broadcasts the answer, so the ranks agree."""
        answer = None
        if self._rank() == 0:
            try:
                answer = ("update", self._pending_update())
            except Exception as e:  # noqa: BLE001 - every rank raises it below
                answer = ("error", "%s: %s" % (type(e).__name__, e))
        kind, value = self._bcast_object(answer)
        if kind == "error":
            raise RuntimeError("elastic: rank 0 could not ask the launcher for changes of "
                               "workers: %s" % value)
        if value is not None:
            _generation, removed_only = value
            raise HostsUpdatedInterrupt(bool(removed_only))

    def _pending_update(self):
        """Rank 0's question to the launcher: None, or (generation, removed_only) when it
        recorded a change after the round this worker joined
        (zen.common.elastic_rendezvous.pending_update). A hook: tests override it."""
        return elastic_rendezvous.pending_update()

    def save(self):
        """Saves the state in host memory."""
        raise NotImplementedError()

    def restore(self):
        """Restores the last saved state, undoing what changed since."""
        raise NotImplementedError()

    def sync(self):
        """Rank 0's state on every rank (a collective), which every rank then saves."""
        raise NotImplementedError()

    def reset(self):
        """Adjusts to the new job after a reset, before the callbacks and the sync."""


class ObjectState(State):
    """State of plain Python objects, given as keyword arguments and kept as attributes
    (Horovod's ObjectState): state.epoch, state.batch, ... Picklable (broadcast) and
    deep-copyable (saved)."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._saved_state = copy.deepcopy(kwargs)
        for attr, value in kwargs.items():  # the objects themselves: the script holds them too
            setattr(self, attr, value)
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {attr: copy.deepcopy(getattr(self, attr))
                             for attr in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            current = {attr: getattr(self, attr) for attr in self._saved_state}
            # A copy: rank 0's broadcast returns current itself, whose objects stay the
            # attributes (_set_attrs), and the saved state must not change with them.
            self._saved_state = copy.deepcopy(self._bcast_object(current))
            self._set_attrs()

    def _set_attrs(self):
        # Copies (changing an attribute in place must not change the saved state), put into
        # the attribute's object where its kind allows.
        for attr, value in self._saved_state.items():
            value = copy.deepcopy(value)
            if not _refill(getattr(self, attr, None), value):
                setattr(self, attr, value)


def _refill(live, value):
    """Makes live equal to value in place, keeping its identity, when both are the same kind
    of list, dict, set or plain object (attributes in __dict__); False for anything else
    (numbers, strings, tuples, objects without __dict__), which the caller replaces."""
    if live is None or type(live) is not type(value) or isinstance(live, type):
        return False
    if isinstance(live, list):
        live[:] = value
    elif isinstance(live, (dict, set)):
        live.clear()
        live.update(value)
    elif isinstance(getattr(live, "__dict__", None), dict) and not callable(live):
        live.__dict__.clear()
        live.__dict__.update(value.__dict__)
    else:
        return False
    return True


def run_fn(func, reset):
    """func(state, *args, **kwargs) run elastically (Horovod's run_fn): state synced first;
    on HorovodInternalError the last commit restored, on HostsUpdatedInterrupt the state kept
    (and not synced when only workers were removed); then reset() (the binding's shutdown and
    init), state.on_reset() and func again. Other exceptions propagate."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HorovodInternalError:
                state.restore()
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                skip_sync = e.skip_sync
            reset()
            state.on_reset()

    return wrapper
