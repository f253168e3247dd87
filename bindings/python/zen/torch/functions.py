"""State broadcast and object collectives, as horovod.torch.functions."""

import collections
import pickle

import torch

from zen.common import basics as _basics
from zen.common import objects as _objects
from zen.common import process_sets as _process_sets
from zen.torch.mpi_ops import (allgather, broadcast_, broadcast_async_, global_process_set,
                               synchronize)


def broadcast_parameters(params, root_rank, prefix=None, process_set=global_process_set):
    """Broadcasts the parameters from root_rank to every rank (of process_set; root_rank
    is the root's rank in the job, as Horovod's), in place.

    params: model.state_dict(), model.named_parameters(), or a list of parameters or of
    (name, tensor) pairs.
    """
    _process_sets.process_set_id(process_set, "broadcast_parameters")
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, (list, tuple)) or hasattr(params, "__iter__"):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("invalid params of type: %s" % type(params))
    handles = []
    for i, (name, p) in enumerate(params):
        if p is None:
            continue
        key = name if name is not None else "param.%d" % i
        if prefix:
            key = prefix + key
        handles.append(broadcast_async_(p, root_rank, key, process_set))
    for handle in handles:
        synchronize(handle)


def _get_types(x):
    if isinstance(x, (list, tuple)):
        return type(x), [_get_types(xi) for xi in x]
    return type(x)


def _recursive_cast(x, dtype):
    if isinstance(dtype, tuple):
        t, dtypes = dtype
        return t([_recursive_cast(x[i], dtypes[i]) for i in range(len(x))])
    return dtype(x)


def _numeric(value):
    if isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, (list, tuple)) and value:
        return all(_numeric(v) and not isinstance(v, (list, tuple)) for v in value)
    return False


def broadcast_optimizer_state(optimizer, root_rank, model=None, prefix="optimizer.",
                              process_set=global_process_set):
    """Broadcasts an optimizer's state (per-parameter tensors and scalars, and the numeric
    options of its parameter groups such as the learning rate) from root_rank (a rank
    of the job in process_set), in place."""
    from zen.torch.optimizer import _DistributedOptimizer
    _process_sets.process_set_id(process_set, "broadcast_optimizer_state")
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    state_dict = optimizer.state_dict()

    # A new optimizer has no state yet: take one step with zero gradients to create it.
    if len(state_dict["state"]) == 0:
        sparse_params = set()
        if model is not None:
            for module in model.modules():
                if isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and \
                        module.sparse:
                    sparse_params.update(id(p) for p in module.parameters())
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad and id(p) not in state_dict["state"]:
                    p.grad = p.data.new(p.size()).zero_()
                    if isinstance(optimizer, torch.optim.SparseAdam) or id(p) in sparse_params:
                        # Every dimension sparse: SparseAdam's state update takes an empty
                        # gradient only in this layout.
                        p.grad = p.grad.to_sparse()
        # A DistributedOptimizer's step() would allreduce these zeros: call the wrapped one.
        if optimizer.__module__ == _DistributedOptimizer.__module__:
            super(optimizer.__class__, optimizer).step()
        else:
            optimizer.step()
        state_dict = optimizer.state_dict()

    if len(state_dict["state"]) == 0:
        return  # a stateless optimizer

    params = []
    callbacks = {}
    occurrences = collections.defaultdict(int)

    def _create_callback(pid, name, t, p):
        def _from_tensor():
            state_dict["state"][pid][name] = t(p.numpy()[0])
        return _from_tensor

    def _create_option_callback(index, option_key, option_tensor, dtypes):
        def _from_tensor():
            value = option_tensor.numpy()[0]
            if isinstance(dtypes, tuple):
                value = value.tolist()
            optimizer.param_groups[index][option_key] = _recursive_cast(value, dtypes)
        return _from_tensor

    for index, group in enumerate(state_dict["param_groups"]):
        for option_key, option_value in sorted(group.items()):
            if option_key == "params" or not _numeric(option_value):
                continue
            key = "%s.%d" % (option_key, index)
            dtypes = _get_types(option_value)
            option_tensor = torch.tensor([option_value], dtype=torch.float64)
            callbacks[key] = _create_option_callback(index, option_key, option_tensor, dtypes)
            params.append((key, option_tensor))

        for pid in group["params"]:
            if pid not in state_dict["state"]:
                continue
            param_state = state_dict["state"][pid]
            for name, p in sorted(param_state.items()):
                if p is None:
                    continue  # SGD without momentum keeps momentum_buffer None: nothing to send
                occurrences[name] += 1
                key = "%s.%d" % (str(name), occurrences[name])
                if not torch.is_tensor(p):
                    t = type(p)
                    p = torch.tensor([p], dtype=torch.float64)
                    callbacks[key] = _create_callback(pid, name, t, p)
                params.append((key, p))

    # The state tensors are the optimizer's own (state_dict() packs references): they are
    # broadcast in place; scalars and options are written back by the callbacks.
    broadcast_parameters(params, root_rank, prefix=prefix, process_set=process_set)
    for key, _ in params:
        if key in callbacks:
            callbacks[key]()


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """root_rank's picklable object, on every rank (of process_set; root_rank is
    the root's rank in the job)."""
    _process_sets.process_set_id(process_set, "broadcast_object")
    name = _objects.op_name(name)
    if _basics.rank() == root_rank:
        payload = torch.tensor(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
        broadcast_(length, root_rank, name + ".sz", process_set)
        broadcast_(payload, root_rank, name + ".t", process_set)
        return obj
    length = torch.tensor([0], dtype=torch.int64)
    broadcast_(length, root_rank, name + ".sz", process_set)
    payload = torch.zeros(int(length.item()), dtype=torch.uint8)
    broadcast_(payload, root_rank, name + ".t", process_set)
    return pickle.loads(payload.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every rank's picklable object (of process_set's ranks), as a list in rank order."""
    _process_sets.process_set_id(process_set, "allgather_object")
    name = _objects.op_name(name)
    payload = torch.tensor(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
    sizes = allgather(torch.tensor([payload.numel()], dtype=torch.int64), name=name + ".sz",
                      process_set=process_set)
    gathered = allgather(payload, name=name + ".t", process_set=process_set).numpy().tobytes()
    out = _objects.split_gathered(gathered, sizes.tolist())
    assert len(out) == _process_sets.set_size(process_set)
    return out
