"""zen.torch's collectives: horovod.torch.mpi_ops' API over Zen's daemon.

Every *_async function posts a request to the daemon (no copy of the tensor: the daemon
reads and writes its memory) and returns an integer handle; `synchronize(handle)` waits and
returns the result, `poll(handle)` says whether it is ready. The tensors stay referenced
here until synchronize. Names default to "<op>.noname.<n>", n counting this process's
unnamed operations, which matches across ranks only when every rank issues them in the same
order (as in Horovod).
"""

import itertools

import torch

from zen.common import basics as _basics
from zen.common import process_sets as _process_sets
# Process sets (Horovod's), shared with zen.tensorflow.
from zen.common.process_sets import (ProcessSet, add_process_set,  # noqa: F401
                                     global_process_set, remove_process_set)
# Reduce operations, numbered as Horovod's (horovod.common.basics), shared with zen.tensorflow.
from zen.common.basics import Adasum, Average, Max, Min, Product, Sum  # noqa: F401
# Build and launch facts (horovod.common.basics), shared with zen.tensorflow.
from zen.common.basics import (ccl_built, cuda_built, ddl_built, gloo_built,  # noqa: F401
                               gloo_enabled, is_homogeneous, mpi_built, mpi_enabled,
                               mpi_threads_supported, nccl_built, rocm_built, sycl_built)
# Raised by synchronize() when an operation failed: one class for both bindings, which elastic
# training (zen.common.elastic) catches.
from zen.common.exceptions import HorovodInternalError

# libzen.so first, with global symbols: an MPI loaded by libzen must be visible to its own
# plugins (as horovod.common.util does for its extension).
_basics.lib()
try:
    from zen.torch import _zen_torch as _C  # noqa: E402
except ImportError as e:  # pragma: no cover - a build problem
    raise ImportError("zen.torch: the C++ extension is not built (%s); run tools/build-python "
                      "or `pip install .`" % e) from e

_OPS = _basics.C_OPS  # Horovod's op numbers -> the C API's zen_reduce_op_t


ZenInternalError = HorovodInternalError


def _ps(process_set, what):
    """The id of the process set a collective `what` runs over (zen.common.process_sets);
    ValueError for a set not added, or on a rank that is not a member."""
    return _process_sets.process_set_id(process_set, what)


# ---- basics ----

def init(comm=None, process_sets=None):
    """Starts this rank's daemon from the environment (zenrun: TCP; mpirun: MPI; otherwise a
    job of one). Idempotent; registers a shutdown at exit (zen.common.basics.init).
    process_sets: ProcessSet objects or rank lists, added in order on every rank (each
    ProcessSet gets its process_set_id), as Horovod's."""
    _process_sets.init_job("zen.torch.init", comm, process_sets)


def shutdown():
    """Stops the daemon on every rank (a rank still waiting on an operation gets an error).
    Added process sets are invalidated."""
    global _noname_ids
    _C.shutdown()
    _process_sets.invalidate_all()
    # The next runtime's unnamed operations count from 0 on every rank, a worker that joins
    # an elastic job included, so that their names match again.
    _noname_ids = itertools.count()


def is_initialized():
    return _C.is_initialized()


def rank():
    return _C.rank()


def size():
    return _C.size()


def local_rank():
    return _C.local_rank()


def local_size():
    return _C.local_size()


def cross_rank():
    return _C.cross_rank()


def cross_size():
    return _C.cross_size()


def start_timeline(file_path, mark_cycles=False):
    """Writes a Chrome trace per rank (".rank<N>" inserted into file_path) until
    stop_timeline()."""
    _C.start_timeline(str(file_path), bool(mark_cycles))


def stop_timeline():
    _C.stop_timeline()


def stats():
    """This rank's daemon counters (zen_stats_json): cycles, bytes sent and received, seconds
    per phase, buckets per scheme, and per tensor the same."""
    import json
    return json.loads(_C.stats_json())


# ---- handles ----

_handle_map = {}
_handle_ids = itertools.count(1)
_noname_ids = itertools.count()


class _Pending:
    """One user-visible handle: the daemon's handles, the tensors they use, and how to turn
    the finished operation into the caller's result."""

    __slots__ = ("c_handles", "keep", "finish")

    def __init__(self, c_handles, keep, finish):
        self.c_handles = c_handles
        self.keep = keep
        self.finish = finish


def _register(c_handles, keep, finish):
    handle = next(_handle_ids)
    _handle_map[handle] = _Pending(c_handles, keep, finish)
    return handle


def _release(c_handle):
    try:
        _C.release(c_handle)
    except ValueError:
        pass


def poll(handle):
    """True when the operation behind handle has completed (synchronize will not block)."""
    entry = _handle_map.get(handle)
    if entry is None:
        raise ValueError("poll: unknown handle %r (already synchronized?)" % handle)
    return all(_C.poll(c) for c in entry.c_handles)


def _post(enqueue, *args, **kwargs):
    """Posts an operation through enqueue (_C.*_async). The extension's RuntimeError means the
    daemon stopped (a failed peer, a shutdown by another rank): it is HorovodInternalError, as
    horovod.torch raises it, so elastic training recovers from a failure seen when posting as
    from one seen in synchronize. Bad arguments stay ValueError."""
    try:
        return enqueue(*args, **kwargs)
    except RuntimeError as e:
        raise HorovodInternalError(str(e)) from e


def synchronize(handle):
    """Waits for the operation and returns its result; raises HorovodInternalError (a
    RuntimeError) with the daemon's message when it failed on any rank."""
    entry = _handle_map.get(handle)
    if entry is None:
        return None
    # Every part ends (either way) before its tensors are dropped: the daemon may be writing.
    error = None
    for c in entry.c_handles:
        try:
            _C.wait(c)
        except RuntimeError as e:
            error = error or e
    _handle_map.pop(handle, None)
    if error is not None:
        for c in entry.c_handles:
            _release(c)
        raise HorovodInternalError(str(error)) from error
    return entry.finish()


def _op_code(op, average, what="allreduce"):
    return _basics.check_op(op, average, what, warn_average=True)


def _name(kind, name):
    if name:
        return "%s.%s" % (kind, name)
    return "%s.noname.%d" % (kind, next(_noname_ids))


# The dtypes the daemon reduces natively; small integers and bools travel as int32.
_NATIVE = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32,
           torch.int64)
_WIDENED = (torch.uint8, torch.int8, torch.int16, torch.bool)


def _wire_dtype(tensor):
    if tensor.dtype in _NATIVE:
        return tensor.dtype
    if tensor.dtype in _WIDENED:
        return torch.int32
    raise ValueError("Tensor type %s is not supported." % tensor.type())


def _check_device(tensor):
    if tensor.device.type not in ("cpu", "cuda"):
        raise ValueError("zen.torch: the tensor is on %s; zen synchronizes CPU and CUDA tensors"
                         % tensor.device)


def _stream(tensor):
    """The framework stream a CUDA tensor is produced on, as an integer (0 for host tensors):
    the daemon's own stream waits for the work queued there so far, no host wait."""
    if not tensor.is_cuda:
        return 0
    return int(torch.cuda.current_stream(tensor.device).cuda_stream)


def _wire(tensor):
    """The tensor as the daemon takes it: native dtype, contiguous, at least 1-D (a view
    where possible)."""
    _check_device(tensor)
    wire = tensor
    dtype = _wire_dtype(tensor)
    if dtype != tensor.dtype:
        wire = tensor.to(dtype)
    if not wire.is_contiguous():
        wire = wire.contiguous()
    if wire.dim() == 0:
        wire = wire.view(1)
    return wire


def _scale(tensor, factor):
    """tensor * factor in tensor's dtype (a new tensor)."""
    if tensor.dtype.is_floating_point:
        return tensor * factor
    return (tensor.double() * factor).to(tensor.dtype)


# ---- allreduce ----

def _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, ps_id=0):
    """Reduces tensor into output (may be tensor itself) over process set ps_id."""
    if tensor.is_sparse:
        raise ValueError("allreduce of a sparse tensor: use sparse_allreduce_async, or "
                         "allreduce/allreduce_async, which return a sparse result")
    src = _wire(tensor)
    if prescale_factor != 1.0:
        src = _scale(src, prescale_factor)
        if src.data_ptr() == tensor.data_ptr():  # _scale made a new tensor; never alias
            src = src.clone()
    # The daemon writes into dst: the output itself when it can, else a buffer copied back.
    direct = (output.dtype == src.dtype and output.is_contiguous() and output.dim() > 0
              and output.device == src.device)
    if direct:
        dst = output
    elif output is tensor and src is not tensor:
        dst = src  # in place on a private copy (cast, contiguous or scaled)
    else:
        dst = torch.empty_like(src)
    c = _post(_C.allreduce_async, _name("allreduce", name), src, dst, _OPS[op], _stream(src),
              process_set=ps_id)

    def finish():
        _release(c)
        if postscale_factor != 1.0:
            dst.copy_(_scale(dst, postscale_factor))
        if dst is not output:
            output.copy_(dst.view(output.shape))
        return output

    return _register([c], (tensor, src, dst, output), finish)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Averages (or sums) tensor over the ranks of process_set (all ranks by default) into a
    new tensor; returns a handle for synchronize(). A sparse COO tensor goes through Zen's
    sparse allreduce."""
    ps_id = _ps(process_set, "allreduce")
    op = _op_code(op, average)
    if tensor.is_sparse:
        if prescale_factor != 1.0 or postscale_factor != 1.0:
            raise NotImplementedError("prescale/postscale factors are not supported for sparse "
                                      "tensors")
        return sparse_allreduce_async(tensor, name=name, op=op, process_set=process_set)
    output = torch.empty_like(tensor, memory_format=torch.contiguous_format)
    return _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, ps_id)


class ZenAllreduce(torch.autograd.Function):
    """Allreduce whose gradient is the allreduce of the gradient."""

    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor,
                process_set):
        ctx.average = average
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        handle = allreduce_async(tensor, average, name, op, prescale_factor, postscale_factor,
                                 process_set)
        return synchronize(handle)

    @staticmethod
    def backward(ctx, grad_output):
        return (allreduce(grad_output, average=ctx.average, op=ctx.op,
                          prescale_factor=ctx.prescale_factor,
                          postscale_factor=ctx.postscale_factor,
                          process_set=ctx.process_set),
                None, None, None, None, None, None)


HorovodAllreduce = ZenAllreduce


def allreduce(tensor, average=None, name=None, compression=None, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Averages (op=Average, the default), sums (op=Sum), or takes the minimum (op=Min),
    maximum (op=Max) or product (op=Product) of tensor over all ranks; returns a new tensor
    (sparse for a sparse input: Average and Sum only), or combines them with Adasum (op=Adasum:
    dense host floating-point tensors, a power-of-two number of ranks).
    Differentiable (the gradient is the allreduce of the gradient with the same op, as
    horovod.torch)."""
    from zen.torch.compression import Compression
    compression = compression or Compression.none
    if tensor.is_sparse:
        return synchronize(allreduce_async(tensor, average, name, op, prescale_factor,
                                           postscale_factor, process_set))
    compressed, ctx = compression.compress(tensor)
    reduced = ZenAllreduce.apply(compressed, average, name, op, prescale_factor,
                                 postscale_factor, process_set)
    return compression.decompress(reduced, ctx)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """In place: the result overwrites tensor. Returns a handle."""
    ps_id = _ps(process_set, "allreduce")
    op = _op_code(op, average)
    return _allreduce_async(tensor, tensor, name, op, prescale_factor, postscale_factor, ps_id)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """In place; returns tensor."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


# ---- grouped allreduce ----

def _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor, postscale_factor,
                             ps_id):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("grouped allreduce of an empty list")
    base = _name("grouped_allreduce", name)
    names, srcs, dsts = [], [], []
    for i, (t, out) in enumerate(zip(tensors, outputs)):
        if t.is_sparse:
            raise ValueError("grouped allreduce takes dense tensors; use sparse_allreduce_async")
        src = _wire(t)
        if prescale_factor != 1.0:
            src = _scale(src, prescale_factor)
        direct = out.dtype == src.dtype and out.is_contiguous() and out.dim() > 0
        dst = out if direct else torch.empty_like(src)
        names.append("%s.%d" % (base, i))
        srcs.append(src)
        dsts.append(dst)
    cs = _post(_C.grouped_allreduce_async, names, srcs, dsts, _OPS[op], _stream(srcs[0]),
               process_set=ps_id)

    def finish():
        for c in cs:
            _release(c)
        for dst, out in zip(dsts, outputs):
            if postscale_factor != 1.0:
                dst.copy_(_scale(dst, postscale_factor))
            if dst is not out:
                out.copy_(dst.view(out.shape))
        return list(outputs)

    return _register(list(cs), (tensors, srcs, dsts, outputs), finish)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """One handle for a list of tensors that reach the daemon together (and fuse);
    synchronize returns the list of results."""
    ps_id = _ps(process_set, "grouped allreduce")
    op = _op_code(op, average)
    tensors = list(tensors)
    outputs = [torch.empty_like(t, memory_format=torch.contiguous_format) for t in tensors]
    return _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor,
                                    postscale_factor, ps_id)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    ps_id = _ps(process_set, "grouped allreduce")
    op = _op_code(op, average)
    tensors = list(tensors)
    return _grouped_allreduce_async(tensors, tensors, name, op, prescale_factor,
                                    postscale_factor, ps_id)


class ZenGroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor, process_set,
                *tensors):
        ctx.average = average
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        handle = grouped_allreduce_async(list(tensors), average, name, op, prescale_factor,
                                         postscale_factor, process_set)
        return tuple(synchronize(handle))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = grouped_allreduce(list(grad_output), average=ctx.average, op=ctx.op,
                                  prescale_factor=ctx.prescale_factor,
                                  postscale_factor=ctx.postscale_factor,
                                  process_set=ctx.process_set)
        return (None, None, None, None, None, None) + tuple(grads)


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """allreduce of a list of tensors as one group; returns the list. Differentiable."""
    from zen.torch.compression import Compression
    compression = compression or Compression.none
    compressed = [compression.compress(t) for t in tensors]
    reduced = ZenGroupedAllreduce.apply(average, name, op, prescale_factor, postscale_factor,
                                        process_set, *[t for t, _ in compressed])
    return [compression.decompress(t, ctx) for t, (_, ctx) in zip(reduced, compressed)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


# ---- sparse allreduce ----

def _row_sparse(tensor):
    """(row indices [nnz], values [nnz, ...], rows, rest of the shape) of a COO tensor whose
    first sparse_dim dimensions are flattened into one row index."""
    sparse_dim = tensor.sparse_dim()
    shape = tuple(tensor.shape)
    indices = tensor._indices()
    values = tensor._values()
    if sparse_dim == 1:
        rows = indices[0]
    else:
        rows = torch.zeros(indices.shape[1], dtype=torch.int64, device=indices.device)
        for d in range(sparse_dim):
            rows = rows * shape[d] + indices[d]
    num_rows = 1
    for d in shape[:sparse_dim]:
        num_rows *= d
    return rows, values, num_rows, shape[sparse_dim:]


def _unflatten_rows(rows, shape, sparse_dim):
    """Row indices [nnz] back to COO indices [sparse_dim, nnz]."""
    if sparse_dim == 1:
        return rows.view(1, -1)
    out = torch.empty((sparse_dim, rows.numel()), dtype=torch.int64, device=rows.device)
    rest = rows.clone()
    for d in reversed(range(sparse_dim)):
        out[d] = rest % shape[d]
        rest = torch.div(rest, shape[d], rounding_mode="floor")
    return out


def sparse_allreduce_async(tensor, name=None, op=Average, process_set=global_process_set,
                           dense=False):
    """Zen's sparse allreduce of a torch sparse COO tensor (coalesced or not; repeated
    indices are summed). synchronize returns a coalesced sparse tensor of the same shape, or
    with dense=True the dense result."""
    ps_id = _ps(process_set, "sparse_allreduce")
    op = _op_code(op, None, "sparse_allreduce")
    return _sparse_allreduce_async(tensor, _name("sparse_allreduce", name), op, dense, ps_id)


def _own(result):
    """A tensor over the daemon's device memory (a CUDA allgather's, alltoall's or sparse
    allreduce's output, freed with the handle) copied into torch's allocator on the current
    stream; dropping the view then releases the handle. Host results stay as they are."""
    return result.clone() if result.is_cuda else result


def _sparse_allreduce_async(tensor, full_name, op, dense=False, ps_id=0):
    if not tensor.is_sparse:
        raise ValueError("sparse_allreduce_async takes a sparse COO tensor (tensor.is_sparse)")
    _check_device(tensor)
    if tensor.dim() == 0:
        raise ValueError("sparse_allreduce_async needs a tensor of at least one dimension")
    sparse_dim = tensor.sparse_dim()
    shape = tuple(tensor.shape)
    rows, values, num_rows, row_shape = _row_sparse(tensor)
    rows = rows.contiguous()
    dtype = tensor.dtype
    wire_dtype = _wire_dtype(values)
    values = values.to(wire_dtype) if wire_dtype != dtype else values
    values = values.contiguous()
    if values.dim() == 1:
        values = values.view(-1, 1)
    out = None
    if dense:
        out = torch.empty(shape, dtype=wire_dtype, device=values.device)
    c = _post(_C.sparse_allreduce_async, full_name, rows, values, num_rows, _OPS[op], out,
              _stream(values), process_set=ps_id)

    def finish():
        if dense:
            _release(c)
            return out if out.dtype == dtype else out.to(dtype)
        # Released with these tensors; CUDA inputs' rows are copied out of the daemon's memory.
        result_rows, result_values = map(_own, _C.sparse_result(c))
        result_values = result_values.view((result_rows.numel(),) + tuple(row_shape))
        if result_values.dtype != dtype:
            result_values = result_values.to(dtype)
        result = torch._sparse_coo_tensor_unsafe(
            _unflatten_rows(result_rows, shape, sparse_dim), result_values, shape)
        return result._coalesced_(True)  # distinct rows in increasing order

    return _register([c], (tensor, rows, values, out), finish)


def sparse_allreduce(tensor, name=None, op=Average, process_set=global_process_set,
                     dense=False):
    """Blocking sparse_allreduce_async."""
    return synchronize(sparse_allreduce_async(tensor, name, op, process_set, dense))


# ---- allgather ----

def allgather_async(tensor, name=None, process_set=global_process_set):
    """Concatenates the tensors of process_set's ranks (every rank by default), in their
    order in the set, along the first dimension (sizes may differ there); returns a handle."""
    ps_id = _ps(process_set, "allgather")
    src = _wire(tensor)
    if tensor.dim() == 0:
        raise ValueError("allgather needs a tensor of at least one dimension")
    c = _post(_C.allgather_async, _name("allgather", name), src, _stream(src),
              process_set=ps_id)

    def finish():
        gathered = _own(_C.allgather_result(c, src))  # released with this tensor
        return gathered if gathered.dtype == tensor.dtype else gathered.to(tensor.dtype)

    return _register([c], (tensor, src), finish)


class ZenAllgather(torch.autograd.Function):
    """Allgather whose gradient is this rank's slice of the averaged gradient."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim = tensor.shape[0]
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad_reduced = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        dims = allgather(torch.tensor([ctx.dim], dtype=torch.int64),
                         process_set=ctx.process_set)
        me = _process_sets.set_rank(ctx.process_set)
        offset = int(dims[:me].sum().item()) if me else 0
        return grad_reduced.narrow(0, offset, ctx.dim), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Blocking, differentiable allgather."""
    return ZenAllgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    tensors = list(tensors)
    handles = [allgather_async(t, "%s.%d" % (name, i) if name else None, process_set)
               for i, t in enumerate(tensors)]

    def finish():
        return [synchronize(h) for h in handles]

    c_handles = [c for h in handles for c in _handle_map[h].c_handles]
    return _register(c_handles, (tensors, handles), finish)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    return synchronize(grouped_allgather_async(tensors, name, process_set))


# ---- alltoall ----

def _splits_list(splits):
    """Horovod's splits (a 1-D integer tensor, a list or tuple of ints, or None for an equal
    split) as a list of ints."""
    if splits is None:
        return []
    if isinstance(splits, torch.Tensor):
        if splits.dim() != 1 or splits.dtype.is_floating_point or splits.dtype == torch.bool:
            raise ValueError("alltoall: splits must be a 1-D integer tensor, not %s of shape %s"
                             % (splits.dtype, tuple(splits.shape)))
        return [int(x) for x in splits.cpu().tolist()]
    return [int(x) for x in splits]


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Horovod's alltoall: splits[d] rows of tensor's first dimension (in order) go to rank d;
    without splits the first dimension is split equally (it must divide by size()). Ranks may
    differ in the first dimension and the splits, not in the others. Returns a handle;
    synchronize returns (output, received_splits): what every rank sent here concatenated
    along the first dimension in rank order, and the rows received from each rank (int32).
    Bad splits on any rank raise HorovodInternalError on every rank. Over a process set, rank
    d is the set's d-th rank (splits has process_set.size() entries)."""
    ps_id = _ps(process_set, "alltoall")
    if tensor.dim() == 0:
        raise ValueError("alltoall needs a tensor of at least one dimension")
    src = _wire(tensor)
    c = _post(_C.alltoall_async, _name("alltoall", name), src, _splits_list(splits),
              _stream(src), process_set=ps_id)

    def finish():
        output, received = _C.alltoall_result(c, src)  # released with the output
        output = _own(output)
        return (output if output.dtype == tensor.dtype else output.to(tensor.dtype)), received

    return _register([c], (tensor, src), finish)


class ZenAlltoall(torch.autograd.Function):
    """Alltoall whose gradient is the alltoall of the gradient back: each rank returns every
    sender its rows, with the received splits as the splits (as horovod.torch)."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.process_set = process_set
        ctx.received = received
        if splits is None:
            return output
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *dead_gradients):
        grad, _ = alltoall(grad_output.contiguous(), splits=ctx.received,
                           process_set=ctx.process_set)
        return grad, None, None, None


HorovodAlltoall = ZenAlltoall


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Blocking, differentiable alltoall_async: the output, or (output, received_splits) when
    splits are given (as horovod.torch)."""
    return ZenAlltoall.apply(tensor, splits, name, process_set)


# ---- reducescatter ----

def _reducescatter_buffers(tensor, prescale_factor, process_set):
    """(src, dst) of one reducescatter: the wire input (prescaled) and this rank's piece."""
    if tensor.is_sparse:
        raise ValueError("reducescatter takes dense tensors")
    if tensor.dim() == 0:
        raise ValueError("reducescatter needs a tensor of at least one dimension")
    src = _wire(tensor)
    if prescale_factor != 1.0:
        src = _scale(src, prescale_factor)
    rows = _C.reducescatter_rows(src.shape[0], _process_sets.set_rank(process_set),
                                 _process_sets.set_size(process_set))
    dst = torch.empty((rows,) + tuple(src.shape[1:]), dtype=src.dtype, device=src.device)
    return src, dst


def _reducescatter_output(tensor, dst, postscale_factor):
    out = _scale(dst, postscale_factor) if postscale_factor != 1.0 else dst
    return out if out.dtype == tensor.dtype else out.to(tensor.dtype)


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Horovod's reducescatter: tensor (the same shape on every rank) reduced over all ranks
    (op: Average, the default, Sum, Min, Max or Product), of which this rank keeps its piece of
    the first dimension: rows // size() rows, one more on the first rows % size() ranks.
    Returns a handle; synchronize returns the piece. Over a process set: its ranks and sizes
    (rank and size within the set)."""
    ps_id = _ps(process_set, "reducescatter")
    op = _op_code(op, None, "reducescatter")
    src, dst = _reducescatter_buffers(tensor, prescale_factor, process_set)
    c = _post(_C.reducescatter_async, _name("reducescatter", name), src, dst, _OPS[op],
              _stream(src), process_set=ps_id)

    def finish():
        _release(c)
        return _reducescatter_output(tensor, dst, postscale_factor)

    return _register([c], (tensor, src, dst), finish)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter_async of a list of tensors as one group: the daemon negotiates them in one
    cycle and fuses what fits (horovod's grouped_reducescatter). synchronize returns the list
    of this rank's pieces."""
    ps_id = _ps(process_set, "grouped reducescatter")
    op = _op_code(op, None, "reducescatter")
    tensors = list(tensors)
    if not tensors:
        raise ValueError("grouped reducescatter of an empty list")
    base = _name("grouped_reducescatter", name)
    buffers = [_reducescatter_buffers(t, prescale_factor, process_set) for t in tensors]
    srcs = [src for src, _ in buffers]
    cs = _post(_C.grouped_reducescatter_async,
               ["%s.%d" % (base, i) for i in range(len(tensors))], srcs,
               [dst for _, dst in buffers], _OPS[op], _stream(srcs[0]), process_set=ps_id)

    def finish():
        for c in cs:
            _release(c)
        return [_reducescatter_output(t, dst, postscale_factor)
                for t, (_, dst) in zip(tensors, buffers)]

    return _register(list(cs), (tensors, buffers), finish)


def _reducescatter_grad(grad_output, op, scale, process_set):
    """The gradient of one reducescatter: the allgather of the gradient, / the set's size for
    Average, times the scale factors: rank r's rows of piece p reach rank p's output with that
    weight.
    (horovod.tensorflow's is size() times this.) Min, Max and Product have none."""
    if op not in (Sum, Average):
        raise NotImplementedError("zen.torch: reducescatter has a gradient for op=Sum and "
                                  "op=Average only")
    grad = allgather(grad_output.contiguous(), process_set=process_set)
    scale = scale / _process_sets.set_size(process_set) if op == Average else scale
    return _scale(grad, scale) if scale != 1.0 else grad


class ZenReducescatter(torch.autograd.Function):
    """Reducescatter whose gradient is _reducescatter_grad."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.op = _op_code(op, None, "reducescatter")
        ctx.process_set = process_set
        ctx.scale = prescale_factor * postscale_factor
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        grad = _reducescatter_grad(grad_output, ctx.op, ctx.scale, ctx.process_set)
        return grad, None, None, None, None, None


HorovodReducescatter = ZenReducescatter


def reducescatter(tensor, name=None, compression=None, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Blocking, differentiable reducescatter_async (compression: Compression.fp16 casts
    floating-point tensors to float16 on the wire)."""
    from zen.torch.compression import Compression
    compression = compression or Compression.none
    compressed, ctx = compression.compress(tensor)
    reduced = ZenReducescatter.apply(compressed, name, op, process_set, prescale_factor,
                                     postscale_factor)
    return compression.decompress(reduced, ctx)


class ZenGroupedReducescatter(torch.autograd.Function):
    """A group of reducescatters; each tensor's gradient is _reducescatter_grad."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.op = _op_code(op, None, "reducescatter")
        ctx.process_set = process_set
        ctx.scale = prescale_factor * postscale_factor
        return tuple(synchronize(grouped_reducescatter_async(
            tensors, name, op, process_set, prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = [_reducescatter_grad(g, ctx.op, ctx.scale, ctx.process_set) for g in grad_output]
        return (None, None, None, None, None) + tuple(grads)


def grouped_reducescatter(tensors, name=None, compression=None, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """Blocking, differentiable grouped_reducescatter_async; returns the list of pieces."""
    from zen.torch.compression import Compression
    compression = compression or Compression.none
    compressed = [compression.compress(t) for t in tensors]
    reduced = ZenGroupedReducescatter.apply(name, op, process_set, prescale_factor,
                                            postscale_factor, *[t for t, _ in compressed])
    return [compression.decompress(t, ctx) for t, (_, ctx) in zip(reduced, compressed)]


# ---- broadcast ----

def _broadcast_async(tensor, output, root_rank, name, process_set):
    ps_id = _ps(process_set, "broadcast")
    root = _process_sets.root_in_set(process_set, root_rank, "broadcast")
    _check_device(tensor)
    wire = output
    dtype = _wire_dtype(output)
    if dtype != output.dtype or not output.is_contiguous() or output.dim() == 0:
        wire = output.to(dtype).contiguous()
        if wire.dim() == 0:
            wire = wire.view(1)
        if wire.data_ptr() == output.data_ptr():
            wire = wire.clone()
    c = _post(_C.broadcast_async, _name("broadcast", name), wire, root, _stream(wire),
              process_set=ps_id)

    def finish():
        _release(c)
        if wire is not output:
            output.copy_(wire.view(output.shape))
        return output

    return _register([c], (tensor, wire, output), finish)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's tensor, into a new tensor on every rank (of process_set: root_rank is the
    root's rank in the job, as Horovod's, and a member); returns a handle."""
    output = tensor.detach().clone(memory_format=torch.contiguous_format)
    return _broadcast_async(tensor, output, root_rank, name, process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """In place: root_rank's tensor overwrites tensor on every rank; returns a handle."""
    target = tensor.data if isinstance(tensor, torch.nn.Parameter) else tensor
    return _broadcast_async(tensor, target, root_rank, name, process_set)


class ZenBroadcast(torch.autograd.Function):
    """Broadcast whose gradient is the averaged gradient on the root, zero elsewhere."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad_reduced = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if _basics.rank() != ctx.root_rank:
            grad_reduced = grad_reduced * 0
        return grad_reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Blocking, differentiable broadcast into a new tensor."""
    return ZenBroadcast.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Blocking, in place; returns tensor."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ---- join, barrier ----

def join(device=-1):
    """This rank has no more data: until every rank has joined it contributes zeros (sparse:
    no rows) to the others' allreduces. Returns the rank that joined last, the same on every
    rank."""
    c = _post(_C.join_async)
    try:
        _C.wait(c)
    except RuntimeError as e:
        _release(c)
        raise HorovodInternalError(str(e)) from e
    last = _C.join_result(c)
    _release(c)
    return last


def barrier(process_set=global_process_set):
    """Returns once every rank of process_set (all ranks by default) has called barrier()."""
    c = _post(_C.barrier_async, process_set=_ps(process_set, "barrier"))
    try:
        _C.wait(c)
    except RuntimeError as e:
        raise HorovodInternalError(str(e)) from e
    finally:
        _release(c)
