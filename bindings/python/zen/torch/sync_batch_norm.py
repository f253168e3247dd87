"""SyncBatchNorm, as horovod.torch.SyncBatchNorm: batch normalization whose training-mode
statistics are those of the global batch (every rank of a process set), for CPU and CUDA
tensors.

Forward (training, more than one rank): each rank takes per channel its (count, mean, M2 =
sum of squared deviations from its own mean), two passes over its own batch in float32
(float64 for float64 input); one allgather of that row of 2C + 1 float64 values gives every
rank every member's, combined as Chan et al.'s parallel variance (M2 = sum M2_r +
sum n_r (mean_r - mean)^2: no E[x^2] - E[x]^2 cancellation; a rank with no rows adds
nothing). The running statistics take the unbiased variance N / (N - 1) of the global count.
Backward: one allreduce (Sum) of 2C values, sum(dy) and sum(dy * (x - mean)) per channel,
gives this rank's slice of the input gradient; the weight and bias gradients are this rank's
contributions only (as torch's and Horovod's SyncBatchNorm: DistributedOptimizer reduces
them). Plain tensor math on either device: torch 1.13's fused batch_norm_stats & co. are
CUDA-only. Eval mode, and a process set of one rank, run the local F.batch_norm.

Names: the collectives of one layer are "sync_batch_norm.<set id>.<n>", n counting per
process set the layers in the order of their first synchronized call; so layers called in the
same order on every member pair up, and stay apart, across steps and sets.
"""

import collections
import itertools

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from zen.common import process_sets as _process_sets
from zen.torch.mpi_ops import Sum, allgather_async, allreduce_async, global_process_set, \
    synchronize

# Per process set id: the next layer number (see Names above). Module state, as mpi_ops'
# unnamed-operation counter: the numbering belongs to the process, like the call order.
_layer_ids = collections.defaultdict(itertools.count)


def _compute_dtype(tensor):
    """float16/bfloat16/float32 statistics are taken in float32, float64's in float64."""
    return torch.float64 if tensor.dtype == torch.float64 else torch.float32


def _per_channel(tensor):
    """(N, C, *) -> (C, N * prod(*))."""
    return tensor.transpose(0, 1).reshape(tensor.shape[1], -1)


def _broadcastable(stat, like):
    """A per-channel (C,) tensor shaped (1, C, 1, ...) against like."""
    return stat.view([1, -1] + [1] * (like.dim() - 2))


def _local_stats(x):
    """This rank's row: count, per-channel mean and M2 (float64, 2C + 1 values). Deviations
    from a first (rounded) mean, d = x - shift, are exact where x is near it; their mean
    corrects the shift, so the gathered mean carries more than x's precision, and
    M2 = sum d^2 - n corr^2 subtracts only a tiny term."""
    rows = _per_channel(x)
    count = rows.shape[1]
    if count:
        shift = rows.mean(1)
        d = rows - shift[:, None]
        corr = d.mean(1).double()
        mean = shift.double() + corr
        m2 = (d.pow(2).sum(1).double() - count * corr.pow(2)).clamp_min(0)
    else:
        mean = m2 = torch.zeros(rows.shape[0], dtype=torch.float64, device=rows.device)
    head = torch.full((1,), count, dtype=torch.float64, device=rows.device)
    return torch.cat([head, mean, m2])


def _global_stats(gathered, channels):
    """Every member's rows (P, 2C + 1) -> (global count, mean, biased variance) (float64)."""
    counts = gathered[:, :1]
    means = gathered[:, 1:1 + channels]
    m2s = gathered[:, 1 + channels:]
    total = counts.sum()
    mean = (counts * means).sum(0) / total
    m2 = (m2s + counts * (means - mean).pow(2)).sum(0)
    return total, mean, m2 / total


class _SyncBatchNormFunction(torch.autograd.Function):
    """The synchronized training-mode batch norm. Its own backward (not autograd through
    ZenAllgather, whose gradient allreduces the whole gathered gradient and re-gathers the
    sizes): one Sum allreduce of 2C values per layer, as torch's SyncBatchNorm."""

    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum,
                process_set, name):
        channels = input.shape[1]
        x = input.to(_compute_dtype(input))
        gathered = synchronize(allgather_async(_local_stats(x).view(1, -1), name + ".stats",
                                               process_set))
        total, mean, var = _global_stats(gathered, channels)
        count = int(total.item())
        if count <= 1:
            # Every member gathered the same rows: every member raises.
            raise ValueError("Expected more than 1 value per channel when training, got %d "
                             "over the process set's global batch (input size %s here)" %
                             (count, list(input.shape)))
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
        if running_var is not None:
            unbiased = var * (count / (count - 1))
            running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
        mean = mean.to(x.dtype)
        invstd = torch.rsqrt(var.to(x.dtype) + eps)
        out = (x - _broadcastable(mean, x)) * _broadcastable(invstd, x)
        if weight is not None:
            out = out * _broadcastable(weight.to(x.dtype), x)
        if bias is not None:
            out = out + _broadcastable(bias.to(x.dtype), x)
        ctx.save_for_backward(input, weight, mean, invstd)
        ctx.count = count
        ctx.bias_dtype = None if bias is None else bias.dtype
        ctx.process_set = process_set
        ctx.name = name
        return out.to(input.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, mean, invstd = ctx.saved_tensors
        x = input.to(mean.dtype)
        dy = grad_output.to(mean.dtype)
        xmu = x - _broadcastable(mean, x)
        dims = [0] + list(range(2, x.dim()))
        sum_dy = dy.sum(dims)
        sum_dy_xmu = (dy * xmu).sum(dims)
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            sums = synchronize(allreduce_async(torch.cat([sum_dy, sum_dy_xmu]), op=Sum,
                                               name=ctx.name + ".grads",
                                               process_set=ctx.process_set))
            global_dy, global_dy_xmu = sums.split(sum_dy.shape[0])
            scale = invstd if weight is None else invstd * weight.to(x.dtype)
            grad_input = (dy - _broadcastable(global_dy / ctx.count, x) -
                          xmu * _broadcastable(invstd.pow(2) * global_dy_xmu / ctx.count, x))
            grad_input = (grad_input * _broadcastable(scale, x)).to(input.dtype)
        if weight is not None and ctx.needs_input_grad[1]:
            grad_weight = (sum_dy_xmu * invstd).to(weight.dtype)
        if ctx.needs_input_grad[2]:
            grad_bias = sum_dy.to(ctx.bias_dtype)
        return grad_input, grad_weight, grad_bias, None, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Batch normalization over the global batch of process_set's ranks (horovod.torch's
    SyncBatchNorm; torch.nn.SyncBatchNorm's semantics): any input (N, C, *) of at least two
    dimensions, on CPU or CUDA. In training mode with more than one rank in process_set, the
    statistics (and the running ones) are the concatenated batch's; otherwise, and in eval
    mode, it is torch's BatchNorm of the local batch. Every member runs each layer in the same
    order; a rank outside process_set gets ValueError in training."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set
        self._zen_name = None  # (process set id, name), given at the first synchronized call

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("expected at least 2D input (got {}D input)".format(input.dim()))

    def _name(self, ps_id):
        if self._zen_name is None or self._zen_name[0] != ps_id:
            self._zen_name = (ps_id, "sync_batch_norm.%d.%d" % (ps_id, next(_layer_ids[ps_id])))
        return self._zen_name[1]

    def forward(self, input):
        self._check_input_dim(input)
        if input.size(1) == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        # As torch's _BatchNorm.forward: momentum None is the cumulative average.
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        running_mean = self.running_mean if track else None
        running_var = self.running_var if track else None
        if self.training:
            ps_id = _process_sets.process_set_id(self.process_set, "SyncBatchNorm")
            if _process_sets.set_size(self.process_set) > 1:
                return _SyncBatchNormFunction.apply(input, self.weight, self.bias, running_mean,
                                                    running_var, self.eps, factor,
                                                    self.process_set, self._name(ps_id))
        return F.batch_norm(input, running_mean, running_var, self.weight, self.bias,
                            bn_training, factor, self.eps)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_set=global_process_set):
        """module with every BatchNorm*d in its tree replaced by a SyncBatchNorm over
        process_set that shares its parameters and buffers (torch's
        nn.SyncBatchNorm.convert_sync_batchnorm; the training flag kept too). A BatchNorm
        module itself gives a new SyncBatchNorm."""
        out = module
        if isinstance(module, _BatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_set)
            if module.affine:
                with torch.no_grad():
                    out.weight = module.weight
                    out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.train(module.training)
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_set))
        return out
