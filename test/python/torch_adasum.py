"""What every rank runs in test_torch.py's adasum jobs: DistributedOptimizer(op=Adasum)
(zen.torch.adasum_optimizer), check by check.

    tools/zenrun -np N /usr/bin/python3 torch_adasum.py [CHECK ...]

A small float64 network trains a few steps on rank-dependent data. Every rank rebuilds every
rank's step independently: the gradients by plain autograd on a copy of the model (no zen),
each rank's local optimizer delta in numpy (SGD, momentum, Adam, their state per rank), the
deltas combined per parameter by adasum_reference.py's tree; the parameters after each step
must equal the reference and be the same bits on every rank. Prints one line per check and
rank: `ZENTEST {"check": ..., ...}`.
"""

import sys

import numpy as np
import torch

from rank_report import Checks, add_checkout_package, expect_raises, run_checks

add_checkout_package()

import zen.torch as hvd  # noqa: E402
from adasum_reference import adasum_tree, assert_close  # noqa: E402

CHECKS = Checks()
check = CHECKS.check
TOL = 1e-10  # float64, a few steps
STEPS, BATCH, LR = 4, 5, 0.1


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(6, 5)
        self.out = torch.nn.Linear(5, 3)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))


def fresh():
    torch.manual_seed(7)
    return Net().double()


def data(rank, step, k=0):
    """Rank rank's batch for backward pass k of step: every rank's differs."""
    g = torch.Generator().manual_seed(10000 * rank + 100 * step + k)
    return (torch.randn(BATCH, 6, generator=g, dtype=torch.float64),
            torch.randn(BATCH, 3, generator=g, dtype=torch.float64))


def loss(model, rank, step, k=0):
    x, y = data(rank, step, k)
    return torch.nn.functional.mse_loss(model(x), y)


def grads(params, rank, step, passes):
    """Rank rank's gradients (summed over passes) at params ({name: array}), by autograd on a
    plain copy of the model."""
    model = fresh()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(params[name]))
    for k in range(passes):
        loss(model, rank, step, k).backward()
    return {name: p.grad.numpy().copy() for name, p in model.named_parameters()}


class Sgd:
    """torch.optim.SGD's delta (dampening 0, no nesterov) in numpy, one rank's state."""

    def __init__(self, momentum=0.0):
        self.momentum, self.buf = momentum, {}

    def delta(self, name, g):
        if self.momentum:
            buf = self.buf.get(name)
            self.buf[name] = g.copy() if buf is None else self.momentum * buf + g
            g = self.buf[name]
        return -LR * g


class Adam:
    """torch.optim.Adam's delta in numpy, one rank's state."""

    def __init__(self, betas=(0.9, 0.999), eps=1e-8):
        self.betas, self.eps, self.state = betas, eps, {}

    def delta(self, name, g):
        b1, b2 = self.betas
        t, m, v = self.state.get(name, (0, 0.0, 0.0))
        t, m, v = t + 1, b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        self.state[name] = (t, m, v)
        return -LR * (m / (1 - b1 ** t)) / (np.sqrt(v) / np.sqrt(1 - b2 ** t) + self.eps)


def reference(make_opt, passes=1, fp16=False):
    """The parameters ({name: array}) after each step: every rank's local delta from its own
    gradients and optimizer state, combined per parameter by the Adasum tree (fp16: deltas and
    result rounded to float16, as Compression.fp16 sends them)."""
    size = hvd.size()
    params = {n: p.detach().numpy().copy() for n, p in fresh().named_parameters()}
    opts = [make_opt() for _ in range(size)]
    out = []
    for step in range(STEPS):
        deltas = []
        for r in range(size):
            g = grads(params, r, step, passes)
            deltas.append({n: opts[r].delta(n, g[n]) for n in params})
        for n in params:
            mine = [d[n] for d in deltas]
            if fp16:
                mine = [d.astype(np.float16) for d in mine]
            combined = adasum_tree(mine)
            if fp16:
                combined = combined.astype(np.float16).astype(np.float64)
            params[n] = params[n] + combined.reshape(params[n].shape)
        out.append({n: a.copy() for n, a in params.items()})
    return out


def train(make_torch_opt, passes=1, compression=hvd.Compression.none, synchronize=False):
    """The parameters ({name: tensor}) after each step of DistributedOptimizer(op=Adasum)."""
    rank = hvd.rank()
    model = fresh()
    opt = hvd.DistributedOptimizer(make_torch_opt(model.parameters()),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum,
                                   compression=compression, backward_passes_per_step=passes)
    out = []
    for step in range(STEPS):
        opt.zero_grad()
        for k in range(passes):
            before = {n: p.detach().clone() for n, p in model.named_parameters()}
            loss(model, rank, step, k).backward()
            # The hooks stepped locally and put every parameter back until step().
            for n, p in model.named_parameters():
                assert torch.equal(p, before[n]), "%s moved before step()" % n
        if synchronize:
            opt.synchronize()  # nothing to wait for (as Horovod's)
        opt.step()
        out.append({n: p.detach().clone() for n, p in model.named_parameters()})
    return out


def assert_matches(got, want, tol, what):
    for step, (g, w) in enumerate(zip(got, want)):
        for n in w:
            assert_close(g[n].numpy(), w[n].ravel(), tol, "%s: %s after step %d" % (what, n, step))
    # The same bits on every rank.
    flat = torch.cat([p.reshape(-1) for p in got[-1].values()]).view(1, -1)
    gathered = hvd.allgather(flat, name="adasum.bits.%s" % what)
    assert all(torch.equal(gathered[0], g) for g in gathered), what


def sgd(momentum=0.0):
    return lambda params: torch.optim.SGD(params, lr=LR, momentum=momentum)


# ---- checks ----

@check
def adasum_sgd():
    """Plain SGD: the delta is -lr * gradient, and Adasum is scale-equivariant, so this one
    cannot tell deltas from gradients; momentum and Adam below can."""
    assert_matches(train(sgd()), reference(Sgd), TOL, "sgd")


@check
def adasum_sgd_momentum():
    """Each rank's momentum advances with its own gradients (Adasum of the deltas, not of the
    gradients: this is where the two differ)."""
    assert_matches(train(sgd(0.9), synchronize=True), reference(lambda: Sgd(0.9)), TOL,
                   "momentum")


@check
def adasum_adam():
    adam = lambda params: torch.optim.Adam(params, lr=LR)  # noqa: E731
    assert_matches(train(adam), reference(Adam), TOL, "adam")


@check
def adasum_two_backward_passes():
    """backward_passes_per_step=2: the local step takes the gradients summed over both passes;
    a third pass before step() is refused."""
    assert_matches(train(sgd(0.9), passes=2), reference(lambda: Sgd(0.9), passes=2), TOL,
                   "passes2")
    model = fresh()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum)
    loss(model, hvd.rank(), 0).backward()
    expect_raises(AssertionError, lambda: loss(model, hvd.rank(), 0).backward(),
                  "backward_passes_per_step")
    opt.step()


@check
def adasum_fp16_compression():
    """Compression.fp16: the deltas travel as float16; the reference rounds them alike (the
    daemon widens float16 to float64 and rounds once, as the reference does)."""
    got = train(sgd(0.9), compression=hvd.Compression.fp16)
    assert_matches(got, reference(lambda: Sgd(0.9), fp16=True), 1e-8, "fp16")


@check
def adasum_synchronize_and_zero_grad():
    """skip_synchronize is refused (the local steps already used the gradients), and so is
    zero_grad between backward and step; broadcast_optimizer_state creates the state with the
    wrapped step (no Adasum allreduce, the parameters unchanged)."""
    model = fresh()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]), n
    expect_raises(AssertionError, opt.skip_synchronize, "not supported with op=Adasum")
    loss(model, hvd.rank(), 0).backward()
    expect_raises(AssertionError, opt.zero_grad, "zero_grad")
    opt.step()
    opt.zero_grad()


@check
def adasum_refusals():
    """What the Adasum optimizer cannot take fails on every rank with a clear ValueError, the
    parameters untouched: a sparse gradient, a parameter off the host (a meta tensor stands
    for a CUDA one: the same check), Compression.topk, sparse_as_dense."""
    emb = torch.nn.Embedding(10, 3, sparse=True).double()
    before = emb.weight.detach().clone()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=LR),
                                   named_parameters=emb.named_parameters(), op=hvd.Adasum)
    e = expect_raises(ValueError, lambda: emb(torch.tensor([1, 2])).sum().backward(),
                      "sparse gradient")
    assert "'weight'" in str(e) and "dense-only" in str(e), str(e)
    assert torch.equal(emb.weight, before)
    del opt
    meta = torch.nn.Parameter(torch.empty(4, device="meta"))
    expect_raises(ValueError, lambda: hvd.DistributedOptimizer(
        torch.optim.SGD([meta], lr=LR), op=hvd.Adasum), "takes CPU and CUDA tensors")
    model = fresh()
    for kwargs, what in ((dict(compression=hvd.Compression.topk(0.1)), "dense-only"),
                         (dict(sparse_as_dense=True), "sparse_as_dense")):
        expect_raises(ValueError, lambda: hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=LR), op=hvd.Adasum, **kwargs), what)


@check
def adasum_world_not_power_of_two():
    """On a world that is not a power of two the daemon's error reaches every rank from
    backward (the parameter put back); on one that is, a step works."""
    size = hvd.size()
    model = fresh()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum)
    if size & (size - 1):
        e = expect_raises(ValueError, lambda: loss(model, hvd.rank(), 0).backward(),
                          "power-of-two number of ranks, this job has %d" % size)
        assert "adasum" in str(e), str(e)
        for n, p in model.named_parameters():
            assert torch.equal(p, before[n]), n
        return
    loss(model, hvd.rank(), 0).backward()
    opt.step()
    assert any(not torch.equal(p, before[n]) for n, p in model.named_parameters())


if __name__ == "__main__":
    sys.exit(run_checks(hvd, CHECKS, sys.argv[1:], hvd.barrier))
