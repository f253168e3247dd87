"""DistributedOptimizer(op=Adasum), as horovod.torch's _DistributedAdasumOptimizer: the ranks
combine the wrapped optimizer's parameter deltas with Adasum, not the gradients.

When backward has produced a parameter's gradient (after backward_passes_per_step passes), its
hook runs the wrapped optimizer's step for that parameter alone (so its momentum or Adam state
advances with this rank's gradient), takes delta = new - old, puts the old value back and posts
an Adasum allreduce of delta (ops/adasum: dense host floating-point tensors, a power-of-two
number of ranks; the daemon refuses others on every rank). step() waits for them all and sets
p = old + adasum(delta), the same bits on every rank. A job of one takes the wrapped
optimizer as it is (adasum(delta) = delta), as Horovod.

The hooks, names and checks are _DistributedOptimizer's (zen.torch.optimizer); the methods
below replace its posting, synchronize, skip_synchronize and step.
"""

import torch

from zen.torch.mpi_ops import Adasum, allreduce_async_, synchronize
from zen.torch.topk import TopKCompressor


def _describe(p, name=None):
    return "parameter '%s'" % name if name else "a parameter of shape %s" % (tuple(p.shape),)


def _check_device(p, name=None):
    # The daemon refuses other devices too, but only after the local step has moved p.
    if p.device.type not in ("cpu", "cuda"):
        raise ValueError("DistributedOptimizer(op=Adasum): %s is on %s; zen's Adasum takes CPU "
                         "and CUDA tensors (CUDA ones through host memory)"
                         % (_describe(p, name), p.device))


def check_adasum_arguments(optimizer, compression, sparse_as_dense):
    """ValueError, at construction, for what the Adasum optimizer cannot take."""
    if isinstance(compression, TopKCompressor):
        raise ValueError("DistributedOptimizer(op=Adasum): Compression.topk sends a sparse "
                         "selection, and Zen's Adasum is dense-only; use Compression.none or "
                         ".fp16")
    if sparse_as_dense:
        raise ValueError("DistributedOptimizer(op=Adasum): sparse_as_dense is not supported; "
                         "Zen's Adasum takes dense gradients only (use dense embeddings)")
    for group in optimizer.param_groups:
        for p in group["params"]:
            _check_device(p)


class _AdasumMethods:
    """Not a class of its own: DistributedOptimizer copies these methods over
    _DistributedOptimizer's into the class it builds (super(self.__class__, self) there is the
    wrapped optimizer's class)."""

    def _allreduce_grad_async(self, p):
        """Steps p alone, puts its old value back and posts the Adasum allreduce of the step's
        delta: (handle, compression context)."""
        name = self._name(p)
        if p.grad is not None and p.grad.is_sparse:
            raise ValueError("DistributedOptimizer(op=Adasum): %s has a sparse gradient; Zen's "
                             "Adasum is dense-only (use nn.Embedding(sparse=False), or op=Average"
                             " for Zen's sparse allreduce)" % _describe(p, name))
        _check_device(p, name)
        with torch.no_grad():
            old = p.detach().clone()
            self._step_alone(p)
            delta = p.detach() - old
            p.copy_(old)
        compressed, ctx = self._compression.compress(delta)
        return allreduce_async_(compressed, name=name, op=Adasum), ctx

    def _step_alone(self, p):
        """The wrapped optimizer's step with p the only parameter (Horovod's trick): the other
        parameters and their state stay where they are."""
        groups = self.param_groups
        group = next(g for g in groups if any(p is v for v in g["params"]))
        params = group["params"]
        self.param_groups = [group]
        group["params"] = [p]
        try:
            super(self.__class__, self).step()
        finally:
            group["params"] = params
            self.param_groups = groups

    def synchronize(self):
        """Nothing to wait for before step(), which combines the deltas (as Horovod's)."""

    def skip_synchronize(self):
        # The local step has already used the gradients: clipping them now would change nothing.
        raise AssertionError("Skipping synchronization is not supported with op=Adasum: the "
                             "wrapped optimizer steps each parameter as its gradient is ready "
                             "and step() combines the steps' deltas")

    def step(self, closure=None):
        """Waits for every parameter's Adasum allreduce (stepping and posting now those that no
        hook posted) and sets each parameter to its old value plus the combined delta."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._post_pending()
        for p, (handle, ctx) in self._handles.items():
            delta = self._compression.decompress(synchronize(handle), ctx)
            with torch.no_grad():
                p.add_(delta)
            self._allreduce_delay[p] = self.backward_passes_per_step
        self._handles.clear()
        return loss


def adasum_methods():
    """The methods that make _DistributedOptimizer's class dict the Adasum optimizer's."""
    return {k: v for k, v in _AdasumMethods.__dict__.items() if not k.startswith("__")}
