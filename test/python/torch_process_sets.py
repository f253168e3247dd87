"""What every rank runs in test_torch.py's process-set job: zen.torch's process sets (Horovod's),
check by check, on 4 ranks.

    tools/zenrun -np 4 /usr/bin/python3 torch_process_sets.py [CHECK ...]

init(process_sets=[A, B]) with A = {0, 1} and B = {2, 3}; each rank runs the collectives of
its own set (the two sets under the same names at once), with a global collective between,
against numpy re-computations from every member's known input (rank r's input is a function
of r); then a set added and removed at run time ({1, 2, 3}), DistributedOptimizer over A
(members against numpy SGD on A's averaged gradient, ranks 2 and 3 against their local SGD),
and the refusals: a non-member's call, a set never added or removed, the global set's
removal, add lists that differ between the ranks. Prints one line per check and rank:
`ZENTEST {"check": ..., "ok": ..., "error": ...}`.
"""

import sys

import numpy as np
import torch

from process_set_fixtures import data, process_sets
from rank_report import Checks, add_checkout_package, expect_raises, run_checks

add_checkout_package()

import zen.torch as hvd  # noqa: E402
from adasum_reference import adasum_tree, assert_close  # noqa: E402

CHECKS = Checks()
check = CHECKS.check
A, B, mine = process_sets(hvd)


def t(array):
    return torch.from_numpy(np.ascontiguousarray(array))


def assert_equal(got, want):
    got = got.detach().numpy() if isinstance(got, torch.Tensor) else np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    assert np.array_equal(got, want), (got, want)


@check
def sets_after_init():
    assert A.process_set_id == 1 and B.process_set_id == 2, (A, B)
    assert A.ranks == [0, 1] and B.ranks == [2, 3]
    assert hvd.global_process_set.process_set_id == 0
    assert hvd.global_process_set.ranks == [0, 1, 2, 3]
    assert hvd.global_process_set.size() == 4
    assert hvd.global_process_set.rank() == hvd.rank()
    own, other = mine()
    assert own.included() and not other.included()
    assert own.size() == 2 and own.rank() == hvd.rank() % 2
    expect_raises(ValueError, other.rank, "not a member")
    assert str(B) == "ProcessSet(process_set_id=2, ranks=[2, 3], mpi_comm=None)", str(B)
    assert A == A and A != hvd.ProcessSet([0, 1])  # identity, as Horovod's


@check
def allreduce_in_each_set():
    own, _ = mine()
    want_sum = sum(data(r) for r in own.ranks)
    assert_equal(hvd.allreduce(t(data(hvd.rank())), op=hvd.Sum, name="x", process_set=own),
                 want_sum)
    assert_equal(hvd.allreduce(t(data(hvd.rank())), name="x.avg", process_set=own),
                 want_sum / 2)
    inplace = t(data(hvd.rank()))
    hvd.allreduce_(inplace, op=hvd.Sum, name="x.inplace", process_set=own)
    assert_equal(inplace, want_sum)
    grouped = hvd.grouped_allreduce([t(data(hvd.rank(), seed=s)) for s in range(3)],
                                    op=hvd.Max, name="x.group", process_set=own)
    for s, g in enumerate(grouped):
        assert_equal(g, np.maximum.reduce([data(r, seed=s) for r in own.ranks]))


@check
def adasum_in_each_set():
    own, _ = mine()
    x = data(hvd.rank(), shape=(7,), seed=14).astype(np.float64)
    got = hvd.allreduce(t(x), op=hvd.Adasum, name="adasum", process_set=own)
    want = adasum_tree([data(r, shape=(7,), seed=14) for r in own.ranks])
    assert_close(got.numpy(), want, 1e-12, "adasum over %s" % own)


@check
def same_names_in_both_sets_and_a_global_collective_between():
    own, _ = mine()
    handle = hvd.allreduce_async(t(data(hvd.rank(), seed=5)), op=hvd.Sum, name="shared",
                                 process_set=own)
    everyone = hvd.allreduce(t(data(hvd.rank(), seed=6)), op=hvd.Sum, name="shared.global")
    assert_equal(everyone, sum(data(r, seed=6) for r in range(4)))
    assert_equal(hvd.synchronize(handle), sum(data(r, seed=5) for r in own.ranks))
    # A name pairs up within its set, but a rank has it in flight once: not in two sets.
    # "both.<rank>" is posted by this rank alone first; its partner posts it only after
    # "both.tried", which completes once both have tried their second post, so it cannot
    # complete before that post (a partner running ahead could otherwise post it in between).
    name = "both.%d" % hvd.rank()
    handles = [hvd.allreduce_async(t(data(hvd.rank(), seed=7)), op=hvd.Sum, name=name,
                                   process_set=own)]
    expect_raises(ValueError, lambda: hvd.allreduce_async(t(data(hvd.rank())), name=name),
                  "already in flight")
    hvd.allreduce(t(data(hvd.rank())), name="both.tried", process_set=own)
    handles += [hvd.allreduce_async(t(data(hvd.rank(), seed=7)), op=hvd.Sum, name="both.%d" % p,
                                    process_set=own) for p in own.ranks if p != hvd.rank()]
    for h in handles:
        assert_equal(hvd.synchronize(h), sum(data(r, seed=7) for r in own.ranks))


@check
def allgather_in_set_order():
    own, _ = mine()
    rows = lambda r: data(r, shape=(r + 1, 2), seed=2)  # noqa: E731 - rows differ per rank
    got = hvd.allgather(t(rows(hvd.rank())), name="g", process_set=own)
    assert_equal(got, np.concatenate([rows(r) for r in own.ranks]))
    objects = hvd.allgather_object({"rank": hvd.rank()}, name="o", process_set=own)
    assert objects == [{"rank": r} for r in own.ranks], objects


@check
def allgather_gradient_in_set():
    own, _ = mine()
    x = t(data(hvd.rank(), shape=(hvd.rank() + 1, 2), seed=3)).requires_grad_()
    y = hvd.allgather(x, name="g.grad", process_set=own)
    w = torch.arange(y.numel(), dtype=torch.float32).view(y.shape)
    (y * w).sum().backward()
    offset = sum(r + 1 for r in own.ranks if r < hvd.rank())
    assert_equal(x.grad, w[offset:offset + hvd.rank() + 1].numpy())


@check
def broadcast_root_is_a_job_rank_in_the_set():
    own, _ = mine()
    root = own.ranks[1]  # the root as a rank of the job, as Horovod's
    got = hvd.broadcast(t(data(hvd.rank(), seed=4)), root_rank=root, name="b", process_set=own)
    assert_equal(got, data(root, seed=4))
    inplace = t(data(hvd.rank(), seed=4))
    hvd.broadcast_(inplace, root_rank=own.ranks[0], name="b.inplace", process_set=own)
    assert_equal(inplace, data(own.ranks[0], seed=4))
    assert hvd.broadcast_object("from %d" % hvd.rank(), root_rank=root, name="b.obj",
                                process_set=own) == "from %d" % root
    outsider = [r for r in range(hvd.size()) if r not in own.ranks][0]
    expect_raises(ValueError, lambda: hvd.broadcast(t(data(0)), root_rank=outsider,
                                                    name="b.outsider", process_set=own),
                  "not a member")


@check
def alltoall_splits_within_the_set():
    own, _ = mine()
    me = own.rank()
    # Member p sends p + 1 rows to the set's rank 0 and 2 to its rank 1.
    sends = {p: data(r, shape=(p + 3, 2), seed=9) for p, r in enumerate(own.ranks)}
    out, received = hvd.alltoall(t(sends[me]), splits=[me + 1, 2], name="a", process_set=own)
    pieces = [sends[p][:p + 1] if me == 0 else sends[p][p + 1:] for p in range(2)]
    assert_equal(out, np.concatenate(pieces))
    assert_equal(received, np.array([p + 1 if me == 0 else 2 for p in range(2)], np.int32))


@check
def reducescatter_pieces_within_the_set():
    own, _ = mine()
    me = own.rank()
    x = [data(r, shape=(5, 2), seed=10) for r in own.ranks]
    got = hvd.reducescatter(t(x[me]), op=hvd.Sum, name="rs", process_set=own)
    total = x[0] + x[1]
    assert_equal(got, total[:3] if me == 0 else total[3:])  # 5 rows: 3 and 2


@check
def sparse_allreduce_in_set():
    own, _ = mine()

    def sparse(r):
        rows = np.array([r, r + 2, 7], np.int64)
        values = data(r, shape=(3, 2), seed=11)
        return rows, values

    def coo(r):
        rows, values = sparse(r)
        return torch.sparse_coo_tensor(t(rows[None, :]), t(values), (8, 2))

    want = np.zeros((8, 2), np.float32)
    for r in own.ranks:
        rows, values = sparse(r)
        np.add.at(want, rows, values)
    got = hvd.sparse_allreduce(coo(hvd.rank()), name="s", op=hvd.Sum, process_set=own)
    assert_equal(got.to_dense(), want)
    got = hvd.allreduce(coo(hvd.rank()), name="s.avg", process_set=own)
    assert_equal(got.to_dense(), want / 2)


@check
def barrier_of_a_set():
    own, _ = mine()
    hvd.barrier(process_set=own)


@check
def refusals_at_once():
    _, other = mine()
    x = t(data(hvd.rank()))
    expect_raises(ValueError, lambda: hvd.allreduce(x, name="foreign", process_set=other),
                  "not a member")
    expect_raises(ValueError, lambda: hvd.broadcast_(x, 0, name="foreign.b",
                                                     process_set=other), "not a member")
    never = hvd.ProcessSet([0, 1])
    expect_raises(ValueError, lambda: hvd.allgather(x, name="never", process_set=never),
                  "has not been added")
    assert hvd.remove_process_set(hvd.global_process_set) is False
    assert hvd.remove_process_set(never) is False
    assert_equal(hvd.allreduce(x, op=hvd.Sum, name="still"), sum(data(r) for r in range(4)))


@check
def add_and_remove_at_run_time():
    three = hvd.add_process_set([1, 3, 2])
    assert isinstance(three, hvd.ProcessSet) and three.ranks == [1, 2, 3]
    assert three.process_set_id == 3, three
    expect_raises(ValueError, lambda: hvd.add_process_set(three), "already been added")
    x = t(data(hvd.rank(), seed=12))
    if hvd.rank() == 0:
        expect_raises(ValueError, lambda: hvd.allreduce(x, name="t", process_set=three),
                      "not a member")
    else:
        assert three.rank() == hvd.rank() - 1
        got = hvd.allreduce(x, op=hvd.Sum, name="t", process_set=three)
        assert_equal(got, sum(data(r, seed=12) for r in (1, 2, 3)))
    assert hvd.remove_process_set(three) is True
    assert three.process_set_id is None
    expect_raises(ValueError, lambda: hvd.allreduce(x, name="t.gone", process_set=three),
                  "has not been added")
    assert hvd.remove_process_set(three) is False
    # A, B untouched.
    own, _ = mine()
    assert_equal(hvd.allreduce(x, op=hvd.Sum, name="t.own", process_set=own),
                 sum(data(r, seed=12) for r in own.ranks))


@check
def add_lists_that_differ_fail_on_every_rank():
    ranks = [0, 1, 2] if hvd.rank() < 2 else [0, 1, 3]
    # Refused by rank 0 (an error response on every rank), not timed out.
    expect_raises(ValueError, lambda: hvd.add_process_set(ranks), "add_process_set")
    # The job goes on.
    x = t(data(hvd.rank(), seed=13))
    assert_equal(hvd.allreduce(x, op=hvd.Sum, name="after.mismatch"),
                 sum(data(r, seed=13) for r in range(4)))


def _features(rank, step):
    g = np.random.default_rng(100 * rank + step)
    return g.standard_normal((4, 3)), g.standard_normal(4)


def _grad(w, rank, step):
    """d/dw mean((X w - y)^2) of rank rank's batch at step."""
    x, y = _features(rank, step)
    return 2.0 / len(y) * x.T @ (x @ w - y)


@check
def distributed_optimizer_over_a_set():
    """DistributedOptimizer(process_set=A): ranks 0 and 1 step on A's averaged gradient, ranks
    2 and 3 (outside A) on their own; numpy SGD is the reference. Compression.topk sending
    every element (through the sparse allreduce over A) must give the same."""
    lr, steps = 0.1, 3
    w0 = np.array([0.5, -0.25, 1.0])
    for compression in (hvd.Compression.none, hvd.Compression.topk(1.0, min_size=1)):
        w = torch.nn.Parameter(torch.tensor(w0))
        opt = hvd.DistributedOptimizer(torch.optim.SGD([w], lr=lr), named_parameters=[("w", w)],
                                       compression=compression, process_set=A)
        want = w0.copy()
        for step in range(steps):
            opt.zero_grad()
            x, y = (torch.from_numpy(a) for a in _features(hvd.rank(), step))
            ((x @ w - y) ** 2).mean().backward()
            opt.step()
            if hvd.rank() in A.ranks:
                grad = sum(_grad(want, r, step) for r in A.ranks) / A.size()
            else:
                grad = _grad(want, hvd.rank(), step)
            want = want - lr * grad
        assert np.allclose(w.detach().numpy(), want, rtol=1e-12, atol=1e-12), \
            (compression, w, want)
    expect_raises(ValueError, lambda: hvd.DistributedOptimizer(
        torch.optim.SGD([w], lr=lr), named_parameters=[("w", w)], op=hvd.Adasum,
        process_set=A), "global process set only")


if __name__ == "__main__":
    hvd.init(process_sets=[A, B])
    sys.exit(run_checks(hvd, CHECKS, sys.argv[1:]))
