"""DistributedOptimizer, as horovod.torch.optimizer: gradients are averaged over all ranks
while backward still runs.

A hook on each parameter's gradient accumulator posts its gradient to the daemon as soon as
backward has produced it (after backward_passes_per_step passes): sparse gradients
(nn.Embedding(sparse=True), nn.EmbeddingBag(sparse=True)) through Zen's sparse allreduce
(the scheme ZEN_SCHEME picks), dense ones through the dense allreduce, which the daemon
fuses into buckets. step() waits for them all (synchronize()) and then runs the wrapped
optimizer. With compression=Compression.topk(ratio) the dense gradients of at least min_size
elements send their top-k elements (with error feedback: zen.torch.topk) through the sparse
allreduce instead; with its clip_norm (DGC's local gradient clipping) they wait for the
step's last gradient, whose global norm the clipping needs. With op=Adasum the ranks combine
the wrapped optimizer's parameter deltas instead (Horovod's Adasum optimizer:
zen.torch.adasum_optimizer).
"""

import warnings
from contextlib import contextmanager

import torch

from zen.common import process_sets as _process_sets
from zen.common.compression import check_topk_called
from zen.torch.adasum_optimizer import adasum_methods, check_adasum_arguments
from zen.torch.compression import Compression, TopKCompressor
from zen.torch.mpi_ops import (Adasum, Average, allreduce_async_, global_process_set,
                               size, _sparse_allreduce_async, synchronize)

# A hook's handle for a gradient held back for Compression.topk's clip_norm: posted once the
# step's gradients are all in (_post_pending), as their global norm scales them first.
_AFTER_CLIPPING = "posted after clipping"


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1,
                 op=Average, gradient_predivide_factor=1.0, groups=None,
                 sparse_as_dense=False, process_set=global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression

        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            named_parameters = [("allreduce.noname.%s.%s" % (i, j), v)
                                for i, param_group in enumerate(self.param_groups)
                                for j, v in enumerate(param_group["params"])]
        # Make sure that named_parameters are tuples.
        if any(not isinstance(p, tuple) for p in named_parameters):
            raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                             "usually produced by model.named_parameters().")

        dups = _DistributedOptimizer.find_duplicates([k for k, _ in named_parameters])
        if len(dups) > 0:
            raise ValueError("Parameter names in named_parameters must be unique. "
                             "Found duplicates: %s" % ", ".join(dups))

        all_param_ids = {id(v) for param_group in self.param_groups
                         for v in param_group["params"]}
        named_param_ids = {id(v) for k, v in named_parameters}
        unnamed_param_ids = all_param_ids - named_param_ids
        if len(unnamed_param_ids):
            raise ValueError("named_parameters was specified, but one or more model "
                             "parameters were not named. Python object ids: "
                             "%s" % ", ".join(str(i) for i in unnamed_param_ids))

        self._parameter_names = {v: k for k, v in sorted(named_parameters,
                                                         key=lambda kv: kv[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: self.backward_passes_per_step
                                 for _, v in sorted(named_parameters, key=lambda kv: kv[0])}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        self._handles = {}
        self._ready = 0  # parameters whose gradient of this step is complete (hooks)
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        # Parameters whose gradient has been sparse: when one has none in a step, this rank
        # still posts an empty sparse tensor (the others may have rows).
        self._sparse_params = set()

        # Groups only decide which gradients Horovod fuses; Zen's daemon fuses whatever
        # reaches it in the same cycle, so they are accepted and checked, not needed.
        if groups is not None and not isinstance(groups, int) and not (
                isinstance(groups, list) and all(isinstance(g, list) for g in groups)):
            raise ValueError("groups should be an int or a list of lists of parameters")

        # Over a process set only its members average; the others step on their own
        # gradients (Horovod's).
        self._ps_id = _process_sets.process_set_id(process_set, "DistributedOptimizer",
                                                   members_only=False)
        self._member = self._ps_id == 0 or process_set.included()
        if self._member and _process_sets.set_size(process_set) > 1:
            self._register_hooks()

    def load_state_dict(self, *args, **kwargs):
        self._handles = {}
        self._ready = 0
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        super(self.__class__, self).load_state_dict(*args, **kwargs)

    @staticmethod
    def find_duplicates(lst):
        seen = set()
        dups = set()
        for el in lst:
            if el in seen:
                dups.add(el)
            seen.add(el)
        return dups

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step

    def _register_hooks(self):
        for param_group in self.param_groups:
            for p in param_group["params"]:
                if p.requires_grad:
                    self._requires_update.add(p)
                    p_tmp = p.expand_as(p)
                    grad_acc = p_tmp.grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _name(self, p):
        return self._parameter_names.get(p)

    def _clips(self):
        return isinstance(self._compression, TopKCompressor) and \
            self._compression.clip_norm is not None

    def _clip_scale(self, params):
        """Compression.topk's clipping factor for params' gradients of this step (those it
        takes: dense, or sparse with sparse_as_dense), or None without clip_norm."""
        if not self._clips():
            return None
        grads = [p.grad for p in params if p.grad is not None and
                 p.grad.dtype.is_floating_point and (self.sparse_as_dense or not p.grad.is_sparse)]
        # A sparse gradient's coalesced values have its dense form's norm.
        grads = [g.coalesce().values() if g.is_sparse else g for g in grads]
        return self._compression.clip_scale(grads, _process_sets.set_size(self.process_set))

    def _allreduce_grad_async(self, p, clip_scale=None):
        if p.grad is None:
            # No gradient on this rank (the parameter was not used), but another rank may
            # have one: post zeros (no rows for a parameter known to be sparse).
            if p in self._sparse_params and not self.sparse_as_dense:
                p.grad = torch.sparse_coo_tensor(
                    torch.empty((1, 0), dtype=torch.int64, device=p.device),
                    torch.empty((0,) + tuple(p.shape[1:]), dtype=p.dtype, device=p.device),
                    p.shape)
            else:
                p.grad = p.data.new(p.size()).zero_()

        name = self._name(p)
        tensor = p.grad
        if tensor.is_sparse:
            self._sparse_params.add(p)
            if self.sparse_as_dense:
                tensor = tensor.to_dense()
            else:
                # The dense path's name: a rank posting this gradient dense (unused there,
                # zeros) then meets a clear error instead of a stall.
                handle = _sparse_allreduce_async(tensor, "allreduce.%s" % name, self.op,
                                                 ps_id=self._ps_id)
                return handle, None

        if isinstance(self._compression, TopKCompressor):
            # Keyed by the parameter: the compressor keeps its residual and momentum.
            tensor_compressed, ctx = self._compression.compress(tensor, p, clip_scale)
            if tensor_compressed.is_sparse:
                # The selected elements; the daemon writes the dense result.
                handle = _sparse_allreduce_async(tensor_compressed, "allreduce.%s" % name,
                                                 self.op, dense=True, ps_id=self._ps_id)
                return handle, ctx
        else:
            tensor_compressed, ctx = self._compression.compress(tensor)
        if self.op == Average:
            # Split the average across pre- and postscale factors; the daemon divides by the
            # set's size.
            prescale_factor = 1.0 / self.gradient_predivide_factor
            postscale_factor = self.gradient_predivide_factor
        else:
            prescale_factor = 1.0
            postscale_factor = 1.0
        handle = allreduce_async_(tensor_compressed, name=name, op=self.op,
                                  prescale_factor=prescale_factor,
                                  postscale_factor=postscale_factor,
                                  process_set=self.process_set)
        return handle, ctx

    def _make_hook(self, p):
        def hook(*ignore):
            if p in self._handles and self._handles[p][0] is not None:
                if self._allreduce_delay[p] <= 0:
                    raise AssertionError(
                        "Gradients were computed more than backward_passes_per_step times "
                        "before call to step(). Increase backward_passes_per_step to "
                        "accumulate gradients locally.")
            assert not p.grad.requires_grad
            assert self._allreduce_delay[p] > 0
            handle, ctx = None, None
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] == 0:
                self._ready += 1
                if self._clips() and (self.sparse_as_dense or not p.grad.is_sparse):
                    handle = _AFTER_CLIPPING
                else:
                    handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
            if self._clips() and self._ready == len(self._requires_update):
                self._post_pending()  # the step's last gradient: clip and post those held
        return hook

    def _post_pending(self):
        """Posts what no hook has posted yet: parameters without a gradient this step, those
        short of backward_passes_per_step passes, and those held back for clipping."""
        for p in self._requires_update - set(self._handles.keys()):
            self._handles[p] = (None, None)
        pending = [p for p, (handle, _) in self._handles.items()
                   if handle is None or handle is _AFTER_CLIPPING]
        clip_scale = self._clip_scale(pending)
        for p in pending:
            self._handles[p] = self._allreduce_grad_async(p, clip_scale)

    def synchronize(self):
        """Waits for every gradient's allreduce (posting those no hook has posted yet) and
        writes the results into p.grad. A rank outside the process set keeps its own."""
        if not self._member:
            self._synchronized = True
            return
        self._post_pending()
        for p, (handle, ctx) in self._handles.items():
            output = synchronize(handle)
            self._allreduce_delay[p] = self.backward_passes_per_step
            if p.grad.is_sparse:
                aggregated = self._compression.decompress(output, ctx)
                if not aggregated.is_sparse:
                    # sparse_as_dense: back to the gradient's sparse layout for the update.
                    aggregated = aggregated.to_sparse(p.grad.sparse_dim())
                # Sparse tensors have no set_(): the averaged gradient replaces the local one.
                p.grad = aggregated
            else:
                p.grad.set_(self._compression.decompress(output, ctx))
        self._handles.clear()
        self._ready = 0
        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """step() inside this context does not synchronize (call synchronize() first, say to
        clip the averaged gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without "
                              "optimizer.skip_synchronize() context after "
                              "optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() "
                                 "but before optimizer.step() or optimizer.synchronize(). "
                                 "This is prohibited as it can cause a race condition.")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def _check_compression(compression, optimizer):
    """ValueError for Compression.topk uncalled, or with momentum correction over an optimizer
    that has momentum of its own (it would be applied twice)."""
    check_topk_called(compression, TopKCompressor)
    if isinstance(compression, TopKCompressor) and compression.momentum:
        for group in optimizer.param_groups:
            if group.get("momentum", 0):
                raise ValueError("Compression.topk(momentum=%g) applies the momentum before "
                                 "the compression (DGC's momentum correction): the wrapped "
                                 "optimizer must have momentum=0, not %g"
                                 % (compression.momentum, group["momentum"]))


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average,
                         gradient_predivide_factor=1.0, num_groups=0, groups=None,
                         sparse_as_dense=False, process_set=global_process_set):
    """Wraps a torch optimizer so that its gradients are averaged (op=Average) or summed
    (op=Sum) over all ranks (over process_set's ranks: divided by its size; a rank outside it
    steps on its own gradients) before each step (horovod.torch.DistributedOptimizer), or so that
    each rank steps locally and the ranks combine the parameter deltas with Adasum (op=Adasum:
    host parameters, a power-of-two number of ranks, dense gradients, Compression.none or
    .fp16; zen.torch.adasum_optimizer).

    named_parameters: model.named_parameters(), which name the gradients in the daemon
    (without it, names follow the order of the parameter groups). backward_passes_per_step:
    backward passes accumulated locally per step. compression: Compression.none, .fp16 or
    .topk(ratio) (dense gradients; topk: Deep Gradient Compression through Zen's sparse
    allreduce, with error feedback, see zen.torch.topk). sparse_as_dense: sparse gradients
    travel densified instead of through Zen's sparse allreduce. num_groups / groups: accepted
    for compatibility; the daemon fuses the gradients that reach it together without them.
    """
    _process_sets.process_set_id(process_set, "DistributedOptimizer", members_only=False)
    _check_compression(compression, optimizer)
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    methods = dict(_DistributedOptimizer.__dict__)
    if op == Adasum:
        if process_set is not None and process_set is not global_process_set:
            raise ValueError("DistributedOptimizer(op=Adasum) runs over the global process set "
                             "only, not %s" % (process_set,))
        check_adasum_arguments(optimizer, compression, sparse_as_dense)
        # Horovod's _DistributedAdasumOptimizer: the ranks combine parameter deltas. Alone,
        # adasum(delta) = delta: the wrapped optimizer as it is (as Horovod).
        if size() > 1:
            methods.update(adasum_methods())
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be "
                      "removed.", DeprecationWarning)
        if groups is None:
            groups = num_groups
    if groups is not None and isinstance(groups, int) and groups <= 0:
        groups = None

    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), methods)
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, groups, sparse_as_dense, process_set)
