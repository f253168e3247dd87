"""What every rank runs in test_torch.py's topk jobs: Compression.topk (Deep Gradient
Compression through Zen's sparse allreduce, zen.torch.topk), check by check.

    tools/zenrun -np N /usr/bin/python3 torch_topk.py [CHECK ...]

The gradients are known in closed form (dgc_reference.py): every rank rebuilds every rank's
gradients and checks the synchronized updates against a dense re-computation of DGC over all
ranks, in float64. Prints one line per check and rank: `ZENTEST {"check": ..., ...}`.
"""

import sys

import numpy as np
import torch

from rank_report import Checks, add_checkout_package, expect_raises, run_checks

add_checkout_package()

import zen.torch as hvd  # noqa: E402
from dgc_reference import (BIAS, MIN_SIZE, SAMPLED_NUMEL, SHAPE,  # noqa: E402
                           check_clipped_updates, dgc_reference, grads, largest,
                           sampled_cases, step_grads)
from zen.common.compression import topk_sample_plan  # noqa: E402

CHECKS = Checks()
check = CHECKS.check
TOL = 1e-12
STEPS_FIT, LR_FIT, FIT_SLACK = 100, 0.5, 1.5  # without error feedback: 2.7x dense


def t(array):
    return torch.from_numpy(np.ascontiguousarray(array))


def train(compression, steps, passes=1, lr=0.0, momentum=0.0, ratios=None, nesterov=False,
          unused=False):
    """W and b under DistributedOptimizer(SGD(lr, momentum)) for steps, with this rank's
    gradients: (W's and b's synchronized gradient per step, W, b). ratios: compression.ratio
    set before each step; unused: with a third parameter the loss does not use (no hook
    fires for it: synchronize() posts it)."""
    w = torch.nn.Parameter(torch.zeros(SHAPE, dtype=torch.float64))
    b = torch.nn.Parameter(torch.zeros(BIAS, dtype=torch.float64))
    named = [("w", w), ("b", b)]
    if unused:
        named.append(("unused", torch.nn.Parameter(torch.zeros(2 * MIN_SIZE,
                                                               dtype=torch.float64))))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([p for _, p in named], lr=lr,
                                                   momentum=momentum, nesterov=nesterov),
                                   named_parameters=named,
                                   compression=compression, backward_passes_per_step=passes)
    updates = []
    for step in range(steps):
        if ratios is not None:
            compression.ratio = ratios[step]
        opt.zero_grad()
        for k in range(passes):
            g, h = (t(x) for x in grads(hvd.rank(), step, k))
            ((w * g).sum() + (b * h).sum()).backward()  # hooks post after the last pass
        opt.synchronize()
        updates.append((w.grad.clone(), b.grad.clone()))
        with opt.skip_synchronize():
            opt.step()
    return updates, w, b


def assert_close(got, want, what, tol=TOL):
    diff = (got - (t(want) if isinstance(want, np.ndarray) else want)).abs().max().item()
    assert diff <= tol, "%s differs by %g" % (what, diff)


# ---- checks ----

@check
def topk_bad_arguments():
    """Bad ratios and misuse raise ValueError at construction, on every rank."""
    for ratio in (0, 0.0, -0.1, 1.5, None, True):
        expect_raises(ValueError, lambda: hvd.Compression.topk(ratio), "ratio")
    expect_raises(ValueError, lambda: hvd.Compression.topk(0.1, min_size=0), "min_size")
    expect_raises(ValueError, lambda: hvd.Compression.topk(0.1, momentum=1.0), "momentum")
    expect_raises(ValueError, lambda: hvd.Compression.topk(0.1, nesterov=True), "nesterov")
    for clip_norm in (0, -1.0, float("inf"), float("nan"), True, "1"):
        expect_raises(ValueError, lambda: hvd.Compression.topk(0.1, clip_norm=clip_norm),
                      "clip_norm")
    w = torch.nn.Parameter(torch.zeros(SHAPE))
    expect_raises(ValueError, lambda: hvd.DistributedOptimizer(
        torch.optim.SGD([w], lr=0.1), named_parameters=[("w", w)],
        compression=hvd.Compression.topk), "Compression.topk(0.01)")
    expect_raises(ValueError, lambda: hvd.DistributedOptimizer(
        torch.optim.SGD([w], lr=0.1, momentum=0.9), named_parameters=[("w", w)],
        compression=hvd.Compression.topk(0.1, momentum=0.9)), "momentum=0")
    # No key for the residual: allreduce refuses it before posting anything.
    expect_raises(ValueError, lambda: hvd.allreduce(
        torch.ones(SHAPE), compression=hvd.Compression.topk(0.1)), "key")
    assert hvd.Compression.topk(1.0).ratio == 1.0


def conservation(passes):
    """Nothing is lost: size * (the sum of the synchronized updates) + the sum of every rank's
    final residual is the sum of every gradient; each update is DGC's (dgc_reference), has at
    most size * k non-zeros, and b (below min_size) is the plain average."""
    size, rank, steps, ratio = hvd.size(), hvd.rank(), 5, 0.02
    compression = hvd.Compression.topk(ratio, min_size=MIN_SIZE)
    updates, w, b = train(compression, steps, passes)
    want_updates, want_residuals = dgc_reference(size, steps, ratio, passes)
    for step, ((uw, ub), want) in enumerate(zip(updates, want_updates)):
        assert_close(uw, want, "W's update of step %d" % step)
        assert int((uw != 0).sum()) <= size * 40, int((uw != 0).sum())
        want_b = sum(step_grads(r, step, passes)[1] for r in range(size)) / size
        assert_close(ub, want_b, "b's update of step %d" % step)
    residual = compression.residual(w)
    assert residual is not None and compression.residual(b) is None
    assert_close(residual, want_residuals[rank], "rank %d's residual" % rank)
    residuals = hvd.allreduce(residual, op=hvd.Sum, name="topk.residuals")
    total = sum(step_grads(r, s, passes)[0] for r in range(size) for s in range(steps))
    sent = size * sum(uw for uw, _ in updates)
    assert_close(sent + residuals.view(SHAPE), total, "sent + residuals against the gradients",
                 1e-10)
    used = hvd.stats()["tensors"]["allreduce.w"]
    assert used["bytes_sent"] > 0


@check
def topk_conserves_gradients():
    conservation(passes=1)


@check
def topk_conserves_gradients_two_passes():
    conservation(passes=2)


@check
def topk_ratio_set_between_steps():
    """DGC's warm-up: ratio set between steps sends the new k from that step on and keeps the
    residual, so W's updates are DGC's with the same ratios (dgc_reference) and the updates and
    the residuals still sum to the gradients; a bad ratio raises and changes nothing."""
    size, steps = hvd.size(), 6
    ratios = [0.25, 0.25, 0.05, 0.05, 0.01, 0.01]
    compression = hvd.Compression.topk(ratios[0], min_size=MIN_SIZE)
    updates, w, _ = train(compression, steps, ratios=ratios)
    want_updates, want_residuals = dgc_reference(size, steps, ratios)
    for step, ((uw, _), want) in enumerate(zip(updates, want_updates)):
        assert_close(uw, want, "W's update of step %d (ratio %g)" % (step, ratios[step]))
    assert_close(compression.residual(w), want_residuals[hvd.rank()], "the residual")
    residuals = hvd.allreduce(compression.residual(w), op=hvd.Sum, name="topk.warmup.residuals")
    total = sum(step_grads(r, s)[0] for r in range(size) for s in range(steps))
    sent = size * sum(uw for uw, _ in updates)
    assert_close(sent + residuals.view(SHAPE), total, "sent + residuals against the gradients",
                 1e-10)
    for bad in (0, 1.5, None, True):
        expect_raises(ValueError, lambda: setattr(compression, "ratio", bad), "ratio")
    assert compression.ratio == 0.01


@check
def topk_ratio_one_is_dense():
    """ratio=1.0 sends everything: the updates are the dense allreduce's, and with momentum
    correction (no masking) the parameters are dense momentum SGD's, Nesterov's too."""
    steps = 4
    dense, _, _ = train(hvd.Compression.none, steps)
    topk, _, _ = train(hvd.Compression.topk(1.0, min_size=1), steps)
    for step, ((dw, db), (tw, tb)) in enumerate(zip(dense, topk)):
        assert_close(tw, dw, "W's update of step %d" % step)
        assert_close(tb, db, "b's update of step %d" % step)
    for nesterov in (False, True):
        _, dw, db = train(hvd.Compression.none, steps, lr=0.1, momentum=0.9, nesterov=nesterov)
        for min_size in (1, MIN_SIZE):  # W sparse and b dense, or both sparse
            _, tw, tb = train(hvd.Compression.topk(1.0, min_size=min_size, momentum=0.9,
                                                   momentum_masking=False, nesterov=nesterov),
                              steps, lr=0.1)
            what = "after momentum SGD (min_size %d, nesterov %s)" % (min_size, nesterov)
            assert_close(tw, dw, "W " + what)
            assert_close(tb, db, "b " + what)


@check
def topk_momentum_correction():
    """momentum with and without factor masking, and Nesterov's: W's updates are DGC's
    (dgc_reference with momentum); b, dense, sends the average of every rank's momentum
    (Nesterov: of g + momentum * u)."""
    size, steps, ratio = hvd.size(), 5, 0.05
    for masking, nesterov in ((True, False), (False, False), (True, True)):
        updates, _, _ = train(hvd.Compression.topk(ratio, min_size=MIN_SIZE, momentum=0.9,
                                                   momentum_masking=masking, nesterov=nesterov),
                              steps)
        want, _ = dgc_reference(size, steps, ratio, momentum=0.9, masking=masking,
                                nesterov=nesterov)
        velocity = np.zeros(BIAS)
        for step, ((uw, ub), ref) in enumerate(zip(updates, want)):
            what = "step %d (masking %s, nesterov %s)" % (step, masking, nesterov)
            assert_close(uw, ref, "W's update of " + what)
            g = sum(step_grads(r, step)[1] for r in range(size)) / size
            velocity = 0.9 * velocity + g
            assert_close(ub, g + 0.9 * velocity if nesterov else velocity, "b's update of " + what)


@check
def topk_local_gradient_clipping():
    """DGC's local gradient clipping: with clip_norm, each rank's gradients of a step (W's and
    b's together, passes summed) are scaled to at most clip_norm / sqrt(size) in global norm
    before the momentum and the residual, so W's updates are DGC's of the clipped gradients
    (dgc_reference) and b's the average of the clipped ones (with momentum: of the momenta).
    The hooks hold the gradients back until the step's last one, or until synchronize() when
    a parameter has none; a clip_norm above every norm changes nothing."""
    size, steps, ratio = hvd.size(), 4, 0.05
    clip_norm = 40 * size ** 0.5  # a rank's gradient norm is ~45 (one pass) or ~63 (two)
    for passes, momentum, unused in ((1, 0.0, False), (2, 0.9, False), (1, 0.9, True)):
        compression = hvd.Compression.topk(ratio, min_size=MIN_SIZE, momentum=momentum,
                                           clip_norm=clip_norm)
        updates, _, _ = train(compression, steps, passes, unused=unused)
        check_clipped_updates(updates, size, ratio, passes, momentum, clip_norm, assert_close,
                              "passes %d, momentum %g, unused %s" % (passes, momentum, unused))
    updates, _, _ = train(hvd.Compression.topk(ratio, min_size=MIN_SIZE, clip_norm=1e6), 2)
    for step, ((uw, _), ref) in enumerate(zip(updates, dgc_reference(size, 2, ratio)[0])):
        assert_close(uw, ref, "W's update of step %d, clip_norm above the norms" % step)


@check
def topk_clipping_leaves_sparse_gradients():
    """With clip_norm a sparse embedding gradient is not clipped (it is not accumulated; its
    hook posts it at once): its average arrives as without compression, while the dense
    gradient, the only one in the norm, is clipped (ratio 1.0 sends it whole: the average of
    the clipped ones), over two steps."""
    size, rank = hvd.size(), hvd.rank()
    clip_norm = 0.5 * size ** 0.5

    def dense_grad(r):
        return torch.arange(12, dtype=torch.float64).view(4, 3) * (r + 1) / 10

    def rows_of(r):
        return torch.tensor([r, r + 1, 7])

    emb = torch.nn.Embedding(10, 3, sparse=True).double()
    w = torch.nn.Parameter(torch.zeros(4, 3, dtype=torch.float64))
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD([emb.weight, w], lr=0.0), named_parameters=[("emb", emb.weight), ("w", w)],
        compression=hvd.Compression.topk(1.0, min_size=1, clip_norm=clip_norm))
    for _ in range(2):
        opt.zero_grad()
        (emb(rows_of(rank)).sum() + (w * dense_grad(rank)).sum()).backward()
        opt.synchronize()
        want_emb = torch.zeros(10, 3, dtype=torch.float64)
        want_w = torch.zeros(4, 3, dtype=torch.float64)
        for r in range(size):
            want_emb.index_add_(0, rows_of(r), torch.ones(3, 3, dtype=torch.float64) / size)
            g = dense_grad(r)
            factor = min(1.0, clip_norm / size ** 0.5 / (g.norm().item() + 1e-6))
            assert factor < 0.5, factor
            want_w += g * factor / size
        assert emb.weight.grad.is_sparse
        assert_close(emb.weight.grad.to_dense(), want_emb, "the embedding's gradient")
        assert_close(w.grad, want_w, "the clipped dense gradient")
        with opt.skip_synchronize():
            opt.step()


@check
def topk_selects_largest_on_its_own():
    """Standalone: compress(tensor, key) sends the k elements of residual + gradient largest in
    magnitude (and keeps the rest); sparse_allreduce(dense=True) and decompress give the
    average of what every rank sent."""
    size, rank, ratio = hvd.size(), hvd.rank(), 0.01
    compression = hvd.Compression.topk(ratio, min_size=MIN_SIZE)
    want, _ = dgc_reference(size, 3, ratio)
    residual = torch.zeros(SHAPE[0] * SHAPE[1], dtype=torch.float64)
    for step in range(3):
        g = t(grads(rank, step)[0])
        accumulated = residual + g.reshape(-1)
        sparse, ctx = compression.compress(g, "w")
        assert sparse.is_sparse and sparse._nnz() == 20, sparse
        chosen = set(sparse._indices()[0].tolist())
        want_chosen = largest(accumulated.numpy(), 20)
        assert chosen == want_chosen, sorted(chosen ^ want_chosen)
        assert torch.equal(sparse.coalesce()._values(),
                           accumulated[sorted(chosen)]), "values are not the residual's"
        residual = accumulated.clone()
        residual[sorted(chosen)] = 0
        assert torch.equal(compression.residual("w"), residual)
        out = hvd.sparse_allreduce(sparse, name="topk.alone", dense=True)
        assert_close(compression.decompress(out, ctx), want[step], "step %d" % step)
    # Below min_size: the gradient itself, dense.
    small = torch.ones(5, dtype=torch.float64)
    assert compression.compress(small, "small") == (small, None)


@check
def topk_sampled_threshold_is_exact():
    """Above topk_sample_plan's size the k largest magnitudes are found among those at or
    above a sampled threshold: the same magnitudes as torch.topk of all of them (ties may pick
    other indices of equal magnitude) for random, tied, zero, skewed and non-finite inputs,
    also when the threshold leaves fewer than k (forced: the whole tensor's top-k); the global
    random generator is left as it was."""
    n = SAMPLED_NUMEL
    g = torch.Generator().manual_seed(100 + hvd.rank())
    skewed = torch.zeros(n)
    skewed[:n // 64] = torch.rand(n // 64, generator=g) + 1  # the large ones all in one block
    with_nan = torch.randn(n, generator=g)
    with_nan[[7, n - 1]] = float("nan")
    with_inf = torch.randn(n, generator=g)
    with_inf[3] = float("inf")
    inputs = {"normal": torch.randn(n, generator=g),
              "tied": torch.randint(0, 3, (n,), generator=g).float(),
              "zeros": torch.zeros(n), "skewed": skewed, "nan": with_nan, "inf": with_inf,
              "float64": torch.randn(n, generator=g, dtype=torch.float64)}
    compression = hvd.Compression.topk(0.01)
    state = torch.get_rng_state()
    for label, k, plan in sampled_cases():
        for name, values in inputs.items():
            magnitudes = values.abs()
            chosen = compression._largest_by(magnitudes, k, plan)
            what = "%s at %s" % (name, label)
            assert chosen.numel() == k and chosen.unique().numel() == k, what
            want = torch.topk(magnitudes, k).values
            got = magnitudes[chosen].sort(descending=True).values
            assert torch.equal(got.nan_to_num(-1), want.nan_to_num(-1)), what
    assert torch.equal(torch.get_rng_state(), state), "the global generator moved"
    assert topk_sample_plan(4096, 40) is None  # small: torch.topk of all


@check
def topk_half_precision_keeps_float32_state():
    """float16 and bfloat16 gradients: the residual (and the momentum) are float32, as in half
    precision the small gradients added to a grown residual round away; the elements sent
    travel in the gradient's dtype and what that rounding drops stays in the residual. Over 100
    steps of small gradients, what was sent plus the residual is their sum to float32
    precision; the daemon sums what is sent in the gradient's dtype (the same gradients on
    every rank: size times each rank's)."""
    n, steps, size = 4096, 100, hvd.size()
    for dtype in (torch.float16, torch.bfloat16):
        g = torch.Generator().manual_seed(7)
        compression = hvd.Compression.topk(0.01, min_size=MIN_SIZE)
        with_momentum = hvd.Compression.topk(0.01, min_size=MIN_SIZE, momentum=0.9)
        total = torch.zeros(n, dtype=torch.float64)
        sent_total = torch.zeros(n, dtype=torch.float64)
        for step in range(steps):
            grad = (torch.rand(n, generator=g) * 1e-3 + 1e-3).to(dtype)
            total += grad.double()
            sparse, ctx = compression.compress(grad, "w")
            assert sparse._values().dtype == dtype, sparse._values().dtype
            sent_total += sparse.to_dense().double()
            with_momentum.compress(grad, "w")
            if step == steps - 1:
                out = hvd.sparse_allreduce(sparse, name="topk.half.%s" % str(dtype)[6:],
                                           op=hvd.Sum, dense=True)
                assert out.dtype == dtype and torch.equal(out, sparse.to_dense() * size)
        residual = compression.residual("w")
        assert residual.dtype == torch.float32, residual.dtype
        assert with_momentum.residual("w").dtype == torch.float32
        assert with_momentum.momentum_buffer("w").dtype == torch.float32
        assert_close(sent_total + residual.double(), total, "sent + residual (%s)" % dtype, 1e-5)


class Regression(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(32, 128)
        self.out = torch.nn.Linear(128, 8)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))


def regression_data(steps, batch):
    """A teacher network's outputs on random inputs: (x, y) per step of the global batch, and
    a held-out set."""
    g = torch.Generator().manual_seed(5)
    teacher = [torch.randn(32, 64, generator=g) / 32 ** 0.5,
               torch.randn(64, 8, generator=g) / 64 ** 0.5]

    def sample(n):
        x = torch.randn(n, 32, generator=g)
        return x, torch.tanh(x @ teacher[0]) @ teacher[1]
    return [sample(batch) for _ in range(steps)], sample(512)


def fit(compression, data, held_out, lr):
    """The held-out loss after training Regression on data (each rank its slice of every
    global batch); every rank ends with the same parameters."""
    size, rank = hvd.size(), hvd.rank()
    torch.manual_seed(3)
    model = Regression()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr),
                                   named_parameters=model.named_parameters(),
                                   compression=compression)
    for x, y in data:
        share = x.shape[0] // size
        mine = slice(rank * share, (rank + 1) * share)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x[mine]), y[mine]).backward()
        opt.step()
    for name, p in model.named_parameters():
        assert torch.equal(hvd.broadcast(p.detach(), 0, name="topk.fit.%s" % name), p), name
    with torch.no_grad():
        return torch.nn.functional.mse_loss(model(held_out[0]), held_out[1]).item()


@check
def topk_trains_close_to_dense():
    """A small regression network trains with topk(0.01) (and momentum correction) to a
    held-out loss close to the dense run's, far below where it started."""
    data, held_out = regression_data(STEPS_FIT, 64)
    start = fit(hvd.Compression.none, [], held_out, LR_FIT)
    dense = fit(hvd.Compression.none, data, held_out, LR_FIT)
    topk = fit(hvd.Compression.topk(0.01), data, held_out, LR_FIT)
    assert dense < 0.2 * start, (start, dense)
    assert topk < FIT_SLACK * dense, (start, dense, topk)


if __name__ == "__main__":
    sys.exit(run_checks(hvd, CHECKS, sys.argv[1:]))
