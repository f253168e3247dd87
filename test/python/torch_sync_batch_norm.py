"""What every rank runs in test_torch.py's SyncBatchNorm jobs: zen.torch.SyncBatchNorm, check
by check, against one process's torch.nn.BatchNorm*d (float64) on the concatenated batch.

    tools/zenrun -np N /usr/bin/python3 torch_sync_batch_norm.py [CHECK ...]

Rank r's input at each step is a function of (r, step), so every rank builds the whole
global batch and runs the reference itself: the output and the input gradient (this rank's
slice), the running statistics and num_batches_tracked after several steps, the weight and
bias gradients (this rank's contributions, summed over the ranks), for BatchNorm1d/2d/3d
shapes, uneven batches and an empty one, momentum=None, affine=False,
track_running_stats=False, float16/bfloat16 inputs, data far from zero (the combination of
per-rank statistics must not cancel), two process sets (the halves of the job), eval mode
(one rank alone: no communication, the daemon's counters unchanged), the layers' names (fixed,
by first call, the same on every rank), the refusals, and convert_sync_batchnorm on a small
model trained with DistributedOptimizer against one-process training. Prints one line per
check and rank: `ZENTEST {"check": ..., "ok": ..., "error": ...}`.
"""

import sys

import torch

from rank_report import Checks, add_checkout_package, expect_raises, run_checks

add_checkout_package()

import zen.torch as hvd  # noqa: E402

CHECKS = Checks()
check = CHECKS.check
CHANNELS = 3
REFERENCE = {0: torch.nn.BatchNorm1d, 1: torch.nn.BatchNorm1d, 2: torch.nn.BatchNorm2d,
             3: torch.nn.BatchNorm3d}  # by the number of dimensions after (N, C)
TAILS = [(), (5,), (2, 3), (2, 2, 2)]


def batch(rank, step, rows, tail, dtype, seed, offset=0.0):
    """Rank rank's input at step (rows x C x tail), and the gradient its loss sends back,
    rounded to dtype; channels and ranks have different means and spreads."""
    g = torch.Generator().manual_seed(100000 * seed + 100 * step + rank)
    shape = (rows, CHANNELS) + tuple(tail)
    means = (offset + torch.arange(CHANNELS, dtype=torch.float64) + 0.5 * rank).view(
        [1, -1] + [1] * len(tail))
    x = torch.randn(shape, generator=g, dtype=torch.float64) * (1 + 0.5 * rank) + means
    dy = torch.randn(shape, generator=g, dtype=torch.float64)
    return x.to(dtype), dy.to(dtype)


def assert_close(got, want, what, rtol=1e-5, atol=1e-5):
    got, want = got.detach().double(), want.detach().double()
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert torch.allclose(got, want, rtol=rtol, atol=atol), (
        what, float((got - want).abs().max()), got, want)


def set_affine(*layers):
    """The same non-trivial weight and bias in every layer."""
    for layer in layers:
        if layer.affine:
            with torch.no_grad():
                layer.weight.copy_(1 + 0.25 * torch.arange(CHANNELS))
                layer.bias.copy_(0.5 - 0.25 * torch.arange(CHANNELS))


def compare(tail=(), rows=lambda r: 2 + r, steps=3, dtype=torch.float32, members=None,
            process_set=hvd.global_process_set, seed=0, offset=0.0, tol=1e-5, stats_tol=1e-5,
            **kwargs):
    """steps training steps of SyncBatchNorm(**kwargs) over members (default every rank) on
    this rank's batch against the reference on theirs concatenated."""
    members = members if members is not None else list(range(hvd.size()))
    me = members.index(hvd.rank())
    layer = hvd.SyncBatchNorm(CHANNELS, process_set=process_set, **kwargs)
    if dtype == torch.float64:
        layer.double()  # else float32 parameters and buffers, as in mixed precision
    ref = REFERENCE[len(tail)](CHANNELS, **kwargs).double()
    set_affine(layer, ref)
    for step in range(steps):
        data = [batch(r, step, rows(r), tail, dtype, seed, offset) for r in members]
        x = data[me][0].clone().requires_grad_()
        y = layer(x)
        assert y.dtype == dtype, y.dtype
        (y * data[me][1]).sum().backward()
        xr = torch.cat([d[0] for d in data]).double().requires_grad_()
        yr = ref(xr)
        (yr * torch.cat([d[1] for d in data]).double()).sum().backward()
        lo = sum(rows(r) for r in members[:me])
        mine = slice(lo, lo + rows(hvd.rank()))
        assert_close(y, yr[mine], "output, step %d" % step, tol, tol)
        assert_close(x.grad, xr.grad[mine], "input gradient, step %d" % step, tol, tol)
        if layer.affine:
            for name in ("weight", "bias"):
                local = getattr(layer, name).grad
                summed = hvd.allreduce(local.double(), op=hvd.Sum, name="check.%s" % name,
                                       process_set=process_set)
                assert_close(summed, getattr(ref, name).grad, "%s gradient summed, step %d" %
                             (name, step), tol, tol)
                getattr(layer, name).grad = None
            ref.zero_grad()
        if layer.track_running_stats:
            assert_close(layer.running_mean, ref.running_mean, "running_mean", stats_tol,
                         stats_tol)
            assert_close(layer.running_var, ref.running_var, "running_var", stats_tol,
                         stats_tol)
            assert int(layer.num_batches_tracked) == step + 1, layer.num_batches_tracked
        else:
            assert layer.running_mean is None and layer.num_batches_tracked is None
    return layer, ref


@check
def one_process_reference_for_1d_2d_3d():
    for tail in TAILS:
        compare(tail, seed=len(tail))


@check
def even_batches_and_float64():
    compare((4,), rows=lambda r: 3, seed=7)
    compare((2, 3), rows=lambda r: 2, dtype=torch.float64, seed=8, tol=1e-10, stats_tol=1e-10)


@check
def an_empty_batch_on_rank_0():
    """Rank 0 has no rows (output and input gradient empty, no weight or bias
    contribution); the others' statistics alone."""
    for tail in ((), (2, 3)):
        compare(tail, rows=lambda r: 0 if r == 0 else 1 + 2 * r, seed=9)


@check
def one_value_per_channel_refused_on_every_rank():
    """A global batch of one value per channel has no variance: every rank raises, as
    torch's BatchNorm does for a local one, and the job goes on."""
    layer = hvd.SyncBatchNorm(CHANNELS)
    x = torch.ones((1 if hvd.rank() == 0 else 0, CHANNELS))
    expect_raises(ValueError, lambda: layer(x), "Expected more than 1 value per channel")
    compare(seed=10, steps=1)


@check
def far_from_zero_without_cancellation():
    """Data near 1e4 with a spread near 1: E[x^2] - E[x]^2 in float32 would lose the
    variance entirely; the combined (count, mean, M2) keeps it to float32's precision. The
    output is float32's (x - mean rounded)."""
    compare((2, 3), seed=11, offset=1e4, tol=2e-3, stats_tol=1e-6)


@check
def momentum_none_is_the_cumulative_average():
    compare((5,), seed=12, steps=4, momentum=None)


@check
def affine_false():
    compare((2, 3), seed=13, affine=False)


@check
def track_running_stats_false_still_synchronizes():
    """Training normalizes with the global batch's statistics (torch's SyncBatchNorm), no
    buffers; eval mode then normalizes each rank's batch with its own (no communication)."""
    layer, ref = compare((5,), seed=14, track_running_stats=False)
    layer.eval()
    ref.eval()
    x, _ = batch(hvd.rank(), 9, 4, (5,), torch.float32, 14)
    assert_close(layer(x), ref(x.double()), "eval without buffers")


@check
def half_precision_inputs():
    """float16 (whose CPU batch_norm torch 1.13 lacks) and bfloat16 inputs: the statistics
    in float32, output and input gradient in the input's dtype."""
    compare((5,), dtype=torch.float16, seed=15, tol=1e-2)
    compare((2, 3), dtype=torch.bfloat16, seed=16, tol=6e-2)


@check
def eval_mode_uses_running_stats_alone():
    """In eval mode no rank communicates: the last rank alone runs the layer (a collective
    would wait for the others until the daemon's stall shutdown)."""
    layer, ref = compare((2, 3), seed=17, steps=2)
    layer.eval()
    ref.eval()
    if hvd.rank() == hvd.size() - 1:
        x, _ = batch(hvd.rank(), 5, 3, (2, 3), torch.float32, 17)
        completed = hvd.stats()["completed"]
        for _ in range(2):
            assert_close(layer(x), ref(x.double()), "eval output")
        assert hvd.stats()["completed"] == completed, "eval mode communicated"
        assert int(layer.num_batches_tracked) == 2
        assert_close(layer.running_mean, ref.running_mean, "running_mean")


@check
def layers_named_by_first_call_order():
    """Two layers, the second created first, over several steps: each has its own fixed
    names, the same on every rank (numbered by first call), used once per step."""
    steps = 3
    second = hvd.SyncBatchNorm(CHANNELS)
    first = hvd.SyncBatchNorm(CHANNELS)
    for step in range(steps):
        x = batch(hvd.rank(), step, 2, (), torch.float32, 19)[0].requires_grad_()
        second(first(x)).pow(2).sum().backward()
    names = [first._zen_name[1], second._zen_name[1]]
    assert names[0] != names[1] and names[0].startswith("sync_batch_norm.0."), names
    assert int(names[0].split(".")[-1]) + 1 == int(names[1].split(".")[-1]), names
    assert hvd.allgather_object(names, name="check.names") == [names] * hvd.size()
    tensors = hvd.stats()["tensors"]
    for name in names:
        assert tensors["allgather.%s.stats" % name]["completed"] == steps, tensors
        assert tensors["allreduce.%s.grads" % name]["completed"] == steps, tensors


@check
def process_sets_synchronize_within_themselves():
    """The job's halves as two process sets (one rank each on 2 ranks: the local batch
    norm), each layer against the reference on its own set's batch."""
    half = hvd.size() // 2
    halves = [list(range(half)), list(range(half, hvd.size()))]
    sets = [hvd.add_process_set(h) for h in halves]
    try:
        mine = 0 if hvd.rank() < half else 1
        compare((5,), members=halves[mine], process_set=sets[mine], seed=18,
                rows=lambda r: 1 + r)
        other = sets[1 - mine]
        layer = hvd.SyncBatchNorm(CHANNELS, process_set=other)
        x, _ = batch(hvd.rank(), 0, 2, (), torch.float32, 18)
        expect_raises(ValueError, lambda: layer(x), "not a member")
        layer.eval()
        layer(x)  # eval mode does not synchronize: any rank may run it
    finally:
        for s in sets:
            hvd.remove_process_set(s)


@check
def wrong_inputs_refused():
    layer = hvd.SyncBatchNorm(CHANNELS)
    expect_raises(ValueError, lambda: layer(torch.ones(CHANNELS)),
                  "expected at least 2D input (got 1D input)")
    expect_raises(ValueError, lambda: hvd.SyncBatchNorm(0)(torch.ones(4, 0)),
                  "number of input channels should be non-zero")
    never = hvd.ProcessSet([0])
    expect_raises(ValueError, lambda: hvd.SyncBatchNorm(CHANNELS, process_set=never)(
        torch.ones(2, CHANNELS)), "has not been added")


def small_model():
    torch.manual_seed(1234)  # the same parameters on every rank and in the reference
    return torch.nn.Sequential(
        torch.nn.Linear(5, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
        torch.nn.Unflatten(1, (2, 2, 2)), torch.nn.BatchNorm2d(2, momentum=None),
        torch.nn.Flatten(), torch.nn.Linear(8, 1)).double()


def model_batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    rows = 2 + rank
    return (torch.randn((rows, 5), generator=g, dtype=torch.float64) + rank,
            torch.randn((rows, 1), generator=g, dtype=torch.float64))


@check
def convert_sync_batchnorm_keeps_state():
    bn = torch.nn.BatchNorm1d(4)
    bn.bias.requires_grad_(False)
    bn.eval()
    with torch.no_grad():
        bn.running_mean.fill_(2.0)
    tree = torch.nn.Sequential(torch.nn.Linear(2, 4), bn)
    converted = hvd.SyncBatchNorm.convert_sync_batchnorm(tree)
    assert converted is tree
    sync = converted[1]
    assert type(sync) is hvd.SyncBatchNorm and not sync.training
    assert sync.weight is bn.weight and sync.bias is bn.bias and not sync.bias.requires_grad
    assert sync.running_mean is bn.running_mean and sync.num_batches_tracked is \
        bn.num_batches_tracked
    assert sync.process_set is hvd.global_process_set
    alone = hvd.SyncBatchNorm.convert_sync_batchnorm(torch.nn.BatchNorm3d(2, affine=False))
    assert type(alone) is hvd.SyncBatchNorm and not alone.affine and alone.training


@check
def convert_sync_batchnorm_trains_like_one_process():
    """A model with a BatchNorm1d and a BatchNorm2d, converted, 3 SGD steps with
    DistributedOptimizer (which averages the gradients): every rank's parameters and
    buffers match one process training on the concatenated batch with the mean of the
    ranks' losses."""
    lr, steps = 0.1, 3
    model = hvd.SyncBatchNorm.convert_sync_batchnorm(small_model())
    assert [type(m) for m in model if isinstance(m, hvd.SyncBatchNorm)] == \
        [hvd.SyncBatchNorm] * 2
    ref = small_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr),
                                   named_parameters=model.named_parameters())
    ref_opt = torch.optim.SGD(ref.parameters(), lr=lr)
    for step in range(steps):
        x, y = model_batch(hvd.rank(), step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        data = [model_batch(r, step) for r in range(hvd.size())]
        out = ref(torch.cat([d[0] for d in data])).split([len(d[1]) for d in data])
        ref_opt.zero_grad()
        loss = sum(torch.nn.functional.mse_loss(o, d[1]) for o, d in zip(out, data))
        (loss / hvd.size()).backward()
        ref_opt.step()
    for (name, got), want in zip(model.state_dict().items(), ref.state_dict().values()):
        assert_close(got, want, name, 1e-10, 1e-10)


if __name__ == "__main__":
    sys.exit(run_checks(hvd, CHECKS, sys.argv[1:]))
