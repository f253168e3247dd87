"""Compression.topk: Deep Gradient Compression's top-k sparsification (Lin et al., "Deep
Gradient Compression", ICLR 2018) of dense gradients into Zen's sparse allreduce.

Per gradient (keyed by its parameter) and step, on each rank:
  u = momentum * u + g                      (momentum correction; without momentum, u = g)
  v = v + u                                 (error feedback: the residual v keeps what was
                                             not sent, so nothing is dropped, only delayed;
                                             nesterov=True adds g + momentum * u instead,
                                             torch.optim.SGD(nesterov=True)'s step)
  send the k = ceil(ratio * numel) elements of v largest in magnitude (flattened; exactly
  those of torch.topk of |v|, found among the elements at or above a sampled threshold:
  zen.common.compression's topk_sample_plan) as a 1-D sparse COO tensor: (index, value)
  pairs through the sparse allreduce
  v[sent] = 0, and u[sent] = 0 (momentum factor masking, on by default)
Every rank's pairs are summed by Zen's sparse allreduce (op=Average divides by size), and the
result comes back dense in the gradient's shape. Bytes on the wire per rank and step: k
int64 indices and k values instead of numel values, before the scheme's own costs.
Tensors of fewer than min_size elements (biases, norms) go dense, as in DGC: with momentum,
u is sent whole (g + momentum * u with nesterov: then dense momentum SGD is exactly what
happens), without, the gradient.

DGC's warm-up of the ratio: set compressor.ratio between steps (the residuals stay; a new
compressor would start from empty ones and drop what the old one had not sent yet).

DGC's local gradient clipping (clip_norm): before the momentum and the residual take a step's
gradients, DistributedOptimizer scales this rank's dense gradients (every floating-point one
the compressor takes, those below min_size too; sparse gradients are not accumulated and are
left alone) by min(1, clip_norm / sqrt(N) / (their global L2 norm + 1e-6)) over N ranks.
The norm needs every gradient of the step, so with clip_norm the hooks post no dense gradient
during backward: they are posted once the last one is in (or at synchronize(), for
parameters without one); sparse gradients still go at once.

Not implemented (DGC's other part): weight decay before the compression (the wrapped
optimizer's weight decay acts on the averaged gradient). The residual and momentum
live on the gradient's device, in its dtype or, for float16 and bfloat16, in float32; the
elements sent travel in the gradient's dtype, and what that rounding drops stays in the
residual.
"""

import torch

from zen.common.compression import (CLIP_EPSILON, TopKCompressorBase, topk_count,
                                    topk_sample_plan)

__all__ = ["TopKCompressor"]


class TopKCompressor(TopKCompressorBase):
    """Compression.topk(ratio=0.01, min_size=1024, momentum=0.0, momentum_masking=True,
    nesterov=False, clip_norm=None).

    With DistributedOptimizer (compression=hvd.Compression.topk(0.01)) each dense gradient of at
    least min_size elements sends its top ratio of elements through Zen's sparse allreduce, with
    error feedback; sparse gradients (nn.Embedding(sparse=True)) take Zen's sparse path
    unchanged. momentum > 0 is DGC's momentum correction: the momentum is applied here, before
    the compression, so the wrapped optimizer must have none (torch.optim.SGD(momentum=0);
    DistributedOptimizer refuses it otherwise); nesterov=True makes it Nesterov's.
    momentum_masking clears the momentum of the elements sent. clip_norm is DGC's local
    gradient clipping (above). With one rank nothing is compressed (as any compression in
    Horovod).

    The state (residual, momentum) is kept per key: DistributedOptimizer's key is the
    parameter. On its own, compress(tensor, key) returns a sparse tensor (send it with
    sparse_allreduce(..., dense=True)) or, below min_size, a dense one (allreduce); then
    decompress(result, ctx); scale (clip_scale's factor) clips it. hvd.allreduce(t,
    compression=topk) raises: it has no key.
    """

    def __init__(self, ratio=0.01, min_size=1024, momentum=0.0, momentum_masking=True,
                 nesterov=False, clip_norm=None):
        super().__init__(ratio, min_size, momentum, momentum_masking, nesterov, clip_norm)
        self._generators = {}  # device -> the samples' generator

    def compresses(self, tensor):
        """Whether tensor travels sparse (floating point, dense, at least min_size elements)."""
        return (tensor.dtype.is_floating_point and not tensor.is_sparse
                and tensor.numel() >= self.min_size)

    def clip_scale(self, tensors, size):
        """The factor (a 0-d float64 tensor on the first tensor's device) that clips tensors,
        one rank's dense gradients of a step, to clip_threshold(size) in global L2 norm; None
        without clip_norm or tensors. A NaN or infinite norm gives NaN or 0: loud, as in
        torch.nn.utils.clip_grad_norm_."""
        if self.clip_norm is None or not tensors:
            return None
        device = tensors[0].device
        norms = [torch.linalg.vector_norm(t.detach(), dtype=_accumulator_dtype(t.dtype))
                 for t in tensors]
        total = torch.linalg.vector_norm(
            torch.stack([n.to(device=device, dtype=torch.float64) for n in norms]))
        return (self.clip_threshold(size) / (total + CLIP_EPSILON)).clamp(max=1.0)

    def compress(self, tensor, key=None, scale=None):
        """(a 1-D sparse COO tensor of the selected elements, or a dense tensor; ctx). scale:
        clip_scale's factor, applied before the momentum and the residual."""
        if key is None:
            raise ValueError("Compression.topk keeps a residual per tensor, so compress needs "
                             "a key: use it with DistributedOptimizer, or call "
                             "compress(tensor, key) yourself (hvd.allreduce cannot pass one)")
        if not tensor.dtype.is_floating_point or tensor.is_sparse:
            return tensor, None
        flat = tensor.detach().reshape(-1)
        # The state accumulates in float32 for half-precision gradients: in float16 or
        # bfloat16 a residual soon rounds the small gradients added to it away.
        wide = flat.to(_accumulator_dtype(flat.dtype))
        if scale is not None:
            wide = wide * scale.to(device=wide.device, dtype=wide.dtype)
        update = momentum = wide
        if self.momentum:
            momentum = update = self._state(self._momenta, key, wide)
            momentum.mul_(self.momentum).add_(wide)
            if self.nesterov:
                update = wide.add(momentum, alpha=self.momentum)
        if not self.compresses(tensor):
            if update is wide and scale is None:
                return tensor, None
            # A copy: the allreduce writes its result in place.
            return update.to(flat.dtype, copy=True).view(tensor.shape), tuple(tensor.shape)
        residual = self._state(self._residuals, key, wide)
        residual.add_(update)
        indices = self._largest(residual.abs(), topk_count(flat.numel(), self.ratio))
        values = residual[indices]
        sent = values.to(flat.dtype)  # the gradient's dtype on the wire
        if sent.dtype == values.dtype:
            residual.index_fill_(0, indices, 0)
        else:  # what the rounding to it dropped stays in the residual
            residual.index_copy_(0, indices, values - sent.to(values.dtype))
        if self.momentum and self.momentum_masking:
            momentum.index_fill_(0, indices, 0)
        sparse = torch.sparse_coo_tensor(indices.view(1, -1), sent, (flat.numel(),))
        return sparse, tuple(tensor.shape)

    def _largest(self, magnitudes, k):
        """Indices of the k largest magnitudes (a NaN counts as largest, as in torch.topk),
        through a sampled threshold where that is cheaper (topk_sample_plan)."""
        return self._largest_by(magnitudes, k, topk_sample_plan(magnitudes.numel(), k))

    def _largest_by(self, magnitudes, k, plan):
        """_largest with the sample plan given ((m, r), or None: the top-k of all)."""
        if plan is not None:
            m, r = plan
            sample = magnitudes[torch.randint(magnitudes.numel(), (m,), device=magnitudes.device,
                                              generator=self._generator(magnitudes.device))]
            threshold = torch.topk(sample, r, sorted=False).values.min()
            # not (< threshold): a NaN is a candidate, and a NaN threshold takes them all.
            candidates = (magnitudes < threshold).logical_not_().nonzero().view(-1)
            if candidates.numel() >= k:
                return candidates[torch.topk(magnitudes[candidates], k, sorted=False).indices]
        return torch.topk(magnitudes, k, sorted=False).indices

    def _generator(self, device):
        """This compressor's own random numbers for the samples (the global generator, which
        the training's dropout and shuffling draw from, is left alone)."""
        if device not in self._generators:
            self._generators[device] = torch.Generator(device=device)
            self._generators[device].manual_seed(0x5A3D)
        return self._generators[device]

    def state(self):
        """Copies of the residuals and momenta (what elastic's TorchState saves at a commit)."""
        return ({k: v.clone() for k, v in self._residuals.items()},
                {k: v.clone() for k, v in self._momenta.items()})

    def load_state(self, state):
        """The residuals and momenta of state() back (copied, so state can be loaded again)."""
        residuals, momenta = state
        self._residuals = {k: v.clone() for k, v in residuals.items()}
        self._momenta = {k: v.clone() for k, v in momenta.items()}

    @staticmethod
    def decompress(tensor, ctx):
        """The reduced tensor (sparse or dense) in the gradient's shape, dense."""
        if ctx is None:
            return tensor
        if tensor.is_sparse:
            tensor = tensor.to_dense()
        return tensor.view(ctx)

    @staticmethod
    def _state(states, key, flat):
        """key's state in states (zeros like flat at first), checked against flat."""
        state = states.get(key)
        if state is None:
            state = states[key] = torch.zeros_like(flat)
        elif state.shape != flat.shape or state.dtype != flat.dtype:
            what = repr(key) if isinstance(key, str) else "a parameter"
            raise ValueError("Compression.topk: the gradient of %s changed from %s %s to "
                             "%s %s" % (what, state.dtype, tuple(state.shape), flat.dtype,
                                        tuple(flat.shape)))
        return state


def _accumulator_dtype(dtype):
    """The residual's and the momentum's dtype for a gradient of dtype."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
