"""zen.torch on CUDA tensors with one rank (tools/gpu-check; needs a torch with CUDA and a
libzen built with CUDA and NCCL). Every result is compared with the same operation on host
copies through the same daemon. Inputs are random, fresh every run (the seed is printed).
Every section runs even after an earlier one failed; the last line names the failed ones.
Where torch is missing or has no CUDA it says so and exits 77, which tools/gpu-check reports
as "not run": never 0, which would read as passed.
"""
import random
import sys
import traceback

NOT_RUN = 77

try:
    import torch
except ImportError as e:
    print("zen.torch on CUDA tensors: NOT RUN (no torch: %s)" % e)
    sys.exit(NOT_RUN)


def main():
    if not torch.cuda.is_available():
        print("zen.torch on CUDA tensors: NOT RUN (this torch has no CUDA)")
        return NOT_RUN
    import zen.torch as hvd
    hvd.init()
    assert hvd.cuda_built(), "libzen was built without CUDA/NCCL"
    seed = random.randrange(1 << 30)
    print("torch_cuda_check seed %d" % seed)
    gen = torch.Generator().manual_seed(seed)
    dev = torch.device("cuda", 0)

    def ints(*shape):
        return torch.randint(-8, 9, shape, generator=gen).float()

    # Allreduce: a new tensor, in place, and a fused group; the result stays on the device.
    def allreduce():
        x = ints(1000, 3)
        y = hvd.allreduce(x.to(dev), op=hvd.Sum, name="x")
        assert y.is_cuda and torch.equal(y.cpu(), hvd.allreduce(x, op=hvd.Sum, name="x.host"))
        z = x.to(dev)
        hvd.allreduce_(z, op=hvd.Average, name="z")
        assert torch.equal(z.cpu(), x)
        group = [ints(17).to(dev), ints(4, 5).to(dev), ints(0).to(dev)]
        out = hvd.grouped_allreduce(group, op=hvd.Sum, name="g")
        for a, b in zip(out, group):
            assert a.is_cuda and torch.equal(a, b)

    # Work queued on the current stream before the post is waited for (its ready event): on
    # torch's default stream (cuda_stream 0, the legacy stream) and on a side stream, each kept
    # busy ~50 ms first (torch.cuda._sleep), so that a daemon not waiting reads zeros.
    def ready_events():
        for side in (None, torch.cuda.Stream(dev)):
            where = "side stream" if side is not None else "default stream"
            with torch.cuda.stream(side):  # None: stays on the default stream
                w = torch.zeros(1 << 20, device=dev)
                torch.cuda._sleep(100_000_000)
                w.add_(3.0)
                got = hvd.allreduce(w, op=hvd.Sum, name="w." + where)
            assert torch.equal(got.cpu(), torch.full([1 << 20], 3.0)), where

    # Sparse: dense and sparse results against the host path.
    def sparse():
        rows = torch.randperm(500, generator=gen)[:60]
        vals = ints(60, 4)
        sp = torch.sparse_coo_tensor(rows.view(1, -1), vals, (500, 4))
        host = hvd.sparse_allreduce(sp, name="s.host", op=hvd.Sum).to_dense()
        dense = hvd.sparse_allreduce(sp.to(dev), name="s.dense", op=hvd.Sum, dense=True)
        assert dense.is_cuda and torch.equal(dense.cpu(), host)
        sparse = hvd.sparse_allreduce(sp.to(dev), name="s.sparse", op=hvd.Sum)
        assert sparse.is_cuda and torch.equal(sparse.to_dense().cpu(), host)

    # Sparse results that stay on the device (no host copy), posted together so they fuse,
    # some with dense=True (a mixed bucket): repeated indices, fp16, two sparse dimensions,
    # no entries; each equal to the host path's coalesced result, indices and values.
    def fused_sparse():
        def uncoalesced(shape, nnz, dtype=torch.float32):
            idx = torch.stack([torch.randint(0, d, (nnz,), generator=gen) for d in shape[:2]])
            return torch.sparse_coo_tensor(idx[:1] if len(shape) == 2 else idx,
                                           ints(nnz, *shape[-1:]).to(dtype), shape)
        cases = [(uncoalesced((700, 3), 90), False),
                 (uncoalesced((300, 2), 50, torch.float16), False),
                 (uncoalesced((40, 30, 4), 80), False), (uncoalesced((50, 4), 0), False),
                 (uncoalesced((200, 3), 40), True), (uncoalesced((900, 1), 100), False)]
        handles = [hvd.sparse_allreduce_async(t.to(dev), name="f.%d" % i, op=hvd.Sum, dense=d)
                   for i, (t, d) in enumerate(cases)]
        for i, ((t, d), h) in enumerate(zip(cases, handles)):
            got = hvd.synchronize(h)
            want = hvd.sparse_allreduce(t, name="f.host.%d" % i, op=hvd.Sum)
            assert got.is_cuda and got.device == dev and got.dtype == t.dtype, (i, got.device)
            if d:
                assert not got.is_sparse and torch.equal(got.cpu(), want.to_dense()), i
                continue
            assert got.is_sparse and got.is_coalesced(), i
            assert got._indices().is_cuda and got._values().is_cuda, i
            assert torch.equal(got._indices().cpu(), want._indices()), i
            assert torch.equal(got._values().cpu(), want._values()), i

    # Broadcast in place; allgather on the device (NCCL allgatherv), grouped, against the host
    # path, a bfloat16 and an empty one included.
    def broadcast_allgather():
        b = ints(33).to(dev)
        assert torch.equal(hvd.broadcast(b, 0, name="b"), b)
        a = ints(3, 2)
        gathered = hvd.allgather(a.to(dev), name="ag")
        assert gathered.is_cuda and torch.equal(gathered.cpu(),
                                                hvd.allgather(a, name="ag.host"))
        parts = [ints(7, 5), ints(0, 2), ints(1000).to(torch.bfloat16)]
        outs = hvd.grouped_allgather([p.to(dev) for p in parts], name="gag")
        for o, p in zip(outs, parts):
            assert o.is_cuda and o.dtype == p.dtype and torch.equal(o.cpu(), p)

    # Alltoall on the device (NCCL grouped send/recv) with splits, an equal split in float16
    # and an empty one; the output stays on the device, the received splits match the host's.
    def alltoall():
        t = ints(6, 3)
        out, received = hvd.alltoall(t.to(dev), splits=[6], name="a2a")
        host_out, host_received = hvd.alltoall(t, splits=[6], name="a2a.host")
        assert out.is_cuda and torch.equal(out.cpu(), host_out)
        assert torch.equal(received, host_received)
        half = hvd.alltoall(t.half().to(dev), name="a2a.half")
        assert half.is_cuda and half.dtype == torch.float16
        assert torch.equal(half.cpu(), hvd.alltoall(t.half(), name="a2a.half.host"))
        empty, received = hvd.alltoall(ints(0, 4).to(dev), splits=[0], name="a2a.empty")
        assert empty.is_cuda and tuple(empty.shape) == (0, 4) and received.tolist() == [0]

    # Reducescatter on the device (NCCL reduce-scatter), every op, against the host path; three
    # posted before any is waited for (a fused bucket), float16 and an empty one included.
    def reducescatter():
        for op in (hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product):
            parts = [ints(7, 2), ints(5), ints(0, 3), ints(9, 4).half()]
            handles = [hvd.reducescatter_async(p.to(dev), op=op, name="rs.%d.%d" % (op, i))
                       for i, p in enumerate(parts)]
            for i, (p, h) in enumerate(zip(parts, handles)):
                got = hvd.synchronize(h)
                want = hvd.reducescatter(p, op=op, name="rs.%d.%d.host" % (op, i))
                assert got.is_cuda and got.dtype == p.dtype, (op, i, got.device, got.dtype)
                assert torch.equal(got.cpu(), want), (op, i)

    # Adasum and a process set's collectives staged through host memory (no NCCL form in
    # Zen): results back on the device, equal to the host path's.
    def staged():
        x = ints(50, 3)
        got = hvd.allreduce(x.to(dev), op=hvd.Adasum, name="ada")
        assert got.is_cuda and torch.equal(got.cpu(), hvd.allreduce(x, op=hvd.Adasum,
                                                                    name="ada.host"))
        solo = hvd.add_process_set([0])
        got = hvd.allreduce(x.to(dev), op=hvd.Sum, name="ps.sum", process_set=solo)
        assert got.is_cuda and torch.equal(got.cpu(), x)
        gathered = hvd.allgather(x.to(dev), name="ps.ag", process_set=solo)
        assert gathered.is_cuda and torch.equal(gathered.cpu(), x)
        rows = torch.randperm(300, generator=gen)[:40]
        sp = torch.sparse_coo_tensor(rows.view(1, -1), ints(40, 2), (300, 2))
        summed = hvd.sparse_allreduce(sp.to(dev), name="ps.sp", op=hvd.Sum, process_set=solo)
        assert summed.is_cuda and torch.equal(summed.to_dense().cpu(), sp.to_dense())
        hvd.remove_process_set(solo)
        buckets = hvd.stats()["buckets_by_scheme"]
        assert any(k.startswith("host-staged ") for k in buckets), buckets

    # Compression.topk on a CUDA gradient large enough for the sampled selection: the same
    # magnitudes as torch.topk of all on the device, and the synchronized result equal to the
    # host path's (another compressor, the same gradient).
    def topk():
        n, ratio = 1 << 20, 0.01
        g = torch.randn(n, generator=gen)
        on_device, on_host = hvd.Compression.topk(ratio), hvd.Compression.topk(ratio)
        magnitudes = g.to(dev).abs()
        chosen = on_device._largest(magnitudes, round(n * ratio))
        assert chosen.is_cuda and chosen.numel() == round(n * ratio)
        want = torch.topk(magnitudes, round(n * ratio)).values
        assert torch.equal(magnitudes[chosen].sort(descending=True).values, want)
        results = []
        for compressor, x in ((on_device, g.to(dev)), (on_host, g)):
            sent, ctx = compressor.compress(x, "w")
            out = hvd.sparse_allreduce(sent, name="topk." + x.device.type, op=hvd.Sum,
                                       dense=True)
            results.append(compressor.decompress(out, ctx).cpu())
        assert torch.equal(results[0], results[1])

    # Every section runs even after one fails, so that one device run shows every failure.
    failed = []
    for check in (allreduce, ready_events, sparse, fused_sparse, broadcast_allgather, alltoall,
                  reducescatter, staged, topk):
        try:
            check()
        except Exception:  # noqa: BLE001 -- reported, then the next section runs
            failed.append(check.__name__)
            print("zen.torch on CUDA tensors: %s FAILED" % check.__name__)
            traceback.print_exc()
    hvd.shutdown()
    if failed:
        print("zen.torch on CUDA tensors: FAILED: %s (seed %d)" % (", ".join(failed), seed))
        return 1
    print("zen.torch on CUDA tensors: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
