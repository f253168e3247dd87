"""What every rank runs in test_torch.py: zen.torch's API, check by check.

    tools/zenrun -np N /usr/bin/python3 torch_checks.py [CHECK ...]

Runs the named checks (default: all, in order) on every rank, with a barrier after each so
that the ranks stay in step, and prints one line per check and rank:
`ZENTEST {"check": ..., "ok": ..., "error": ...}`. Every check is collective: all ranks
post the same operations (apart from those a check makes differ on purpose). The daemon's
stall shutdown (set by test_torch.py) turns a rank that stops posting into errors instead of
a hang. Inputs come from torch.manual_seed(1234) (the same on every rank) and are small
integers, so sums are exact in every dtype.
"""

import json
import os
import sys
import tempfile
import warnings

import torch

from rank_report import Checks, add_checkout_package, expect_raises, run_checks

add_checkout_package()

import zen.torch as hvd  # noqa: E402
from adasum_reference import adasum_tree, assert_close  # noqa: E402
from build_info import check_build_info  # noqa: E402

CHECKS = Checks()
check = CHECKS.check
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
          torch.int64]


def small_ints(shape, dtype, seed=1234, lo=-8, hi=8):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi + 1, shape, generator=g).to(dtype)


def launcher_rank_size():
    for r, s in (("ZEN_RANK", "ZEN_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")):
        if r in os.environ:
            return int(os.environ[r]), int(os.environ[s])
    return 0, 1


# ---- basics ----

@check
def basics():
    rank, size = launcher_rank_size()
    assert hvd.is_initialized()
    assert hvd.rank() == rank and hvd.size() == size, (hvd.rank(), hvd.size(), rank, size)
    assert 0 <= hvd.local_rank() < hvd.local_size() <= size
    assert hvd.local_rank() == int(os.environ.get("ZEN_LOCAL_RANK",
                                                  os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK",
                                                                 rank)))
    assert hvd.cross_rank() == 0 and hvd.cross_size() == 1  # one host
    assert hvd.mpi_enabled() == ("OMPI_COMM_WORLD_RANK" in os.environ)
    check_build_info(hvd)  # one host: homogeneous
    assert hvd.Average != hvd.Sum
    # CUDA tensors pass through when libzen has CUDA (a build without refuses them with
    # "built without CUDA"); memory that is neither host nor CUDA is refused here.
    assert isinstance(hvd.cuda_built(), bool)
    expect_raises(ValueError, lambda: hvd.allreduce(torch.ones(2, device="meta")),
                  "CPU and CUDA tensors")


# ---- allreduce ----

@check
def allreduce_dtypes_and_dims():
    size, rank = hvd.size(), hvd.rank()
    for dtype in DTYPES:
        for dim in (1, 2, 3):
            t = small_ints([5] * dim, dtype)
            summed = hvd.allreduce(t, op=hvd.Sum, name="sum.%s.%d" % (dtype, dim))
            assert summed.dtype == dtype and summed.shape == t.shape
            assert torch.equal(summed, t * size), (dtype, dim)
            averaged = hvd.allreduce(t, op=hvd.Average)  # unnamed
            assert torch.equal(averaged, t), (dtype, dim, averaged, t)
            mine = t + rank
            assert torch.equal(hvd.allreduce(mine, op=hvd.Sum),
                               t * size + size * (size - 1) // 2), (dtype, dim)
    # average=True/False, the old spelling.
    t = small_ints([4], torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.equal(hvd.allreduce(t, average=False), t * size)
        assert torch.equal(hvd.allreduce(t, average=True), t)
    expect_raises(ValueError, lambda: hvd.allreduce(t, average=True, op=hvd.Sum))


@check
def allreduce_inplace_async_and_fused():
    size = hvd.size()
    tensors = [small_ints([3, 4], torch.float32, seed=i) for i in range(20)]
    expected = [t * size for t in tensors]
    handles = [hvd.allreduce_async_(t, name="fused.%d" % i, op=hvd.Sum)
               for i, t in enumerate(tensors)]
    for h, t, want in zip(handles, tensors, expected):
        out = hvd.synchronize(h)
        assert out is t and torch.equal(t, want)
    # Out of place, asynchronously: the input stays as it was.
    t = small_ints([6], torch.float64)
    before = t.clone()
    h = hvd.allreduce_async(t, name="async", op=hvd.Sum)
    out = hvd.synchronize(h)
    assert torch.equal(t, before) and torch.equal(out, before * size)
    # poll: True once done; a handle is gone after synchronize.
    h = hvd.allreduce_async(t, name="polled")
    hvd.synchronize(h)
    expect_raises(ValueError, lambda: hvd.poll(h))
    h = hvd.allreduce_async(t, name="polled")
    import time
    deadline = time.time() + 30
    while not hvd.poll(h):
        assert time.time() < deadline
        time.sleep(0.001)
    assert torch.equal(hvd.synchronize(h), t)
    assert torch.equal(hvd.allreduce_(t.clone(), op=hvd.Sum), before * size)
    # The fused tensors shared buckets.
    stats = hvd.stats()
    assert max(stats["tensors"]["allreduce.fused.%d" % i]["last_bucket_size"]
               for i in range(20)) > 1


@check
def allreduce_scaling_layouts_and_grad():
    size = hvd.size()
    t = small_ints([4, 4], torch.float32)
    out = hvd.allreduce(t, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5)
    assert torch.equal(out, t * size)
    out = hvd.allreduce(t, op=hvd.Average, postscale_factor=3.0)
    assert torch.allclose(out, t * 3.0)
    ints = small_ints([4], torch.int64)
    assert torch.equal(hvd.allreduce(ints, op=hvd.Sum, prescale_factor=2), ints * 2 * size)
    # Non-contiguous input, in place and out of place; a 0-dim tensor.
    base = small_ints([4, 6], torch.float32)
    nc = base.t()
    assert not nc.is_contiguous()
    assert torch.equal(hvd.allreduce(nc, op=hvd.Sum), nc * size)
    view = base.clone().t()
    hvd.allreduce_(view, op=hvd.Sum)
    assert torch.equal(view, base.t() * size)
    scalar = torch.tensor(3.0)
    assert hvd.allreduce(scalar, op=hvd.Sum).item() == 3.0 * size
    hvd.allreduce_(scalar, op=hvd.Sum)
    assert scalar.item() == 3.0 * size
    # Dtypes the daemon widens (uint8, int8, int16, bool).
    for dtype in (torch.uint8, torch.int8, torch.int16):
        small = small_ints([5], dtype, lo=0, hi=3)
        assert torch.equal(hvd.allreduce(small, op=hvd.Sum), small * size), dtype
    flags = torch.tensor([hvd.rank() == 0, False])
    assert hvd.allreduce(flags, op=hvd.Sum).tolist() == [True, False]
    # Autograd: the gradient of allreduce is the allreduce of the gradient.
    for op, factor in ((hvd.Sum, size), (hvd.Average, 1)):
        x = small_ints([3, 2], torch.float32).requires_grad_()
        y = hvd.allreduce(x, op=op)
        y.backward(torch.ones_like(y))
        assert torch.equal(x.grad, torch.full_like(x, float(factor)))
    # fp16 compression.
    x = small_ints([8], torch.float32)
    out = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert out.dtype == torch.float32 and torch.equal(out, x * size)
    # What Zen does not have.
    expect_raises(ValueError, lambda: hvd.allreduce(x, op=17), "unknown op")
    expect_raises(ValueError, lambda: hvd.allreduce(torch.zeros(2, dtype=torch.complex64)),
                  "not supported")


@check
def allreduce_adasum():
    """op=Adasum as horovod.torch: a fused group of tensors (each with its own dot products,
    zero vectors and an empty one included) and a single tensor, every float dtype, checked
    against the float64 tree over every rank's input rebuilt here; every rank gets the same
    bits. Integer tensors and ranks that disagree on the op fail on every rank."""
    size, rank = hvd.size(), hvd.rank()
    x = torch.ones(3)
    if size & (size - 1):
        expect_raises(ValueError, lambda: hvd.allreduce(x, op=hvd.Adasum), "power-of-two")
        return
    shapes = [[5], [3, 4], [0], [1], [17]]

    def inputs(r, i):
        if i == 3 and r == 0:
            return torch.zeros(shapes[i])  # a zero vector: its coefficient is 1
        return small_ints(shapes[i], torch.float32, seed=100 * i + r)

    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-6), (torch.float16, 2e-3),
                       (torch.bfloat16, 1.6e-2)):
        mine = [inputs(rank, i).to(dtype) for i in range(len(shapes))]
        outs = hvd.grouped_allreduce(mine, op=hvd.Adasum, name="ada.%s" % dtype)
        outs.append(hvd.allreduce(mine[1], op=hvd.Adasum, name="ada1.%s" % dtype))
        for i, out in zip(list(range(len(shapes))) + [1], outs):
            assert out.dtype == dtype and out.shape == mine[i].shape, (dtype, i, out)
            want = adasum_tree([inputs(r, i).double().numpy() for r in range(size)])
            assert_close(out.double().numpy(), want, tol, (dtype, i))
        flat = torch.cat([o.double().reshape(-1) for o in outs]).view(1, -1)
        gathered = hvd.allgather(flat, name="ada.bits.%s" % dtype)
        assert all(torch.equal(gathered[0], g) for g in gathered), (dtype, gathered)
    expect_raises(ValueError, lambda: hvd.allreduce(torch.ones(3, dtype=torch.int32),
                                                    op=hvd.Adasum), "floating-point")
    if size > 1:
        e = expect_raises(RuntimeError, lambda: hvd.allreduce(
            x, op=hvd.Adasum if rank else hvd.Sum, name="ada.badop"))
        assert "reduce op" in str(e), str(e)


@check
def allreduce_min_max_product():
    """op=Min/Max/Product as horovod.torch, checked against every rank's input rebuilt here."""
    size, rank = hvd.size(), hvd.rank()
    assert (hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product) == (0, 1, 2, 3, 4, 5)
    for dtype in DTYPES + [torch.uint8, torch.int8, torch.int16, torch.bool]:
        lo = 0 if dtype in (torch.uint8, torch.bool) else -2
        hi = 1 if dtype == torch.bool else 2

        def inputs(seed):
            return [small_ints([3, 5], dtype, seed=seed + r, lo=lo, hi=hi) for r in range(size)]

        mine = inputs(10)[rank]
        stacked = torch.stack(inputs(10)).to(torch.float64)
        for op, want in ((hvd.Min, stacked.min(0).values), (hvd.Max, stacked.max(0).values),
                         (hvd.Product, stacked.prod(0))):
            out = hvd.allreduce(mine, op=op, name="mmp.%s.%d" % (dtype, op))
            assert out.dtype == dtype and out.shape == mine.shape
            assert torch.equal(out, want.to(dtype)), (dtype, op, out, want)
            # In place and asynchronous too.
            copy = mine.clone()
            hvd.synchronize(hvd.allreduce_async_(copy, op=op, name="mmp_.%s.%d" % (dtype, op)))
            assert torch.equal(copy, want.to(dtype)), (dtype, op)
    # Every rank gets the same bits from an inexact product.
    x = torch.linspace(0.9, 1.1, 37, dtype=torch.float32) * (1 + rank / 7.0)
    prod = hvd.allreduce(x, op=hvd.Product, name="mmp.bits")
    gathered = hvd.allgather(prod.view(1, -1))
    assert all(torch.equal(gathered[0], g) for g in gathered), gathered
    # A Min bucket and a Sum bucket in flight together never fuse.
    t = small_ints([4], torch.float32) + rank
    hs = [hvd.allreduce_async(t, op=op, name="mix.%s.%d" % (n, i))
          for i in range(3) for op, n in ((hvd.Min, "min"), (hvd.Sum, "sum"))]
    outs = [hvd.synchronize(h) for h in hs]
    base = small_ints([4], torch.float32)
    for i in range(3):
        assert torch.equal(outs[2 * i], base), outs[2 * i]
        assert torch.equal(outs[2 * i + 1], base * size + size * (size - 1) // 2)
    stats = hvd.stats()["tensors"]
    min_buckets = {stats["allreduce.mix.min.%d" % i]["last_bucket"] for i in range(3)}
    sum_buckets = {stats["allreduce.mix.sum.%d" % i]["last_bucket"] for i in range(3)}
    assert not (min_buckets & sum_buckets), (min_buckets, sum_buckets)
    # Grouped, and the autograd path (the gradient is allreduced with the same op).
    out = hvd.grouped_allreduce([t, t * 2], op=hvd.Max, name="grp.max")
    assert torch.equal(out[0], base + size - 1) and torch.equal(out[1], 2 * (base + size - 1))
    g = t.clone().requires_grad_()
    y = hvd.allreduce(g, op=hvd.Max, name="grad.max")
    y.backward(torch.ones_like(y))
    assert torch.equal(g.grad, torch.ones_like(g))
    # Sparse tensors: Average and Sum only, refused at enqueue on every rank.
    sp = random_sparse((10, 2), 3, 5)
    for op in (hvd.Min, hvd.Max, hvd.Product):
        expect_raises(ValueError, lambda: hvd.sparse_allreduce(sp, name="sp.min", op=op),
                      "sparse allreduce reduces with sum or average")
        expect_raises(ValueError, lambda: hvd.allreduce(sp, name="sp.min2", op=op),
                      "sparse allreduce reduces with sum or average")
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum, name="mmp.after").tolist() == [size] * 2


@check
def grouped_allreduce():
    size = hvd.size()
    tensors = [small_ints([i + 1, 3], torch.float32, seed=i) for i in range(5)]
    out = hvd.grouped_allreduce(tensors, op=hvd.Sum, name="grp")
    assert all(torch.equal(o, t * size) for o, t in zip(out, tensors))
    out = hvd.grouped_allreduce(tensors, op=hvd.Average)
    assert all(torch.equal(o, t) for o, t in zip(out, tensors))
    copies = [t.clone() for t in tensors]
    hvd.grouped_allreduce_(copies, op=hvd.Sum, name="grp_")
    assert all(torch.equal(c, t * size) for c, t in zip(copies, tensors))
    h = hvd.grouped_allreduce_async(tensors, op=hvd.Sum, name="grp_async")
    out = hvd.synchronize(h)
    assert all(torch.equal(o, t * size) for o, t in zip(out, tensors))
    stats = hvd.stats()["tensors"]
    assert stats["grouped_allreduce.grp_async.0"]["last_bucket"] == \
        stats["grouped_allreduce.grp_async.4"]["last_bucket"]
    # Differentiable.
    xs = [t.clone().requires_grad_() for t in tensors]
    ys = hvd.grouped_allreduce(xs, op=hvd.Sum)
    sum(y.sum() for y in ys).backward()
    assert all(torch.equal(x.grad, torch.full_like(x, float(size))) for x in xs)


# ---- allgather ----

@check
def allgather():
    size, rank = hvd.size(), hvd.rank()
    for dtype in DTYPES + [torch.uint8, torch.int8, torch.int16]:
        for dim in (1, 2, 3):
            t = torch.full([rank + 1] + [3] * (dim - 1), rank, dtype=dtype)
            g = hvd.allgather(t, name="ag.%s.%d" % (dtype, dim))
            assert g.dtype == dtype and g.shape[0] == size * (size + 1) // 2
            assert list(g.shape[1:]) == [3] * (dim - 1)
            at = 0
            for r in range(size):
                assert torch.equal(g[at:at + r + 1], torch.full_like(g[at:at + r + 1], r))
                at += r + 1
    # Fused, asynchronous.
    handles = [hvd.allgather_async(torch.full([2, 2], rank * 10 + i, dtype=torch.int64),
                                   name="agf.%d" % i) for i in range(10)]
    for i, h in enumerate(handles):
        g = hvd.synchronize(h)
        assert g.shape == (2 * size, 2)
        assert g[::2, 0].tolist() == [r * 10 + i for r in range(size)]
    # Grouped.
    outs = hvd.grouped_allgather([torch.full([1], rank), torch.full([2], rank)], name="agg")
    assert outs[0].tolist() == list(range(size))
    # Autograd: this rank's slice of the averaged gradient.
    x = torch.ones([rank + 1, 2], requires_grad=True)
    y = hvd.allgather(x)
    grads = torch.cat([torch.full([r + 1, 2], float(r)) for r in range(size)])
    y.backward(grads)
    assert torch.equal(x.grad, torch.full_like(x, float(rank)))


# ---- alltoall ----

def a2a_rows(src, dst):
    """Rows rank src sends rank dst: uneven, some empty (its own too)."""
    return (src + 2 * dst) % 3


def a2a_value(src, dst, k):
    """Row k from rank src to rank dst: a small integer naming all three (exact in bf16)."""
    return 16 * src + 4 * dst + k


def a2a_input(rank, size, dtype, trailing=(2,)):
    """Rank's alltoall input, rows to rank 0 first; every element of a row is its value."""
    rows = [torch.full((a2a_rows(rank, d),) + trailing, 0, dtype=torch.int64)
            for d in range(size)]
    for d, block in enumerate(rows):
        for k in range(block.shape[0]):
            block[k] = a2a_value(rank, d, k)
    return torch.cat(rows).to(dtype)


@check
def alltoall():
    size, rank = hvd.size(), hvd.rank()
    splits = [a2a_rows(rank, d) for d in range(size)]
    want_splits = [a2a_rows(s, rank) for s in range(size)]
    want = torch.cat([torch.tensor([a2a_value(s, rank, k) for k in range(a2a_rows(s, rank))],
                                   dtype=torch.int64) for s in range(size)])
    for dtype in DTYPES + [torch.uint8, torch.int8, torch.int16]:
        for as_tensor in (False, True):
            t = a2a_input(rank, size, dtype)
            given = torch.tensor(splits, dtype=torch.int32) if as_tensor else splits
            out, received = hvd.alltoall(t, splits=given, name="a2a.%s.%d" % (dtype, as_tensor))
            assert out.dtype == dtype and out.shape == (sum(want_splits), 2), (out.shape, dtype)
            assert received.dtype == torch.int32 and received.tolist() == want_splits
            assert torch.equal(out[:, 0].long(), want) and torch.equal(out[:, 1].long(), want)
    # Without splits: equal pieces, and only the tensor comes back (as horovod.torch).
    t = torch.arange(2 * size, dtype=torch.float32) + 100 * rank
    out = hvd.alltoall(t, name="a2a.equal")
    assert isinstance(out, torch.Tensor)
    assert out.tolist() == [100 * s + 2 * rank + k for s in range(size) for k in range(2)]
    # Asynchronous: synchronize gives (output, received_splits); 3-D, a zero-row piece.
    t = a2a_input(rank, size, torch.float64, trailing=(2, 3))
    h = hvd.alltoall_async(t, splits=splits, name="a2a.async")
    out, received = hvd.synchronize(h)
    assert out.shape == (sum(want_splits), 2, 3) and received.tolist() == want_splits
    # Autograd: the gradient goes back to the rank that sent each row.
    x = a2a_input(rank, size, torch.float32).requires_grad_()
    y, received = hvd.alltoall(x, splits=splits)
    (y * y.detach()).sum().backward()  # d/dy = y: each row's own values come back
    assert torch.equal(x.grad, x.detach()), (x.grad, x)
    x = (torch.arange(2 * size, dtype=torch.float32) + rank).requires_grad_()
    y = hvd.alltoall(x)
    y.backward(torch.arange(2 * size, dtype=torch.float32) * 10)
    # Row 2r + k went to rank r as its row 2 * rank + k, whose gradient was 10 * (2 rank + k).
    assert x.grad.tolist() == [10.0 * (2 * rank + k) for r in range(size) for k in range(2)]
    # Errors reach every rank: a bad split on one rank, a shape that does not split equally.
    bad = list(splits) if rank else splits[:-1] + [splits[-1] + 1]
    e = expect_raises(RuntimeError, lambda: hvd.alltoall(a2a_input(rank, size, torch.float32),
                                                         splits=bad, name="a2a.bad"))
    assert "a2a.bad" in str(e) and "alltoall splits do not fit" in str(e), str(e)
    if size > 1:
        e = expect_raises(RuntimeError, lambda: hvd.alltoall(torch.ones(2 * size + 1),
                                                             name="a2a.uneven"))
        assert "do not split equally" in str(e), str(e)
        e = expect_raises(RuntimeError, lambda: hvd.alltoall(torch.ones(size, 2 + rank % 2),
                                                             name="a2a.trailing"))
        assert "all dimensions but the first must match" in str(e), str(e)
    expect_raises(ValueError, lambda: hvd.alltoall(torch.tensor(1.0)))
    expect_raises(ValueError, lambda: hvd.alltoall(torch.ones(size), splits=torch.ones(size)))


# ---- reducescatter ----

@check
def reducescatter():
    size, rank = hvd.size(), hvd.rank()
    ops = {hvd.Sum: lambda xs: sum(xs), hvd.Average: lambda xs: sum(xs) / size,
           hvd.Min: lambda xs: torch.stack(xs).min(0).values,
           hvd.Max: lambda xs: torch.stack(xs).max(0).values,
           hvd.Product: lambda xs: torch.stack(xs).prod(0)}
    for rows in (2 * size + 1, size - 1, 0):  # uneven pieces, an empty piece, nothing
        # Horovod's split: rows // size each, one more on the first rows % size ranks.
        mine = rows // size + (1 if rank < rows % size else 0)
        first = rows // size * rank + min(rank, rows % size)
        for dtype in DTYPES:
            for op, reduce in ops.items():
                lo, hi = (-2, 2) if op == hvd.Product else (-8, 8)
                everyone = [small_ints([rows, 3], dtype, seed=7 + r, lo=lo, hi=hi)
                            for r in range(size)]
                if op == hvd.Average:  # multiples of size: the mean is exact
                    everyone = [(e.long() * size).to(dtype) for e in everyone]
                out = hvd.reducescatter(everyone[rank], op=op,
                                        name="rs.%d.%s.%d" % (rows, dtype, op))
                want = reduce([e.double() for e in everyone])[first:first + mine]
                assert out.dtype == dtype and out.shape == (mine, 3), (out.shape, dtype, op)
                assert torch.equal(out.double(), want.double()), (dtype, op, out, want)
    # Asynchronous, fused (a group of them in flight at once), scaled, a small int dtype.
    handles = [hvd.reducescatter_async(torch.full([size + i, 2], float(rank + i)), op=hvd.Sum,
                                       name="rsf.%d" % i) for i in range(6)]
    for i, h in enumerate(handles):
        out = hvd.synchronize(h)
        rows = size + i
        mine = rows // size + (1 if rank < rows % size else 0)
        assert torch.equal(out, torch.full([mine, 2], float(sum(r + i for r in range(size)))))
    out = hvd.reducescatter(torch.ones(2 * size, dtype=torch.int16), op=hvd.Sum, name="rs.i16",
                            prescale_factor=3.0, postscale_factor=0.5)
    assert out.dtype == torch.int16 and out.tolist() == [int(1.5 * size)] * 2
    # Autograd: the allgather of the gradient, / size for Average, times the scale factors.
    for op, scale in ((hvd.Sum, 1.0), (hvd.Average, 1.0 / size)):
        x = torch.ones([2 * size + 1, 2], requires_grad=True)
        y = hvd.reducescatter(x, op=op, prescale_factor=2.0)
        y.backward(torch.full_like(y, float(rank + 1)))
        # Row j of x went into rank p's piece, p the owner of row j.
        owner = [p for p in range(size) for _ in range((2 * size + 1) // size +
                                                        (1 if p < (2 * size + 1) % size else 0))]
        want = torch.tensor([[2.0 * scale * (p + 1)] * 2 for p in owner])
        assert torch.allclose(x.grad, want), (op, x.grad, want)
    x = torch.ones([size, 2], requires_grad=True)
    y = hvd.reducescatter(x, op=hvd.Max)
    expect_raises(NotImplementedError, lambda: y.sum().backward())
    # Errors: shapes that differ fail on every rank; scalars and Adasum are refused here.
    if size > 1:
        e = expect_raises(RuntimeError, lambda: hvd.reducescatter(torch.ones([size + rank, 2]),
                                                                  name="rs.bad"))
        assert "rs.bad" in str(e) and "dense shape" in str(e), str(e)
        e = expect_raises(RuntimeError, lambda: hvd.reducescatter(
            torch.ones([size, 2]), op=hvd.Sum if rank else hvd.Max, name="rs.badop"))
        assert "reduce op" in str(e), str(e)
    expect_raises(ValueError, lambda: hvd.reducescatter(torch.tensor(1.0)))
    expect_raises(NotImplementedError, lambda: hvd.reducescatter(torch.ones(2), op=hvd.Adasum))


@check
def grouped_reducescatter():
    size, rank = hvd.size(), hvd.rank()

    def piece(rows):  # Horovod's split of `rows` rows: [first, first + mine)
        mine = rows // size + (1 if rank < rows % size else 0)
        return rows // size * rank + min(rank, rows % size), mine

    # Tensors of different shapes and dtypes in one group (an empty piece and nothing too).
    shapes = [[2 * size + 1, 3], [size - 1], [0, 2], [3 * size, 2, 2]]
    dtypes = [torch.float32, torch.int64, torch.float16, torch.float64]
    reductions = ((hvd.Sum, lambda xs: sum(xs)),
                  (hvd.Max, lambda xs: torch.stack(xs).max(0).values))
    for op, reduce in reductions:
        everyone = [[small_ints(shape, dtype, seed=31 * r + i)
                     for i, (shape, dtype) in enumerate(zip(shapes, dtypes))] for r in range(size)]
        outs = hvd.grouped_reducescatter(everyone[rank], op=op, name="grs.%d" % op)
        assert len(outs) == len(shapes)
        for i, (shape, dtype) in enumerate(zip(shapes, dtypes)):
            first, mine = piece(shape[0])
            want = reduce([everyone[r][i].double() for r in range(size)])[first:first + mine]
            assert outs[i].dtype == dtype and list(outs[i].shape) == [mine] + shape[1:], \
                (i, outs[i].shape, dtype)
            assert torch.equal(outs[i].double(), want), (op, i, outs[i], want)
    # Asynchronous and scaled: Average of ranks' values, pre- and postscaled.
    handle = hvd.grouped_reducescatter_async(
        [torch.full([size, 2], float(rank)), torch.full([2 * size], float(2 * rank))],
        name="grs.async", prescale_factor=2.0, postscale_factor=0.5)
    mean = sum(range(size)) / size
    a, b = hvd.synchronize(handle)
    assert torch.allclose(a, torch.full([1, 2], mean)), a
    assert torch.allclose(b, torch.full([2], 2 * mean)), b
    # Autograd: each tensor's gradient is the allgather of its piece's gradient (/ size: Average).
    xs = [torch.ones([2 * size + 1, 2], requires_grad=True),
          torch.ones([size], requires_grad=True)]
    ys = hvd.grouped_reducescatter(xs, op=hvd.Average)
    (sum((y * float(rank + 1)).sum() for y in ys)).backward()
    for x in xs:
        rows = x.shape[0]
        owner = [p for p in range(size)
                 for _ in range(rows // size + (1 if p < rows % size else 0))]
        want = torch.tensor([float(p + 1) / size for p in owner])
        want = want.view(rows, *([1] * (x.dim() - 1)))
        assert torch.allclose(x.grad, want.expand_as(x)), (x.grad, want)
    # Errors: a shape that differs on one rank fails the group on every rank; an empty list.
    if size > 1:
        e = expect_raises(RuntimeError, lambda: hvd.grouped_reducescatter(
            [torch.ones([size, 2]), torch.ones([size + rank, 2])], op=hvd.Sum, name="grs.bad"))
        assert "grs.bad" in str(e), str(e)
    expect_raises(ValueError, lambda: hvd.grouped_reducescatter([]))


# ---- broadcast ----

@check
def broadcast():
    size, rank = hvd.size(), hvd.rank()
    for root in range(size):
        for dtype in DTYPES + [torch.uint8, torch.bool]:
            t = torch.full([3, 2], rank, dtype=dtype)
            out = hvd.broadcast(t, root, name="bc.%d.%s" % (root, dtype))
            assert torch.equal(out, torch.full_like(t, root)), (root, dtype)
            assert torch.equal(t, torch.full_like(t, rank))  # out of place
            hvd.broadcast_(t, root, name="bc_.%d.%s" % (root, dtype))
            assert torch.equal(t, torch.full_like(t, root))
    t = torch.full([4], float(rank))
    h = hvd.broadcast_async(t, size - 1, name="bca")
    assert torch.equal(hvd.synchronize(h), torch.full([4], float(size - 1)))
    h = hvd.broadcast_async_(t, 0, name="bca_")
    assert hvd.synchronize(h) is t and torch.equal(t, torch.zeros(4))
    # Autograd: averaged gradient on the root, zero elsewhere.
    x = torch.ones(3, requires_grad=True)
    y = hvd.broadcast(x, 0)
    y.backward(torch.ones(3))
    assert torch.equal(x.grad, torch.ones(3) if rank == 0 else torch.zeros(3))
    expect_raises(ValueError, lambda: hvd.broadcast(t, -1))


# ---- sparse ----

def random_sparse(shape, nnz, seed, dtype=torch.float32, sparse_dim=1, coalesce=False):
    g = torch.Generator().manual_seed(seed)
    idx = torch.stack([torch.randint(0, shape[d], (nnz,), generator=g)
                       for d in range(sparse_dim)])
    values = torch.randint(-4, 5, (nnz,) + tuple(shape[sparse_dim:]), generator=g).to(dtype)
    t = torch.sparse_coo_tensor(idx, values, shape)
    return t.coalesce() if coalesce else t


@check
def sparse_allreduce_matches_dense():
    size, rank = hvd.size(), hvd.rank()
    cases = [((40, 3), 1), ((30, 2, 2), 1), ((12, 9), 2), ((25,), 1)]
    n = 0
    for shape, sparse_dim in cases:
        for dtype in DTYPES:
            for coalesce in (False, True):
                for op in (hvd.Sum, hvd.Average):
                    n += 1
                    # Overlapping rows across ranks, repeated rows within a rank.
                    mine = random_sparse(shape, 15 + rank, 100 * n + rank, dtype, sparse_dim,
                                         coalesce)
                    everyone = [random_sparse(shape, 15 + r, 100 * n + r, dtype, sparse_dim,
                                              coalesce) for r in range(size)]
                    dense_sum = sum(e.to_dense().double() for e in everyone)
                    want = dense_sum if op == hvd.Sum else dense_sum / size
                    out = hvd.sparse_allreduce(mine, name="sp.%d" % n, op=op)
                    assert out.is_sparse and out.is_coalesced() and out.shape == mine.shape
                    assert out.sparse_dim() == sparse_dim and out.dtype == dtype
                    tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6
                    got = out.to_dense().double()
                    if dtype.is_floating_point:
                        assert torch.allclose(got, want, rtol=tol, atol=tol), (shape, dtype, op)
                    else:
                        assert torch.equal(got, want.trunc() if op == hvd.Average else want)
                    # The result holds only rows some rank had.
                    assert out._nnz() <= sum(e.coalesce()._nnz() for e in everyone)
                    dense = hvd.sparse_allreduce(mine, name="spd.%d" % n, op=op, dense=True)
                    assert not dense.is_sparse and torch.equal(dense, out.to_dense())
    # A rank with no rows, asynchronous, through allreduce.
    empty = torch.sparse_coo_tensor(torch.empty((1, 0), dtype=torch.int64),
                                    torch.empty((0, 4)), (20, 4))
    t = random_sparse((20, 4), 6, 7) if rank == 0 else empty
    h = hvd.sparse_allreduce_async(t, name="sp.empty", op=hvd.Sum)
    out = hvd.synchronize(h)
    assert torch.equal(out.to_dense(), random_sparse((20, 4), 6, 7).to_dense())
    out = hvd.allreduce(random_sparse((20, 4), 6, 7), op=hvd.Sum, name="sp.allreduce")
    assert out.is_sparse and torch.equal(out.to_dense(), random_sparse((20, 4), 6, 7)
                                         .to_dense() * size)
    # Horovod's test_async_sparse_allreduce: 35 tensors in flight at once, Average.
    inputs = [random_sparse((10 + i, 5), 8, 1000 + 97 * i + rank) for i in range(35)]
    handles = [hvd.sparse_allreduce_async(t, name="spa.%d" % i, op=hvd.Average)
               for i, t in enumerate(inputs)]
    for i, (t, h) in enumerate(zip(inputs, handles)):
        want = hvd.allreduce(t.to_dense(), name="spa_dense.%d" % i)
        assert torch.allclose(hvd.synchronize(h).to_dense(), want, atol=1e-6)
    expect_raises(ValueError, lambda: hvd.sparse_allreduce_async(torch.zeros(3)))
    expect_raises(ValueError, lambda: hvd.sparse_allreduce_async(empty, op=hvd.Max),
                  "sparse allreduce reduces with sum or average, not max")
    expect_raises(NotImplementedError,
                  lambda: hvd.sparse_allreduce_async(empty, op=hvd.Adasum))
    # Zen's scheme served them (any of them: auto picks).
    schemes = hvd.stats()["buckets_by_scheme"]
    assert any(k in schemes for k in ("zen", "hc", "agsparse", "blocks", "dense")), schemes


# ---- errors ----

@check
def errors_reach_every_rank():
    size, rank = hvd.size(), hvd.rank()
    if size == 1:
        return
    # Shapes.
    t = torch.ones([2 + rank, 3])
    e = expect_raises(RuntimeError, lambda: hvd.allreduce(t, name="bad.shape"))
    assert isinstance(e, hvd.HorovodInternalError) and "bad.shape" in str(e), str(e)
    # Dtypes.
    t = torch.ones(4, dtype=torch.int32 if rank % 2 == 0 else torch.float32)
    e = expect_raises(RuntimeError, lambda: hvd.allreduce(t, name="bad.dtype"))
    assert "bad.dtype" in str(e)
    # Allgather: a dimension other than the first.
    t = torch.ones([2, 3 + rank])
    expect_raises(RuntimeError, lambda: hvd.allgather(t, name="bad.gather"))
    # Broadcast: root ranks disagree.
    expect_raises(RuntimeError, lambda: hvd.broadcast(torch.ones(2), rank, name="bad.root"))
    # Sparse: dense shapes disagree.
    sp = random_sparse((10 + rank, 2), 3, 5)
    expect_raises(RuntimeError, lambda: hvd.sparse_allreduce(sp, name="bad.sparse"))
    # Sparse on one rank, dense on the others, under the same name (what DistributedOptimizer
    # posts for a parameter whose gradient some rank does not have).
    if rank == 0:
        h = hvd.mpi_ops._sparse_allreduce_async(random_sparse((10, 2), 3, 5), "allreduce.kind",
                                                hvd.Average)
    else:
        h = hvd.allreduce_async(torch.ones(10, 2), name="kind")
    expect_raises(RuntimeError, lambda: hvd.synchronize(h))
    # A name in flight: ValueError at once, on this rank only; the first still completes.
    # "dup.<rank>" is posted by this rank alone first; the others post it only after
    # "dup.tried", which completes once every rank has tried its second post, so it cannot
    # complete before that post (a rank running ahead could otherwise post it in between).
    # Then every rank posts the others' names and all complete.
    t = torch.ones(3)
    h = hvd.allreduce_async(t, name="dup.%d" % rank)
    expect_raises(ValueError, lambda: hvd.allreduce_async(t, name="dup.%d" % rank),
                  "already in flight")
    hvd.allreduce(torch.ones(1), name="dup.tried")
    others = [hvd.allreduce_async(t, name="dup.%d" % p) for p in range(size) if p != rank]
    assert torch.equal(hvd.synchronize(h), t)
    for other in others:
        assert torch.equal(hvd.synchronize(other), t)
    # The daemon is still fine.
    assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after"),
                       torch.full([2], float(size)))


# ---- join, barrier ----

@check
def join_and_barrier():
    size, rank = hvd.size(), hvd.rank()
    hvd.barrier()
    for first in range(size):
        t = torch.ones(4) * 2
        sp = random_sparse((16, 2), 4, 50 + rank)
        if rank == first:
            last = hvd.join()
        else:
            # The joined rank contributes zeros (dense) and no rows (sparse).
            avg = hvd.allreduce(t, name="join.dense")
            assert torch.allclose(avg, t * (size - 1) / size), avg
            out = hvd.sparse_allreduce(sp, name="join.sparse", op=hvd.Sum)
            want = sum(random_sparse((16, 2), 4, 50 + r).to_dense()
                       for r in range(size) if r != first)
            assert torch.equal(out.to_dense(), want)
            last = hvd.join()
        lasts = hvd.allgather(torch.tensor([last]))
        assert len(set(lasts.tolist())) == 1, lasts
        assert size == 1 or last != first
    hvd.barrier()


# ---- timeline, stats ----

@check
def timeline_and_stats():
    rank = hvd.rank()
    tmp = os.environ.get("ZENTEST_TMP", tempfile.gettempdir())
    for i in range(5):
        path = os.path.join(tmp, "timeline%d.json" % (i % 2))
        hvd.start_timeline(path, mark_cycles=(i % 2 == 1))
        hvd.allreduce(torch.ones(3), name="test_allreduce")
        hvd.sparse_allreduce(random_sparse((8, 2), 3, rank), name="test_sparse")
        hvd.stop_timeline()
        with open(path.replace(".json", ".rank%d.json" % rank)) as f:
            trace = json.load(f)
        text = json.dumps(trace)
        for needle in ("allreduce.test_allreduce", "sparse_allreduce.test_sparse",
                       "NEGOTIATE", "ALLREDUCE", "SPARSE_ALLREDUCE"):
            assert needle in text, needle
        if i % 2 == 1:
            assert "CYCLE_START" in text
    stats = hvd.stats()
    for key in ("cycles", "bytes_sent", "bytes_received", "phase_seconds",
                "buckets_by_scheme", "tensors"):
        assert key in stats, key
    assert stats["tensors"]["allreduce.test_allreduce"]["completed"] == 5
    assert hvd.size() == 1 or stats["bytes_sent"] > 0


# ---- state broadcast, objects ----

class Net(torch.nn.Module):
    def __init__(self, vocab=30, dim=4, sparse=True):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim, sparse=sparse)
        self.fc = torch.nn.Linear(dim, 3)

    def forward(self, ids):
        return self.fc(self.emb(ids).mean(dim=1))


def gathered_equal(tensor):
    """Whether tensor is the same on every rank."""
    g = hvd.allgather(tensor.detach().reshape(1, -1).double())
    return all(torch.equal(g[0], g[r]) for r in range(g.shape[0]))


@check
def broadcast_parameters_and_optimizer_state():
    rank = hvd.rank()
    for params_of in (lambda m: m.state_dict(), lambda m: m.named_parameters(),
                      lambda m: list(m.parameters())):
        torch.manual_seed(rank)
        model = Net()
        hvd.broadcast_parameters(params_of(model), root_rank=0)
        assert all(gathered_equal(p) for p in model.parameters())
    # SGD without momentum: torch 1.13 keeps momentum_buffer None in its state.
    opts = [lambda ps: torch.optim.SGD(ps, lr=0.1 * (rank + 1), momentum=0.9),
            lambda ps: torch.optim.SGD(ps, lr=0.1 * (rank + 1)),
            lambda ps: torch.optim.Adam(ps, lr=0.01 * (rank + 1)),
            lambda ps: torch.optim.Adagrad(ps, lr=0.01 * (rank + 1)),
            lambda ps: torch.optim.RMSprop(ps, lr=0.01 * (rank + 1))]
    for make in opts:
        torch.manual_seed(rank)
        model = Net(sparse=False)
        opt = make(model.parameters())
        # Local steps make the states differ.
        for _ in range(rank + 1):
            opt.zero_grad()
            model(torch.randint(0, 30, (4, 5))).sum().backward()
            opt.step()
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        lr = torch.tensor([opt.param_groups[0]["lr"]])
        assert gathered_equal(lr), type(opt)
        for state in opt.state.values():
            for value in state.values():
                if torch.is_tensor(value):
                    assert gathered_equal(value), type(opt)
                elif value is not None:
                    assert gathered_equal(torch.tensor([float(value)]))
    # A fresh optimizer (no state yet), wrapped, with a sparse embedding.
    torch.manual_seed(rank)
    model = Net(sparse=True)
    opt = hvd.DistributedOptimizer(torch.optim.SparseAdam(list(model.emb.parameters()),
                                                          lr=0.01 * (rank + 1)),
                                   named_parameters=model.emb.named_parameters())
    hvd.broadcast_optimizer_state(opt, root_rank=0, model=model)
    assert gathered_equal(torch.tensor([opt.param_groups[0]["lr"]]))


@check
def objects():
    rank, size = hvd.rank(), hvd.size()
    obj = {"rank": rank, "payload": list(range(rank * 3))} if rank == 0 else None
    got = hvd.broadcast_object(obj, root_rank=0)
    assert got == {"rank": 0, "payload": []}
    got = hvd.broadcast_object({"from": rank, "s": "x" * (rank + 5)}, root_rank=size - 1,
                               name="obj2")
    assert got == {"from": size - 1, "s": "x" * (size + 4)}
    gathered = hvd.allgather_object(("r", rank, [rank] * rank))
    assert gathered == [("r", r, [r] * r) for r in range(size)]


# ---- DistributedOptimizer ----

def batch(seed, n=4, length=5, vocab=30):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (n, length), generator=g), torch.randint(0, 3, (n,),
                                                                            generator=g)


@check
def optimizer_names_and_errors():
    model = Net()
    named = list(model.named_parameters())
    expect_raises(ValueError, lambda: hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1),
        named_parameters=[("same", p) for _, p in named]), "unique")
    expect_raises(ValueError, lambda: hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=named[:1]),
        "not named")
    expect_raises(ValueError, lambda: hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=[p for _, p in named]),
        "tuples")
    expect_raises(ValueError, lambda: hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Sum,
        gradient_predivide_factor=2.0))
    # No names: generated ones, the same on every rank; the step works.
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    ids, labels = batch(hvd.rank())
    torch.nn.functional.cross_entropy(model(ids), labels).backward()
    opt.step()
    # zero_grad between backward and step is refused.
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(ids), labels).backward()
    if hvd.size() > 1:
        expect_raises(AssertionError, opt.zero_grad)
    opt.step()


def fresh(seed=0, extra=False, **kwargs):
    """A model initialized alike on every rank and its DistributedOptimizer (SGD)."""
    torch.manual_seed(seed)
    model = Net()
    params = list(model.named_parameters())
    if extra:
        model.extra = torch.nn.Linear(3, 3)
        params += [("extra." + k, v) for k, v in model.extra.named_parameters()]
    opt = hvd.DistributedOptimizer(torch.optim.SGD([p for _, p in params], lr=0.1),
                                   named_parameters=params, **kwargs)
    return model, opt


def loss_of(model, seed, use_extra=False):
    ids, labels = batch(seed)
    out = model(ids)
    if use_extra:
        out = model.extra(out)
    return torch.nn.functional.cross_entropy(out, labels)


@check
def optimizer_features():
    size, rank = hvd.size(), hvd.rank()
    # Gradient clipping: synchronize, clip, step without synchronizing again.
    model, opt = fresh()
    opt.zero_grad()
    loss_of(model, rank).backward()
    opt.synchronize()
    torch.nn.utils.clip_grad_norm_(model.fc.parameters(), 0.5)
    assert gathered_equal(model.fc.weight.grad)
    with opt.skip_synchronize():
        opt.step()
    assert all(gathered_equal(p) for p in model.parameters())
    # step() after synchronize() without skip_synchronize warns.
    opt.zero_grad()
    loss_of(model, rank).backward()
    opt.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.step()
    assert size == 1 or any("skip_synchronize" in str(w.message) for w in caught)
    # A layer only rank 0 uses: the others post zeros, nobody hangs.
    model, opt = fresh(extra=True)
    for step in range(2):
        opt.zero_grad()
        loss_of(model, rank + step, use_extra=(rank == 0)).backward()
        opt.step()
    assert all(gathered_equal(p) for p in model.parameters())
    # Dynamic requires_grad.
    model, opt = fresh()
    model.fc.weight.requires_grad_(False)
    opt.zero_grad()
    loss_of(model, rank).backward()
    opt.step()
    model.fc.weight.requires_grad_(True)
    opt.zero_grad()
    loss_of(model, rank).backward()
    opt.step()
    assert all(gathered_equal(p) for p in model.parameters())
    # fp16 compression, op=Sum, predivide factor, backward_passes_per_step=2.
    for kwargs in ({"compression": hvd.Compression.fp16}, {"op": hvd.Sum},
                   {"gradient_predivide_factor": 2.0}, {"backward_passes_per_step": 2},
                   {"sparse_as_dense": True}, {"num_groups": 2}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m, o = fresh(seed=1, **kwargs)
        for step in range(2):
            o.zero_grad()
            for k in range(kwargs.get("backward_passes_per_step", 1)):
                loss_of(m, rank * 10 + step * 2 + k).backward()
            o.step()
        assert all(gathered_equal(p) for p in m.parameters()), kwargs
    # Sparse embeddings with different lookups per rank (Horovod's test_sparse_embeddings).
    for sparse_as_dense in (False, True):
        torch.manual_seed(2)
        m = Net(vocab=10)
        o = hvd.DistributedOptimizer(torch.optim.SparseAdam(list(m.emb.parameters()), lr=0.1),
                                     named_parameters=m.emb.named_parameters(),
                                     sparse_as_dense=sparse_as_dense)
        for step in range(3):
            o.zero_grad()
            ids = torch.randint(0, 10, (rank + 1, rank + 2))
            m(ids).sum().backward()
            o.step()
        assert gathered_equal(m.emb.weight)


@check
def reinit():
    """Last: shutdown, then init again (TCP); under MPI a second init is refused."""
    rank, size = hvd.rank(), hvd.size()
    mpi = hvd.mpi_enabled()
    hvd.shutdown()
    assert not hvd.is_initialized()
    expect_raises(ValueError, hvd.rank, "not been initialized")
    expect_raises(ValueError, lambda: hvd.allreduce(torch.ones(1)), "not initialized")
    if mpi:
        expect_raises(RuntimeError, hvd.init, "MPI cannot be initialized a second time")
        return
    hvd.init()
    assert hvd.rank() == rank and hvd.size() == size
    assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum, name="again"),
                       torch.full([2], float(size)))


if __name__ == "__main__":
    sys.exit(run_checks(hvd, CHECKS, sys.argv[1:]))
