"""zen.tensorflow's collectives: horovod.tensorflow.mpi_ops' API over Zen's daemon.

Each collective is one custom op of _zen_tf_ops.so (bindings/tensorflow): an AsyncOpKernel
that posts the tensor to the daemon and ends from the daemon's completion, so inside a
tf.function the collectives of a step run concurrently and the daemon fuses them. Eagerly,
each call waits for its result, as in Horovod. A failed operation (tensors that do not match
between ranks, a name already in flight, a failed peer, a shutdown) raises the matching
tf.errors.OpError with the daemon's message.

Names: the `name` given (prefixed by the operation), else, in a graph, the input tensor's
name, else "<op>.noname.<n>" counting this process's unnamed eager operations, which matches
across ranks when every rank issues them in the same order (as in Horovod).
"""

import itertools
import os
import re

import tensorflow as tf
from tensorflow.python.framework import ops as _tf_ops

from zen.common import basics
from zen.common import process_sets as _process_sets
from zen.common.basics import (Adasum, Average, Max, Min, Product, Sum, backend, cross_rank,
                               cross_size, is_initialized, local_rank, local_size, rank, size,
                               start_timeline, stats, stop_timeline)
# Build and launch facts (horovod.common.basics), shared with zen.torch.
from zen.common.basics import (ccl_built, cuda_built, ddl_built, gloo_built, gloo_enabled,
                               is_homogeneous, mpi_built, mpi_enabled, mpi_threads_supported,
                               nccl_built, rocm_built, sycl_built)
from zen.common.process_sets import (ProcessSet, add_process_set, global_process_set,
                                     remove_process_set)

basics.lib()  # libzen.so first, RTLD_GLOBAL: the op library links against it
_OPS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_zen_tf_ops.so")
if not os.path.exists(_OPS_PATH):
    raise ImportError("zen.tensorflow: %s is missing; build it with tools/build-tf (in the "
                      "checkout) or `pip install .` where TensorFlow imports" % _OPS_PATH)
_ops = tf.load_op_library(_OPS_PATH)

__all__ = ["Adasum", "Average", "Max", "Min", "ProcessSet", "Product", "Sum",
           "add_process_set", "allgather", "allreduce", "alltoall", "backend", "barrier",
           "broadcast", "cross_rank", "cross_size", "global_process_set", "grouped_allgather",
           "grouped_allreduce", "grouped_reducescatter", "init", "is_initialized", "join",
           "local_rank", "local_rank_op", "local_size", "local_size_op",
           "process_set_included_op", "rank", "rank_op", "reducescatter",
           "remove_process_set", "shutdown", "size", "size_op", "start_timeline", "stats",
           "stop_timeline"] + list(basics.BUILD_INFO)


def init(comm=None, process_sets=None):
    """Starts this rank's daemon from the environment (zenrun: TCP; mpirun: MPI; otherwise a
    job of one). Idempotent. process_sets: ProcessSet objects or rank lists, added in order on
    every rank (each ProcessSet gets its process_set_id), as Horovod's."""
    _process_sets.init_job("zen.tensorflow.init", comm, process_sets)


def shutdown():
    """Stops the daemon on every rank (a rank still waiting on an operation gets an error).
    Added process sets are invalidated."""
    global _noname_ids
    basics.shutdown()
    _process_sets.invalidate_all()
    # As zen.torch's: the next runtime's unnamed operations count from 0 on every rank.
    _noname_ids = itertools.count()


# ---- placement as ops (Horovod's *_op): read when the op runs, usable in tf.function ----

def rank_op(name=None):
    """An int32 scalar op: this rank's number, read when it runs (not when the graph is
    built)."""
    return _ops.zen_rank(name=name)


def local_rank_op(name=None):
    """An int32 scalar op: this rank's number on its host, read when it runs."""
    return _ops.zen_local_rank(name=name)


def size_op(process_set_id=0, name=None):
    """An int32 scalar op: the number of ranks of process set process_set_id (0: the job),
    read when it runs."""
    return _ops.zen_size(process_set_id=process_set_id, name=name)


def local_size_op(name=None):
    """An int32 scalar op: the number of ranks on this host, read when it runs."""
    return _ops.zen_local_size(name=name)


def process_set_included_op(process_set_id=0, name=None):
    """An int32 scalar op: 1 when this rank is a member of process set process_set_id, else 0,
    read when it runs (an error for a set this rank does not know)."""
    return _ops.zen_process_set_included(process_set_id=process_set_id, name=name)


def _ps(process_set, what):
    """The process_set_id attribute of a collective `what` (zen.common.process_sets);
    ValueError for a set not added, or on a rank that is not a member."""
    return _process_sets.process_set_id(process_set, what)


# ---- names and dtypes ----

_noname_ids = itertools.count()


def _normalize_name(name):
    return re.sub("[^a-zA-Z0-9_]", "_", name)


def group_prefix(prefix):
    """The names' prefix of one group of operations built together (a list of gradients, a
    list of variables to broadcast). In a graph (a tf.function's, or TensorFlow 1's), one
    unique per group (prefix, prefix_1, ...): two groups of a graph may run at once (two
    optimizers' train ops in one session.run; the model's and the optimizer's broadcasts in
    one tf.function), and each name may be in flight once. Every rank builds the same graph,
    so the same names; the current name scope does not enter them. Eagerly, each group
    completes before the next starts."""
    if tf.executing_eagerly():
        return prefix
    graph = tf.compat.v1.get_default_graph()
    with graph.name_scope(None):
        return graph.unique_name(prefix)


def _name(kind, name, tensor):
    if name:
        return "%s.%s" % (kind, name)
    if not tf.executing_eagerly() and hasattr(tensor, "name"):
        return "%s.%s" % (kind, _normalize_name(tensor.name))
    return "%s.noname.%d" % (kind, next(_noname_ids))


# The dtypes the daemon reduces natively; small integers and bools travel as int32.
_NATIVE = (tf.float32, tf.float16, tf.bfloat16, tf.float64, tf.int32, tf.int64)
_WIDENED = (tf.uint8, tf.int8, tf.int16, tf.uint16, tf.bool)


def _to_wire(tensor):
    """(tensor in a dtype the daemon takes, its original dtype)."""
    tensor = tf.convert_to_tensor(tensor)
    if tensor.dtype in _NATIVE:
        return tensor, tensor.dtype
    if tensor.dtype in _WIDENED:
        return tf.cast(tensor, tf.int32), tensor.dtype
    raise ValueError("zen.tensorflow: dtype %s is not supported" % tensor.dtype.name)


def _from_wire(tensor, dtype):
    return tensor if tensor.dtype == dtype else tf.cast(tensor, dtype)


# ---- allreduce ----

def _allreduce(tensor, name=None, op=Sum, ps_id=0):
    """The raw dense op: tensor reduced over the ranks of set ps_id (Average, Sum, Adasum,
    Min, Max, Product)."""
    wire, dtype = _to_wire(tensor)
    out = _ops.zen_allreduce(wire, _name("allreduce", name, tensor),
                             reduce_op=basics.C_OPS[op], process_set_id=ps_id)
    return _from_wire(out, dtype)


def _sparse_allreduce(slices, name=None, op=Average, compression=None, ps_id=0):
    """tf.IndexedSlices through Zen's sparse allreduce: the distinct rows of the reduced
    gradient, as tf.IndexedSlices with the input's dense_shape and indices dtype."""
    op = basics.check_op(op, None, "sparse allreduce of tf.IndexedSlices")  # no Adasum
    if slices.dense_shape is None:
        raise ValueError("allreduce of tf.IndexedSlices needs its dense_shape (the row count)")
    values, ctx = (slices.values, None) if compression is None else \
        compression.compress(slices.values)
    wire, dtype = _to_wire(values)
    indices = tf.cast(slices.indices, tf.int64)
    dense_shape = tf.cast(slices.dense_shape, tf.int64)
    out_values, out_indices = _ops.zen_sparse_allreduce(
        wire, indices, dense_shape, _name("allreduce", name, slices.values),
        reduce_op=basics.C_OPS[op], process_set_id=ps_id)
    out_values = _from_wire(out_values, dtype)
    if compression is not None:
        out_values = compression.decompress(out_values, ctx)
    return tf.IndexedSlices(out_values, tf.cast(out_indices, slices.indices.dtype),
                            slices.dense_shape)


def allreduce(tensor, average=None, device_dense="", device_sparse="", compression=None,
              op=None, prescale_factor=1.0, postscale_factor=1.0, name=None,
              process_set=global_process_set, ignore_name_scope=False):
    """The average (op=Average, the default), sum (op=Sum), minimum (op=Min), maximum
    (op=Max), product (op=Product) or Adasum (op=Adasum: host floating-point tensors, a
    power-of-two number of ranks) of tensor over all ranks. tf.IndexedSlices take Average and
    Sum only.

    A tf.IndexedSlices (an embedding's gradient) takes Zen's sparse path and comes back as
    tf.IndexedSlices holding the distinct rows of the result; convert it first
    (tf.convert_to_tensor) to reduce it densely. compression (Compression.fp16) casts
    floating-point values to float16 on the wire. process_set: over its ranks only (called by
    its members)."""
    ps_id = _ps(process_set, "allreduce")
    op = basics.check_op(op, average)
    if isinstance(tensor, tf.IndexedSlices):
        if prescale_factor != 1.0 or postscale_factor != 1.0:
            raise NotImplementedError("prescale/postscale factors are not supported for "
                                      "tf.IndexedSlices")
        return _sparse_allreduce(tensor, name, op, compression, ps_id)
    tensor = tf.convert_to_tensor(tensor)
    if prescale_factor != 1.0:
        tensor = _scale(tensor, prescale_factor)
    ctx = None
    if compression is not None:
        tensor, ctx = compression.compress(tensor)
    reduced = _allreduce(tensor, name, op, ps_id)
    if compression is not None:
        reduced = compression.decompress(reduced, ctx)
    if postscale_factor != 1.0:
        reduced = _scale(reduced, postscale_factor)
    return reduced


def _scale(tensor, factor):
    if tensor.dtype.is_floating:
        return tensor * tf.cast(factor, tensor.dtype)
    return tf.cast(tf.cast(tensor, tf.float64) * factor, tensor.dtype)


def _grad_name(op, kind):
    """The gradient's name: the forward operation's, prefixed (a string tensor in a graph)."""
    return tf.strings.join(["grad.", kind, ".", op.inputs[-1]])


@_tf_ops.RegisterGradient("ZenAllreduce")
def _allreduce_grad(op, grad):
    """The gradient of an allreduce is the allreduce of the gradient (same reduce op)."""
    reduced = _ops.zen_allreduce(grad, _grad_name(op, "allreduce"),
                                 reduce_op=op.get_attr("reduce_op"),
                                 process_set_id=op.get_attr("process_set_id"))
    return reduced, None


# ---- allgather ----

def allgather(tensor, name=None, process_set=global_process_set, ignore_name_scope=False):
    """Every rank's tensor (of process_set's ranks) concatenated along the first dimension,
    in rank order (ranks may differ in that dimension)."""
    ps_id = _ps(process_set, "allgather")
    wire, dtype = _to_wire(tensor)
    if wire.shape.rank == 0:
        raise ValueError("allgather needs a tensor of at least one dimension")
    return _from_wire(_ops.zen_allgather(wire, _name("allgather", name, tensor),
                                         process_set_id=ps_id), dtype)


def _rows(tensor):
    return tf.reshape(tf.shape(tensor, out_type=tf.int64)[0], [1])


def _own_rows(summed, tensor, all_rows, ps_id):
    """tensor's rows of summed, the allgather of every rank's tensor in set ps_id (all_rows:
    their row counts in rank order)."""
    me, _ = _process_sets.rank_and_size(ps_id)
    offset = tf.reduce_sum(all_rows[:me])
    return tf.slice(summed, tf.concat([[offset], tf.zeros([tf.rank(summed) - 1], tf.int64)], 0),
                    tf.shape(tensor, out_type=tf.int64))


@_tf_ops.RegisterGradient("ZenAllgather")
def _allgather_grad(op, grad):
    """This rank's slice of the summed gradient (as horovod.tensorflow)."""
    ps_id = op.get_attr("process_set_id")
    grad = _ops.zen_allreduce(grad, _grad_name(op, "allgather"), reduce_op=basics.C_OPS[Sum],
                              process_set_id=ps_id)
    all_rows = _ops.zen_allgather(_rows(op.inputs[0]), _grad_name(op, "allgather.rows"),
                                  process_set_id=ps_id)
    return _own_rows(grad, op.inputs[0], all_rows, ps_id), None


# ---- alltoall ----

def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """Horovod's alltoall: splits[d] rows of tensor's first dimension (in order) go to rank d;
    without splits the first dimension is split equally (it must divide by size()). Ranks may
    differ in the first dimension and the splits, not in the others. Returns what every rank
    sent here, concatenated along the first dimension in rank order, and, when splits are
    given, also the rows received from each rank (int32), as horovod.tensorflow. Bad splits
    on any rank raise on every rank. Over a process set, rank d is the set's d-th rank."""
    ps_id = _ps(process_set, "alltoall")
    wire, dtype = _to_wire(tensor)
    if wire.shape.rank == 0:
        raise ValueError("alltoall needs a tensor of at least one dimension")
    splits_ = tf.constant([], tf.int32) if splits is None else \
        tf.cast(tf.convert_to_tensor(splits), tf.int32)
    output, received = _ops.zen_alltoall(wire, splits_, _name("alltoall", name, tensor),
                                         process_set_id=ps_id)
    output = _from_wire(output, dtype)
    return output if splits is None else (output, received)


@_tf_ops.RegisterGradient("ZenAlltoall")
def _alltoall_grad(op, grad, grad_received_splits):
    """The alltoall of the gradient back: every sender gets its rows' gradient, with the
    received splits as the splits (as horovod.tensorflow)."""
    grad_input, _ = _ops.zen_alltoall(grad, op.outputs[1], _grad_name(op, "alltoall"),
                                      process_set_id=op.get_attr("process_set_id"))
    return grad_input, None, None


# ---- reducescatter ----

def reducescatter(tensor, device_dense="", compression=None, op=Average, name=None,
                  process_set=global_process_set, ignore_name_scope=False, prescale_factor=1.0,
                  postscale_factor=1.0):
    """Horovod's reducescatter: tensor (the same shape on every rank) reduced over all ranks
    (op: Average, the default, Sum, Min, Max or Product), of which this rank keeps its piece
    of the first dimension: rows // size() rows, one more on the first rows % size() ranks.
    compression (Compression.fp16) casts floating-point tensors to float16 on the wire. Over a
    process set: its ranks, rank and size within the set."""
    ps_id = _ps(process_set, "reducescatter")
    op = basics.check_op(op, None, "reducescatter")
    tensor = tf.convert_to_tensor(tensor)
    if tensor.shape.rank == 0:
        raise ValueError("reducescatter needs a tensor of at least one dimension")
    if prescale_factor != 1.0:
        tensor = _scale(tensor, prescale_factor)
    ctx = None
    if compression is not None:
        tensor, ctx = compression.compress(tensor)
    wire, dtype = _to_wire(tensor)
    out = _from_wire(_ops.zen_reducescatter(wire, _name("reducescatter", name, tensor),
                                            reduce_op=basics.C_OPS[op], process_set_id=ps_id),
                     dtype)
    if compression is not None:
        out = compression.decompress(out, ctx)
    if postscale_factor != 1.0:
        out = _scale(out, postscale_factor)
    return out


def _check_reducescatter_grad(op):
    """op's reduce_op, which must have a gradient here: Min, Max and Product have none."""
    reduce_op = op.get_attr("reduce_op")
    if reduce_op not in (basics.C_OPS[Sum], basics.C_OPS[Average]):
        raise NotImplementedError("zen.tensorflow: reducescatter has a gradient for op=Sum and "
                                  "op=Average only")
    return reduce_op


def _reducescatter_grad_of(gathered, reduce_op, ps_id):
    if reduce_op != basics.C_OPS[Average]:
        return gathered
    return _scale(gathered, 1.0 / _process_sets.rank_and_size(ps_id)[1])


@_tf_ops.RegisterGradient("ZenReducescatter")
def _reducescatter_grad(op, grad):
    """The allgather of the gradient, divided by the set's size for Average: rank r's rows of
    piece p reach rank p's output with weight 1 (Sum) or 1/size (Average).
    (horovod.tensorflow's is size times this.)"""
    reduce_op = _check_reducescatter_grad(op)
    ps_id = op.get_attr("process_set_id")
    gathered = _ops.zen_allgather(grad, _grad_name(op, "reducescatter"), process_set_id=ps_id)
    return _reducescatter_grad_of(gathered, reduce_op, ps_id), None


# ---- grouped allreduce, allgather, reducescatter ----

def _group(tensors, what):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("%s of an empty list" % what)
    return tensors


def _grads_or_zeros(op, grads):
    """A grouped op's output gradients, zeros for the outputs nothing depends on (None): every
    rank posts the whole group."""
    return [tf.zeros_like(o) if g is None else g for g, o in zip(grads, op.outputs)]


def _group_to_wire(tensors):
    wires = [_to_wire(t) for t in tensors]
    return [w for w, _ in wires], [d for _, d in wires]


def _grouped_reduce(kernel, kind, group, name, op, compression, prescale_factor,
                    postscale_factor, ps_id):
    """kernel (a grouped reducing op) over dense tensors, with Horovod's scaling and
    compression around it; returns the outputs in order."""
    if prescale_factor != 1.0:
        group = [_scale(t, prescale_factor) for t in group]
    ctxs = [None] * len(group)
    if compression is not None:
        group, ctxs = zip(*[compression.compress(t) for t in group])
    wires, dtypes = _group_to_wire(group)
    outs = kernel(wires, _name(kind, name, wires[0]), reduce_op=basics.C_OPS[op],
                  process_set_id=ps_id)
    result = []
    for o, dtype, ctx in zip(outs, dtypes, ctxs):
        o = _from_wire(o, dtype)
        if compression is not None:
            o = compression.decompress(o, ctx)
        result.append(_scale(o, postscale_factor) if postscale_factor != 1.0 else o)
    return result


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="",
                      compression=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set, name=None):
    """allreduce of each tensor of a list, posted as one group: the daemon negotiates them in
    one cycle and fuses what fits (horovod's grouped_allreduce); returns the list.
    tf.IndexedSlices in the list take the sparse path, each on its own."""
    ps_id = _ps(process_set, "grouped allreduce")
    op = basics.check_op(op, average)
    tensors = _group(tensors, "grouped allreduce")
    dense = [i for i, t in enumerate(tensors) if not isinstance(t, tf.IndexedSlices)]
    if len(dense) < len(tensors) and (prescale_factor != 1.0 or postscale_factor != 1.0):
        raise NotImplementedError("prescale/postscale factors are not supported for "
                                  "tf.IndexedSlices")
    out = [None if i in dense else allreduce(t, op=op, compression=compression,
                                             name=None if name is None else "%s.%d" % (name, i),
                                             process_set=process_set)
           for i, t in enumerate(tensors)]
    if not dense:
        return out
    reduced = _grouped_reduce(_ops.zen_grouped_allreduce, "grouped_allreduce",
                              [tf.convert_to_tensor(tensors[i]) for i in dense], name, op,
                              compression, prescale_factor, postscale_factor, ps_id)
    for i, r in zip(dense, reduced):
        out[i] = r
    return out


@_tf_ops.RegisterGradient("ZenGroupedAllreduce")
def _grouped_allreduce_grad(op, *grads):
    """The grouped allreduce of the gradients (same reduce op)."""
    grads = _grads_or_zeros(op, grads)
    reduced = _ops.zen_grouped_allreduce(grads, _grad_name(op, "grouped_allreduce"),
                                         reduce_op=op.get_attr("reduce_op"),
                                         process_set_id=op.get_attr("process_set_id"))
    return list(reduced) + [None]


def grouped_allgather(tensors, name=None, process_set=global_process_set,
                      ignore_name_scope=False):
    """allgather of each tensor of a list, posted as one group; returns the list."""
    ps_id = _ps(process_set, "grouped allgather")
    wires, dtypes = _group_to_wire(_group(tensors, "grouped allgather"))
    if any(w.shape.rank == 0 for w in wires):
        raise ValueError("allgather needs tensors of at least one dimension")
    gathered = _ops.zen_grouped_allgather(wires, _name("grouped_allgather", name, wires[0]),
                                          process_set_id=ps_id)
    return [_from_wire(g, d) for g, d in zip(gathered, dtypes)]


@_tf_ops.RegisterGradient("ZenGroupedAllgather")
def _grouped_allgather_grad(op, *grads):
    """Each tensor's slice of its summed gradient, as _allgather_grad."""
    inputs = op.inputs[:-1]
    ps_id = op.get_attr("process_set_id")
    grads = _grads_or_zeros(op, grads)
    summed = _ops.zen_grouped_allreduce(grads, _grad_name(op, "grouped_allgather"),
                                        reduce_op=basics.C_OPS[Sum], process_set_id=ps_id)
    all_rows = _ops.zen_grouped_allgather([_rows(t) for t in inputs],
                                          _grad_name(op, "grouped_allgather.rows"),
                                          process_set_id=ps_id)
    return [_own_rows(s, t, r, ps_id) for s, t, r in zip(summed, inputs, all_rows)] + [None]


def grouped_reducescatter(tensors, device_dense="", compression=None, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0, name=None):
    """reducescatter of each tensor of a list, posted as one group; returns the list of this
    rank's pieces."""
    ps_id = _ps(process_set, "grouped reducescatter")
    op = basics.check_op(op, None, "reducescatter")
    group = [tf.convert_to_tensor(t) for t in _group(tensors, "grouped reducescatter")]
    if any(t.shape.rank == 0 for t in group):
        raise ValueError("reducescatter needs tensors of at least one dimension")
    return _grouped_reduce(_ops.zen_grouped_reducescatter, "grouped_reducescatter", group, name,
                           op, compression, prescale_factor, postscale_factor, ps_id)


@_tf_ops.RegisterGradient("ZenGroupedReducescatter")
def _grouped_reducescatter_grad(op, *grads):
    """The grouped allgather of the gradients, as _reducescatter_grad for each."""
    reduce_op = _check_reducescatter_grad(op)
    ps_id = op.get_attr("process_set_id")
    grads = _grads_or_zeros(op, grads)
    gathered = _ops.zen_grouped_allgather(grads, _grad_name(op, "grouped_reducescatter"),
                                          process_set_id=ps_id)
    return [_reducescatter_grad_of(g, reduce_op, ps_id) for g in gathered] + [None]


# ---- broadcast ----

def broadcast(tensor, root_rank, name=None, process_set=global_process_set,
              ignore_name_scope=False):
    """root_rank's tensor on every rank (of process_set: root_rank is the root's rank in the
    job, as Horovod's, and a member)."""
    ps_id = _ps(process_set, "broadcast")
    root = _process_sets.root_in_set(process_set, root_rank, "broadcast")
    wire, dtype = _to_wire(tensor)
    out = _ops.zen_broadcast(wire, _name("broadcast", name, tensor), root_rank=root,
                             process_set_id=ps_id)
    return _from_wire(out, dtype)


@_tf_ops.RegisterGradient("ZenBroadcast")
def _broadcast_grad(op, grad):
    """The summed gradient on the root rank, zeros elsewhere (as horovod.tensorflow); the
    op's root_rank is within its set."""
    ps_id = op.get_attr("process_set_id")
    reduced = _ops.zen_allreduce(grad, _grad_name(op, "broadcast"),
                                 reduce_op=basics.C_OPS[Sum], process_set_id=ps_id)
    if _process_sets.rank_and_size(ps_id)[0] != op.get_attr("root_rank"):
        return reduced * 0, None
    return reduced, None


# ---- join, barrier ----

def join():
    """This rank has no more data: until every rank has joined it contributes zeros (sparse:
    no rows) to the others' allreduces. Returns the rank that joined last, the same on every
    rank (an int32 scalar tensor, as in Horovod)."""
    return _ops.zen_join()


def barrier(process_set=global_process_set):
    """Returns once every rank of process_set (all ranks by default) has called barrier()."""
    return _ops.zen_barrier(process_set_id=_ps(process_set, "barrier"))


_tf_ops.NotDifferentiable("ZenJoin")
_tf_ops.NotDifferentiable("ZenBarrier")
_tf_ops.NotDifferentiable("ZenSparseAllreduce")
