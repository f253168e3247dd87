"""What every rank runs in test_tensorflow.py: zen.tensorflow's API, check by check.

    tools/zenrun -np N .venv-tf/bin/python tf_checks.py [CHECK ...]

Runs the named checks (default: all, in order) on every rank, with a barrier after each,
and prints one line per check and rank: `ZENTEST {"check": ..., "ok": ..., "error": ...}`.
Every check is collective (all ranks post the same operations, apart from those a check
makes differ on purpose). Inputs are small integers from fixed seeds (the same on every
rank), so sums are exact in every dtype.
"""

import json
import os
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from rank_report import Checks, add_checkout_package, expect_raises, run_checks  # noqa: E402

add_checkout_package()

import zen.tensorflow as hvd  # noqa: E402
from adasum_reference import adasum_tree, assert_close  # noqa: E402
from build_info import check_build_info  # noqa: E402

CHECKS = Checks()
check = CHECKS.check
DTYPES = [tf.float32, tf.float64, tf.float16, tf.bfloat16, tf.int32, tf.int64]
WIDENED = [tf.uint8, tf.int8, tf.int16]


def small_ints(shape, dtype, seed=1234, lo=-8, hi=8):
    values = np.random.RandomState(seed).randint(lo, hi + 1, size=shape)
    return tf.cast(tf.constant(values, dtype=tf.int64), dtype)


def equal(a, b):
    a, b = tf.convert_to_tensor(a), tf.convert_to_tensor(b)
    return a.dtype == b.dtype and a.shape == b.shape and bool(tf.reduce_all(a == b))


# ---- basics ----

@check
def basics():
    rank, size = int(os.environ["ZEN_RANK"]), int(os.environ["ZEN_SIZE"])
    assert hvd.is_initialized()
    assert hvd.rank() == rank and hvd.size() == size, (hvd.rank(), hvd.size(), rank, size)
    assert hvd.local_rank() == int(os.environ["ZEN_LOCAL_RANK"])
    assert hvd.local_size() == size and hvd.cross_rank() == 0 and hvd.cross_size() == 1
    assert not hvd.mpi_enabled() and hvd.backend() == "tcp"
    assert hvd.Average != hvd.Sum
    assert "cycles" in hvd.stats()
    check_build_info(hvd)  # one host: homogeneous


@check
def placement_ops():
    """rank_op, local_rank_op, size_op, local_size_op and process_set_included_op: int32
    scalars equal to the Python queries, eagerly and inside a tf.function (where they are
    read when the function runs)."""
    want = [hvd.rank(), hvd.local_rank(), hvd.size(), hvd.local_size(), 1]

    def ops():
        return [hvd.rank_op(), hvd.local_rank_op(), hvd.size_op(), hvd.local_size_op(),
                hvd.process_set_included_op()]
    for got in (ops(), tf.function(ops)()):
        assert all(t.dtype == tf.int32 and t.shape == [] for t in got), got
        assert [int(t) for t in got] == want, (got, want)
    assert int(hvd.size_op(process_set_id=0, name="size.global")) == hvd.size()
    # An unknown process set is an error when the op runs.
    expect_raises(tf.errors.FailedPreconditionError, lambda: hvd.size_op(process_set_id=999),
                  "unknown process set")


@check
def objects():
    """allgather_object: every rank's object in rank order; broadcast_object_fn: a function
    broadcasting root_rank's object, callable again."""
    rank, size = hvd.rank(), hvd.size()
    got = hvd.allgather_object({"rank": rank, "pad": "x" * rank}, name="objects.gather")
    assert got == [{"rank": r, "pad": "x" * r} for r in range(size)], got
    assert hvd.allgather_object(None) == [None] * size
    bcast = hvd.broadcast_object_fn(root_rank=size - 1, name="objects.fn")
    for step in range(2):
        mine = ("from", rank, step) if rank == size - 1 else None
        assert bcast(mine) == ("from", size - 1, step)
    # broadcast_: in place, root_rank's values.
    variables = [tf.Variable([float(rank)] * 3), tf.Variable(rank * 10)]
    assert hvd.broadcast_(variables, root_rank=size - 1, name="objects.inplace") == variables
    assert equal(variables[0], [float(size - 1)] * 3) and int(variables[1]) == (size - 1) * 10


def partial_tape_model(seed=7):
    """A local Dense(3) feeding a shared Dense(2) (no biases, fixed weights, the same on
    every rank) and rank r's input."""
    import keras
    local = keras.layers.Dense(3, use_bias=False, name="local")
    shared = keras.layers.Dense(2, use_bias=False, name="shared")
    rng = np.random.default_rng(seed)
    local.build((None, 4))
    shared.build((None, 3))
    local.kernel.assign(rng.integers(-3, 4, (4, 3)).astype(np.float32))
    shared.kernel.assign(rng.integers(-3, 4, (3, 2)).astype(np.float32))
    return local, shared


def partial_tape_input(rank):
    return tf.constant(np.arange(8, dtype=np.float32).reshape(2, 4) * (rank + 1) - rank)


def partial_tape_grads(local, shared, rank, tape_fn=None):
    """d/d(local.kernel, shared.kernel) of sum(shared(local(x_rank))), through tape_fn(tape)
    (a distributed tape) or plain."""
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(shared(local(partial_tape_input(rank))))
    if tape_fn is not None:
        tape = tape_fn(tape)
    return tape.gradient(loss, [local.kernel, shared.kernel])


@check
def partial_distributed_gradient_tape():
    """PartialDistributedGradientTape(local_layers=[local]): the shared layer's gradient is
    the average of every rank's (hand-computed here for each rank), the local layer's is this
    rank's own, divided by the size (scale_local_gradients, Horovod's default) or not."""
    rank, size = hvd.rank(), hvd.size()
    local, shared = partial_tape_model()
    per_rank = [partial_tape_grads(local, shared, r) for r in range(size)]
    shared_avg = sum(g[1] for g in per_rank) / size
    assert not np.allclose(per_rank[0][0], per_rank[1][0])  # the local gradients differ
    for scale in (True, False):
        def partial(tape, scale=scale):
            return hvd.PartialDistributedGradientTape(tape, local_layers=[local],
                                                      scale_local_gradients=scale)
        got = partial_tape_grads(local, shared, rank, partial)
        want_local = per_rank[rank][0] / size if scale else per_rank[rank][0]
        assert np.allclose(got[0], want_local, rtol=1e-6), (scale, got[0], want_local)
        assert np.allclose(got[1], shared_avg, rtol=1e-6), (scale, got[1], shared_avg)
    # Without local layers it is DistributedGradientTape: both averaged.
    got = partial_tape_grads(local, shared, rank, hvd.PartialDistributedGradientTape)
    assert np.allclose(got[0], sum(g[0] for g in per_rank) / size, rtol=1e-6)
    expect_raises(ValueError, lambda: hvd.PartialDistributedGradientTape(
        tf.GradientTape(), local_layers=[local.kernel]), "layers.Layer")


def partial_optimizer_step(local, shared, rank, make_optimizer, passes=1):
    """The gradient steps make_optimizer() (a zen DistributedOptimizer of SGD(1.0)) applies
    after `passes` calls of apply with this rank's plain gradients, as (local, shared): minus
    the change of each kernel. The kernels are put back."""
    optimizer = make_optimizer()
    grads = partial_tape_grads(local, shared, rank)
    variables = [local.kernel, shared.kernel]
    before = [v.numpy() for v in variables]
    for _ in range(passes):
        optimizer.apply(grads, variables)
    steps = [b - v.numpy() for b, v in zip(before, variables)]
    for v, b in zip(variables, before):
        v.assign(b)
    return steps


@check
def partial_distributed_optimizer():
    """zen.tensorflow.keras.PartialDistributedOptimizer(local_layers=[local]) and the
    optimizer's register_local_var: the local kernel steps by this rank's own gradient
    (divided by the size when scale_local_gradients, Horovod's default), the shared one by the
    average of every rank's (hand-computed here for each rank); so too summed over
    backward_passes_per_step=2, and under op=Adasum the local kernel is not combined."""
    import keras
    import zen.tensorflow.keras as hvd_keras
    rank, size = hvd.rank(), hvd.size()
    local, shared = partial_tape_model()
    per_rank = [partial_tape_grads(local, shared, r) for r in range(size)]
    own, shared_avg = per_rank[rank][0].numpy(), sum(g[1] for g in per_rank).numpy() / size

    def expect(steps, want_local, want_shared=shared_avg, what=""):
        assert np.allclose(steps[0], want_local, rtol=1e-5), (what, steps[0], want_local)
        if want_shared is not None:
            assert np.allclose(steps[1], want_shared, rtol=1e-5), (what, steps[1], want_shared)

    for scale in (True, False):
        steps = partial_optimizer_step(local, shared, rank, lambda: (
            hvd_keras.PartialDistributedOptimizer(keras.optimizers.SGD(1.0), local_layers=local,
                                                  scale_local_gradients=scale)))
        expect(steps, own / size if scale else own, what=("partial", scale))

    def registered(**kwargs):
        optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(1.0), **kwargs)
        optimizer.register_local_var(local.kernel)
        return optimizer
    expect(partial_optimizer_step(local, shared, rank, registered), own / size,
           what="register_local_var")
    expect(partial_optimizer_step(local, shared, rank,
                                  lambda: registered(backward_passes_per_step=2), passes=2),
           2 * own / size, 2 * shared_avg, what="backward_passes_per_step=2")
    if size & (size - 1) == 0:  # Zen's Adasum: a power-of-two number of ranks
        expect(partial_optimizer_step(local, shared, rank, lambda: registered(op=hvd.Adasum)),
               own / size, None, what="Adasum")
    # Without local layers it is DistributedOptimizer: both averaged.
    steps = partial_optimizer_step(local, shared, rank, lambda: (
        hvd_keras.PartialDistributedOptimizer(keras.optimizers.SGD(1.0))))
    expect(steps, sum(g[0] for g in per_rank).numpy() / size, what="no local layers")
    expect_raises(ValueError, lambda: hvd_keras.PartialDistributedOptimizer(
        keras.optimizers.SGD(1.0), local_layers=[local.kernel]), "layers.Layer")


@check
def optimizer_arguments_in_horovods_order():
    """zen.tensorflow.DistributedOptimizer takes horovod.tensorflow's arguments in its order
    (use_locking third, backward_passes_per_step before op), zen.tensorflow.keras's those of
    horovod.tensorflow.keras (no use_locking, op after gradient_predivide_factor): a
    positional call written for Horovod sums here too (one SGD(1.0) step from 0 with gradient
    rank + 1 on each rank)."""
    import inspect
    import keras
    import zen.tensorflow.keras as hvd_keras
    assert list(inspect.signature(hvd.DistributedOptimizer).parameters) == [
        "optimizer", "name", "use_locking", "device_dense", "device_sparse", "compression",
        "sparse_as_dense", "backward_passes_per_step", "op", "gradient_predivide_factor",
        "average_aggregated_gradients", "num_groups", "groups", "process_set",
        "scale_local_gradients"]
    assert list(inspect.signature(hvd_keras.DistributedOptimizer).parameters) == [
        "optimizer", "name", "device_dense", "device_sparse", "compression", "sparse_as_dense",
        "gradient_predivide_factor", "op", "backward_passes_per_step",
        "average_aggregated_gradients", "num_groups", "groups", "process_set",
        "scale_local_gradients"]
    want = -float(sum(range(1, hvd.size() + 1)))
    for make in (lambda: hvd.DistributedOptimizer(keras.optimizers.SGD(1.0), None, False, "",
                                                  "", hvd.Compression.none, False, 1, hvd.Sum),
                 lambda: hvd_keras.DistributedOptimizer(keras.optimizers.SGD(1.0), None, "", "",
                                                        hvd.Compression.none, False, 1.0,
                                                        hvd.Sum)):
        v = tf.Variable([0.0])
        make().apply_gradients([(tf.constant([float(hvd.rank() + 1)]), v)])
        assert np.allclose(v.numpy(), [want]), (v.numpy(), want)


@check
def partial_distributed_optimizer_in_fit():
    """Model.fit (a traced train step) with PartialDistributedOptimizer: after a step on
    every rank's own data the shared kernel is the same on every rank, the local one is
    not."""
    import keras
    import zen.tensorflow.keras as hvd_keras
    rank, size = hvd.rank(), hvd.size()
    local, shared = partial_tape_model()
    model = keras.Sequential([keras.Input((4,)), local, shared])
    model.compile(optimizer=hvd_keras.PartialDistributedOptimizer(
        keras.optimizers.SGD(0.01), local_layers=[local]), loss="mse")
    model.fit(partial_tape_input(rank), tf.zeros([2, 2]), batch_size=2, epochs=1, verbose=0)
    kernels = [hvd.allgather(k.value[None], name="fit.%d" % i).numpy()
               for i, k in enumerate([local.kernel, shared.kernel])]
    assert all(np.array_equal(kernels[1][0], k) for k in kernels[1]), kernels[1]
    assert not any(np.allclose(kernels[0][0], k) for k in kernels[0][1:]), kernels[0]


@check
def graph_mode_api_refuses_eager_execution():
    """broadcast_global_variables is TensorFlow 1's: eagerly it raises, as Horovod's (the
    Keras one too); the hook's class is a SessionRunHook."""
    import zen.tensorflow.keras as hvd_keras
    expect_raises(RuntimeError, lambda: hvd.broadcast_global_variables(0), "eager execution")
    expect_raises(RuntimeError, lambda: hvd_keras.broadcast_global_variables(0),
                  "eager execution")
    assert isinstance(hvd.BroadcastGlobalVariablesHook(0), tf.compat.v1.train.SessionRunHook)


@check
def timeline():
    """start_timeline / stop_timeline (ZEN_TIMELINE unset: DYNAMIC) write this rank's trace."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tl.json")
        hvd.start_timeline(path)
        hvd.allreduce(tf.ones([3]), name="timeline.t")
        hvd.stop_timeline()
        mine = os.path.join(tmp, "tl.rank%d.json" % hvd.rank())
        with open(mine) as f:
            events = json.load(f)
        assert any("timeline.t" in json.dumps(e) for e in events), events[:5]


# ---- allreduce ----

@check
def allreduce_dtypes_and_dims():
    size, rank = hvd.size(), hvd.rank()
    for dtype in DTYPES:
        for dim in (0, 1, 2, 3):
            t = small_ints([5] * dim, dtype)
            summed = hvd.allreduce(t, op=hvd.Sum, name="sum.%s.%d" % (dtype.name, dim))
            assert equal(summed, t * size), (dtype, dim)
            assert equal(hvd.allreduce(t), t), (dtype, dim)  # Average, unnamed
            mine = t + tf.cast(rank, dtype)
            assert equal(hvd.allreduce(mine, op=hvd.Sum),
                         t * size + tf.cast(size * (size - 1) // 2, dtype)), (dtype, dim)
    for dtype in WIDENED:
        t = small_ints([4, 3], dtype, lo=0, hi=3)
        assert equal(hvd.allreduce(t, op=hvd.Sum), t * size), dtype
    flags = tf.constant([rank == 0, False])
    assert hvd.allreduce(flags, op=hvd.Sum).numpy().tolist() == [True, False]
    assert equal(hvd.allreduce(tf.zeros([0, 3]), op=hvd.Sum), tf.zeros([0, 3]))
    t = small_ints([4], tf.float32)
    assert equal(hvd.allreduce(t, average=False), t * size)
    expect_raises(ValueError, lambda: hvd.allreduce(t, average=True, op=hvd.Sum))
    expect_raises(ValueError, lambda: hvd.allreduce(t, op=17), "unknown op")
    expect_raises(ValueError, lambda: hvd.allreduce(tf.zeros([2], tf.complex64)),
                  "not supported")


@check
def allreduce_adasum():
    """op=Adasum as horovod.tensorflow: a fused group of tensors (each with its own dot
    products, zero vectors and an empty one included) and a single tensor, every float dtype,
    checked against the float64 tree over every rank's input rebuilt here; every rank gets the
    same bits. Integer tensors, tf.IndexedSlices and ranks that disagree on the op fail."""
    size, rank = hvd.size(), hvd.rank()
    x = tf.ones([3])
    if size & (size - 1):
        expect_raises(tf.errors.InvalidArgumentError, lambda: hvd.allreduce(x, op=hvd.Adasum),
                      "power-of-two")
        return
    shapes = [[5], [3, 4], [0], [1], [17]]

    def inputs(r, i):
        if i == 3 and r == 0:
            return np.zeros(shapes[i])  # a zero vector: its coefficient is 1
        return np.random.RandomState(100 * i + r).randint(-8, 9, size=shapes[i])

    for dtype, tol in ((tf.float64, 1e-12), (tf.float32, 1e-6), (tf.float16, 2e-3),
                       (tf.bfloat16, 1.6e-2)):
        mine = [tf.cast(tf.constant(inputs(rank, i), dtype=tf.float64), dtype)
                for i in range(len(shapes))]
        outs = hvd.grouped_allreduce(mine, op=hvd.Adasum, name="ada.%s" % dtype.name)
        outs.append(hvd.allreduce(mine[1], op=hvd.Adasum, name="ada1.%s" % dtype.name))
        for i, out in zip(list(range(len(shapes))) + [1], outs):
            assert out.dtype == dtype and out.shape == mine[i].shape, (dtype, i, out)
            want = adasum_tree([inputs(r, i) for r in range(size)])
            assert_close(tf.cast(out, tf.float64).numpy(), want, tol, (dtype.name, i))
        flat = tf.reshape(tf.concat([tf.reshape(tf.cast(o, tf.float64), [-1]) for o in outs],
                                    0), [1, -1])
        gathered = hvd.allgather(flat, name="ada.bits.%s" % dtype.name).numpy()
        assert all(np.array_equal(gathered[0].view(np.uint64), g.view(np.uint64))
                   for g in gathered), dtype
    expect_raises(tf.errors.InvalidArgumentError,
                  lambda: hvd.allreduce(tf.ones([3], tf.int32), op=hvd.Adasum), "floating-point")
    slices = tf.IndexedSlices(tf.ones([1, 2]), tf.constant([0]), tf.constant([4, 2]))
    expect_raises(NotImplementedError, lambda: hvd.allreduce(slices, op=hvd.Adasum), "Adasum")
    if size > 1:
        e = expect_raises(tf.errors.InvalidArgumentError, lambda: hvd.allreduce(
            x, op=hvd.Adasum if rank else hvd.Sum, name="ada.badop"))
        assert "reduce op" in e.message, e.message


@check
def allreduce_min_max_product():
    """op=Min/Max/Product as horovod.tensorflow, against every rank's input rebuilt here."""
    size, rank = hvd.size(), hvd.rank()
    assert (hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product) == (0, 1, 2, 3, 4, 5)
    for dtype in DTYPES + [tf.uint8, tf.int8, tf.bool]:
        lo = 0 if dtype in (tf.uint8, tf.bool) else -2
        hi = 1 if dtype == tf.bool else 2
        inputs = [np.random.RandomState(10 + r).randint(lo, hi + 1, size=[3, 5])
                  for r in range(size)]
        mine = tf.cast(tf.constant(inputs[rank], dtype=tf.int64), dtype)
        stacked = np.stack(inputs).astype(np.float64)
        for op, want in ((hvd.Min, stacked.min(0)), (hvd.Max, stacked.max(0)),
                         (hvd.Product, stacked.prod(0))):
            out = hvd.allreduce(mine, op=op, name="mmp.%s.%d" % (dtype.name, op))
            assert out.dtype == dtype and out.shape == mine.shape
            assert np.array_equal(tf.cast(out, tf.float64).numpy(), want), (dtype, op, out, want)
    # Every rank gets the same bits from an inexact product.
    x = tf.linspace(0.9, 1.1, 37) * (1 + rank / 7.0)
    prod = hvd.allreduce(tf.cast(x, tf.float32), op=hvd.Product, name="mmp.bits")
    gathered = hvd.allgather(tf.reshape(prod, [1, -1])).numpy()
    assert all(np.array_equal(gathered[0].view(np.uint32), g.view(np.uint32)) for g in gathered)
    # Min and Sum tensors reduced in one function never share a bucket.
    base = small_ints([4], tf.float32)
    t = base + float(rank)

    @tf.function
    def mixed(x):
        return [hvd.allreduce(x, op=op, name="mix.%s.%d" % (n, i))
                for i in range(3) for op, n in ((hvd.Min, "min"), (hvd.Sum, "sum"))]

    outs = mixed(t)
    for i in range(3):
        assert equal(outs[2 * i], base)
        assert equal(outs[2 * i + 1], base * size + size * (size - 1) / 2)
    stats = hvd.stats()["tensors"]
    min_buckets = {stats["allreduce.mix.min.%d" % i]["last_bucket"] for i in range(3)}
    sum_buckets = {stats["allreduce.mix.sum.%d" % i]["last_bucket"] for i in range(3)}
    assert not (min_buckets & sum_buckets), (min_buckets, sum_buckets)
    # The gradient is the allreduce of the gradient with the same op.
    v = tf.Variable(t)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(hvd.allreduce(v, op=hvd.Max, name="grad.max"))
    assert equal(tape.gradient(loss, v), tf.ones([4]))


@check
def allreduce_scaling_compression_and_grad():
    size = hvd.size()
    t = small_ints([4, 4], tf.float32)
    assert equal(hvd.allreduce(t, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5),
                 t * size)
    assert equal(hvd.allreduce(t, postscale_factor=3.0), t * 3.0)
    out = hvd.allreduce(t, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert equal(out, t * size)
    ints = small_ints([4], tf.int64)
    assert equal(hvd.allreduce(ints, op=hvd.Sum, compression=hvd.Compression.fp16), ints * size)
    for op, factor in ((hvd.Sum, size), (hvd.Average, 1)):
        x = tf.Variable(small_ints([3, 2], tf.float32))
        with tf.GradientTape() as tape:
            y = hvd.allreduce(x, op=op)
            loss = tf.reduce_sum(y)
        assert equal(tape.gradient(loss, x), tf.fill([3, 2], float(factor))), op


@check
def allreduce_in_a_function_fuses():
    size = hvd.size()
    tensors = [small_ints([3, 4], tf.float32, seed=i) for i in range(20)]

    @tf.function
    def many(xs):
        return [hvd.allreduce(x, op=hvd.Sum, name="fn.%d" % i) for i, x in enumerate(xs)]

    for _ in range(2):  # the second call runs the traced graph again
        outs = many(tensors)
        assert all(equal(o, t * size) for o, t in zip(outs, tensors))
    stats = hvd.stats()["tensors"]
    assert max(stats["allreduce.fn.%d" % i]["last_bucket_size"] for i in range(20)) > 1

    @tf.function
    def unnamed(x):  # graph names come from the tensors
        return hvd.allreduce(x * 2.0, op=hvd.Sum), hvd.allgather(x), hvd.broadcast(x, 0)

    s, g, b = unnamed(tensors[0])
    assert equal(s, tensors[0] * 2.0 * size) and g.shape[0] == 3 * size
    assert equal(b, tensors[0])


# ---- sparse ----

def indexed_slices(rank, seed, rows=12, width=3, nnz=5, dtype=tf.float32, index_dtype=tf.int64):
    """Rows that overlap across ranks ([rank, rank + 1]) and repeat within a rank."""
    rs = np.random.RandomState(seed + rank)
    idx = np.concatenate([[rank % rows, (rank + 1) % rows, rank % rows],
                          rs.randint(0, rows, size=nnz)])
    values = rs.randint(-4, 5, size=(len(idx), width))
    return tf.IndexedSlices(tf.cast(tf.constant(values), dtype), tf.constant(idx, index_dtype),
                            tf.constant([rows, width], tf.int64))


def dense_of(slices, rows):
    return tf.math.unsorted_segment_sum(tf.cast(slices.values, tf.float64),
                                        tf.cast(slices.indices, tf.int32), rows)


@check
def indexed_slices_match_dense():
    size, rank = hvd.size(), hvd.rank()
    n = 0
    for dtype in DTYPES:
        for index_dtype in (tf.int64, tf.int32):
            for op in (hvd.Sum, hvd.Average):
                n += 1
                mine = indexed_slices(rank, 100 * n, dtype=dtype, index_dtype=index_dtype)
                want = sum(dense_of(indexed_slices(r, 100 * n, dtype=dtype), 12)
                           for r in range(size))
                if op == hvd.Average:
                    want = want / size
                    if not dtype.is_floating:
                        want = tf.math.sign(want) * tf.math.floor(tf.abs(want))  # truncation
                out = hvd.allreduce(mine, op=op, name="sp.%d" % n)
                assert isinstance(out, tf.IndexedSlices), type(out)
                assert out.values.dtype == dtype and out.indices.dtype == index_dtype
                idx = out.indices.numpy().tolist()
                assert idx == sorted(set(idx)), idx  # distinct rows, increasing
                assert out.dense_shape.numpy().tolist() == [12, 3]
                got = dense_of(out, 12)
                tol = 5e-2 if dtype in (tf.float16, tf.bfloat16) else 1e-9
                assert np.allclose(got.numpy(), want.numpy(), atol=tol), (dtype, op, got, want)
    # A rank with no rows; 1-D values (a vector's rows); fp16 compression of the values.
    empty = tf.IndexedSlices(tf.zeros([0, 3]), tf.zeros([0], tf.int64), tf.constant([12, 3]))
    full = indexed_slices(0, 7)
    out = hvd.allreduce(full if rank == 0 else empty, op=hvd.Sum, name="sp.empty")
    assert np.array_equal(dense_of(out, 12).numpy(), dense_of(full, 12).numpy())
    vec = tf.IndexedSlices(tf.constant([1.0, 2.0, 3.0]), tf.constant([4, 0, 4], tf.int64),
                           tf.constant([6], tf.int64))
    out = hvd.allreduce(vec, op=hvd.Sum, name="sp.vector")
    assert out.indices.numpy().tolist() == [0, 4]
    assert out.values.numpy().tolist() == [2.0 * size, 4.0 * size]
    out = hvd.allreduce(indexed_slices(rank, 9), op=hvd.Sum, name="sp.fp16",
                        compression=hvd.Compression.fp16)
    want = sum(dense_of(indexed_slices(r, 9), 12) for r in range(size))
    assert out.values.dtype == tf.float32 and np.array_equal(dense_of(out, 12), want)
    # Min/Max/Product are for dense tensors: the daemon refuses them at enqueue.
    for op in (hvd.Min, hvd.Max, hvd.Product):
        expect_raises(tf.errors.InvalidArgumentError,
                      lambda: hvd.allreduce(full, op=op, name="sp.max"),
                      "sparse allreduce reduces with sum or average")
    expect_raises(NotImplementedError, lambda: hvd.allreduce(full, prescale_factor=2.0))
    bad = tf.IndexedSlices(tf.ones([2, 3]), tf.constant([0, 1], tf.int64),
                           tf.constant([12, 4], tf.int64))
    expect_raises(tf.errors.InvalidArgumentError, lambda: hvd.allreduce(bad, name="sp.bad"),
                  "dense_shape")  # refused here, before anything is posted

    # Inside a function: many in flight at once.
    @tf.function
    def several(slices):
        return [hvd.allreduce(s, op=hvd.Sum, name="spf.%d" % i) for i, s in enumerate(slices)]

    inputs = [indexed_slices(rank, 50 + i) for i in range(8)]
    for i, out in enumerate(several(inputs)):
        want = sum(dense_of(indexed_slices(r, 50 + i), 12) for r in range(size))
        assert np.array_equal(dense_of(out, 12).numpy(), want.numpy()), i
    schemes = hvd.stats()["buckets_by_scheme"]
    assert any(k in schemes for k in ("zen", "hc", "agsparse", "blocks", "dense")), schemes


# ---- allgather, broadcast ----

@check
def allgather():
    size, rank = hvd.size(), hvd.rank()
    for dtype in DTYPES + WIDENED:
        for dim in (1, 2, 3):
            t = tf.fill([rank + 1] + [3] * (dim - 1), tf.cast(rank, dtype))
            g = hvd.allgather(t, name="ag.%s.%d" % (dtype.name, dim))
            assert g.dtype == dtype and g.shape[0] == size * (size + 1) // 2
            assert g.shape[1:] == [3] * (dim - 1)
            at = 0
            for r in range(size):
                assert equal(g[at:at + r + 1], tf.fill([r + 1] + [3] * (dim - 1),
                                                       tf.cast(r, dtype)))
                at += r + 1
    expect_raises(ValueError, lambda: hvd.allgather(tf.constant(1.0)))
    # The gradient: this rank's slice of the summed gradient.
    x = tf.Variable(tf.ones([rank + 1, 2]))
    with tf.GradientTape() as tape:
        y = hvd.allgather(x)
        weights = tf.concat([tf.fill([r + 1, 2], float(r)) for r in range(size)], 0)
        loss = tf.reduce_sum(y * weights)
    assert equal(tape.gradient(loss, x), tf.fill([rank + 1, 2], float(rank * size)))


# ---- alltoall ----

def a2a_rows(src, dst):
    """Rows rank src sends rank dst: uneven, some empty (its own too)."""
    return (src + 2 * dst) % 3


def a2a_value(src, dst, k):
    """Row k from rank src to rank dst: a small integer naming all three (exact in bf16)."""
    return 16 * src + 4 * dst + k


def a2a_input(rank, size, dtype):
    rows = [a2a_value(rank, d, k) for d in range(size) for k in range(a2a_rows(rank, d))]
    column = tf.reshape(tf.constant(rows, tf.int64), [-1, 1])
    return tf.cast(tf.tile(column, [1, 2]), dtype)


@check
def alltoall():
    size, rank = hvd.size(), hvd.rank()
    splits = [a2a_rows(rank, d) for d in range(size)]
    want_splits = [a2a_rows(s, rank) for s in range(size)]
    want = [a2a_value(s, rank, k) for s in range(size) for k in range(want_splits[s])]
    for dtype in DTYPES + WIDENED:
        out, received = hvd.alltoall(a2a_input(rank, size, dtype), splits=splits,
                                     name="a2a.%s" % dtype.name)
        assert out.dtype == dtype and out.shape == [sum(want_splits), 2], (out.shape, dtype)
        assert received.dtype == tf.int32 and received.numpy().tolist() == want_splits
        assert out.numpy().astype(np.int64)[:, 0].tolist() == want, (dtype, out)
    # Without splits: equal pieces, and only the tensor comes back (as horovod.tensorflow).
    out = hvd.alltoall(tf.range(2 * size, dtype=tf.float32) + 100 * rank, name="a2a.equal")
    assert isinstance(out, tf.Tensor)
    assert out.numpy().tolist() == [100 * s + 2 * rank + k for s in range(size) for k in (0, 1)]

    # In a tf.function, two of them in flight at once; splits as a tensor.
    @tf.function
    def both(x):
        a, ra = hvd.alltoall(x, splits=tf.constant(splits), name="a2a.fn.a")
        b, _ = hvd.alltoall(x * 2, splits=splits, name="a2a.fn.b")
        return a, b, ra

    a, b, ra = both(a2a_input(rank, size, tf.float32))
    assert a.numpy()[:, 0].tolist() == want and b.numpy()[:, 0].tolist() == [2 * w for w in want]
    assert ra.numpy().tolist() == want_splits
    # The gradient: the alltoall of the gradient back, with the received splits.
    x = tf.Variable(a2a_input(rank, size, tf.float32))
    with tf.GradientTape() as tape:
        y, _ = hvd.alltoall(x, splits=splits)
        loss = tf.reduce_sum(y * tf.stop_gradient(y))  # d loss / d y = y
    assert equal(tape.gradient(loss, x), tf.convert_to_tensor(x))
    # Errors reach every rank: a bad split on one rank, a shape that does not split equally.
    bad = list(splits) if rank else splits[:-1] + [splits[-1] + 1]
    e = expect_raises(tf.errors.InvalidArgumentError,
                      lambda: hvd.alltoall(a2a_input(rank, size, tf.float32), splits=bad,
                                           name="a2a.bad"))
    assert "a2a.bad" in e.message and "alltoall splits do not fit" in e.message, e.message
    if size > 1:
        e = expect_raises(tf.errors.InvalidArgumentError,
                          lambda: hvd.alltoall(tf.ones([2 * size + 1]), name="a2a.uneven"))
        assert "do not split equally" in e.message, e.message
    expect_raises(ValueError, lambda: hvd.alltoall(tf.constant(1.0)))


# ---- reducescatter ----

@check
def reducescatter():
    size, rank = hvd.size(), hvd.rank()
    ops = {hvd.Sum: lambda xs: np.sum(xs, 0), hvd.Average: lambda xs: np.sum(xs, 0) / size,
           hvd.Min: lambda xs: np.min(xs, 0), hvd.Max: lambda xs: np.max(xs, 0),
           hvd.Product: lambda xs: np.prod(xs, 0)}
    for rows in (2 * size + 1, size - 1):  # uneven pieces; an empty piece on the last rank
        # Horovod's split: rows // size each, one more on the first rows % size ranks.
        mine = rows // size + (1 if rank < rows % size else 0)
        first = rows // size * rank + min(rank, rows % size)
        for dtype in DTYPES:
            for op, reduce in ops.items():
                lo, hi = (-2, 2) if op == hvd.Product else (-8, 8)
                scale = size if op == hvd.Average else 1  # the mean stays exact
                everyone = [small_ints([rows, 3], tf.int64, seed=7 + r, lo=lo, hi=hi) * scale
                            for r in range(size)]
                out = hvd.reducescatter(tf.cast(everyone[rank], dtype), op=op,
                                        name="rs.%d.%s.%d" % (rows, dtype.name, op))
                want = reduce(np.stack([e.numpy().astype(np.float64) for e in everyone]))
                assert out.dtype == dtype and out.shape == [mine, 3], (out.shape, dtype, op)
                got = out.numpy().astype(np.float64)
                assert np.array_equal(got, want[first:first + mine]), (dtype, op, got, want)
    # A widened dtype, scale factors.
    out = hvd.reducescatter(tf.ones([2 * size], tf.int16), op=hvd.Sum, prescale_factor=3.0,
                            name="rs.i16")
    assert out.dtype == tf.int16 and out.numpy().tolist() == [3 * size] * 2
    # In a tf.function: several in flight at once (they fuse).

    @tf.function
    def group(x):
        return [hvd.reducescatter(x + i, op=hvd.Sum, name="rs.fn.%d" % i) for i in range(4)]

    for i, out in enumerate(group(tf.fill([size + 1, 2], float(rank)))):
        rows = size + 1
        piece = rows // size + (1 if rank < rows % size else 0)
        assert equal(out, tf.fill([piece, 2], float(sum(r + i for r in range(size)))))
    # The gradient: the allgather of the gradient, / size for Average, times the factors.
    rows = 2 * size + 1
    owner = [p for p in range(size) for _ in range(rows // size + (1 if p < rows % size else 0))]
    for op, scale in ((hvd.Sum, 1.0), (hvd.Average, 1.0 / size)):
        x = tf.Variable(tf.ones([rows, 2]))
        with tf.GradientTape() as tape:
            y = hvd.reducescatter(x, op=op, postscale_factor=2.0)
            loss = tf.reduce_sum(y * float(rank + 1))
        want = tf.constant([[2.0 * scale * (p + 1)] * 2 for p in owner])
        got = tape.gradient(loss, x)
        assert np.allclose(got.numpy(), want.numpy()), (op, got, want)
    # Errors: shapes or ops that differ fail on every rank.
    if size > 1:
        e = expect_raises(tf.errors.InvalidArgumentError,
                          lambda: hvd.reducescatter(tf.ones([size + rank, 2]), name="rs.bad"))
        assert "rs.bad" in e.message and "dense shape" in e.message, e.message
    expect_raises(ValueError, lambda: hvd.reducescatter(tf.constant(1.0)))
    expect_raises(NotImplementedError, lambda: hvd.reducescatter(tf.ones([2]), op=hvd.Adasum))


# ---- grouped allreduce, allgather, reducescatter ----

def piece_of(rows, rank, size):
    """Horovod's reducescatter split of `rows` rows: rank's [first, first + mine)."""
    return rows // size * rank + min(rank, rows % size), rows // size + (rank < rows % size)


@check
def grouped_ops():
    size, rank = hvd.size(), hvd.rank()
    # Tensors of different shapes and dtypes (a widened one, a scalar) in one group.
    shapes = [[3, 2], [], [2 * size + 1], [0, 4]]
    dtypes = [tf.float32, tf.int64, tf.int16, tf.float16]
    everyone = [[small_ints(s, d, seed=17 * r + i) for i, (s, d) in enumerate(zip(shapes, dtypes))]
                for r in range(size)]

    def total(i):
        return np.sum([everyone[r][i].numpy().astype(np.float64) for r in range(size)], 0)

    out = hvd.grouped_allreduce(everyone[rank], op=hvd.Sum, name="gar")
    for i, d in enumerate(dtypes):
        assert out[i].dtype == d and out[i].shape == shapes[i], (i, out[i].shape)
        assert np.array_equal(out[i].numpy().astype(np.float64), total(i)), (i, out[i])
    # Scaled, and a tf.IndexedSlices in the list (it takes the sparse path on its own).
    slices = tf.IndexedSlices(tf.ones([2, 3]), tf.constant([rank, rank], tf.int64),
                              tf.constant([size, 3], tf.int64))
    scaled, = hvd.grouped_allreduce([tf.fill([2], float(rank))], op=hvd.Average,
                                    prescale_factor=2.0, postscale_factor=0.5, name="garx")
    assert np.allclose(scaled.numpy(), [sum(range(size)) / size] * 2), scaled
    dense, sparse = hvd.grouped_allreduce([tf.fill([2], float(rank)), slices], name="gary")
    assert np.allclose(dense.numpy(), [sum(range(size)) / size] * 2), dense
    assert isinstance(sparse, tf.IndexedSlices)
    assert np.allclose(tf.convert_to_tensor(sparse).numpy(), np.full([size, 3], 2.0 / size))
    expect_raises(NotImplementedError, lambda: hvd.grouped_allreduce([slices],
                                                                     prescale_factor=2.0))
    # Allgather: rows that differ between ranks.
    ag = [tf.fill([rank + 1, 2], float(rank)), tf.fill([rank], tf.cast(rank, tf.int32))]
    g1, g2 = hvd.grouped_allgather(ag, name="gag")
    assert equal(g1, tf.concat([tf.fill([r + 1, 2], float(r)) for r in range(size)], 0)), g1
    assert equal(g2, tf.concat([tf.fill([r], tf.cast(r, tf.int32)) for r in range(size)], 0))
    # Reducescatter: every rank's piece.
    rs = hvd.grouped_reducescatter(everyone[rank][2:], op=hvd.Sum, name="grs")
    for i, piece in zip((2, 3), rs):
        first, mine = piece_of(shapes[i][0], rank, size)
        assert piece.dtype == dtypes[i] and piece.shape[0] == mine, (i, piece.shape)
        assert np.array_equal(piece.numpy().astype(np.float64), total(i)[first:first + mine])

    # In a tf.function, with gradients: allreduce's is the allreduce of the gradient,
    # allgather's this rank's slice of the summed gradient, reducescatter's the allgather of
    # the gradient / size for Average.
    x = tf.Variable(tf.ones([2 * size + 1, 2]))
    y = tf.Variable(tf.ones([rank + 1, 3]))

    @tf.function
    def losses():
        with tf.GradientTape() as tape:
            a, b = hvd.grouped_allreduce([x * 2.0, tf.reduce_sum(y, 0)], op=hvd.Sum)
            c, = hvd.grouped_allgather([y])
            d, = hvd.grouped_reducescatter([x], op=hvd.Average)
            weights = tf.concat([tf.fill([r + 1, 3], float(r)) for r in range(size)], 0)
            loss = (tf.reduce_sum(a) + tf.reduce_sum(b) + tf.reduce_sum(c * weights) +
                    tf.reduce_sum(d) * float(rank + 1))
        return tape.gradient(loss, [x, y])

    gx, gy = losses()
    owner = [p for p in range(size) for _ in range(piece_of(2 * size + 1, p, size)[1])]
    want_x = np.array([[2.0 * size + (p + 1) / size] * 2 for p in owner])
    assert np.allclose(gx.numpy(), want_x), (gx, want_x)
    assert np.allclose(gy.numpy(), np.full([rank + 1, 3], size + rank * size)), gy
    # Errors: a shape that differs on one rank fails the group on every rank.
    if size > 1:
        e = expect_raises(tf.errors.InvalidArgumentError, lambda: hvd.grouped_allreduce(
            [tf.ones([2]), tf.ones([2 + rank])], name="gar.bad"))
        assert "gar.bad" in e.message, e.message
    expect_raises(ValueError, lambda: hvd.grouped_allreduce([]))
    expect_raises(ValueError, lambda: hvd.grouped_allgather([tf.constant(1.0)]))


@check
def broadcast():
    size, rank = hvd.size(), hvd.rank()
    for root in range(size):
        for dtype in DTYPES + [tf.uint8, tf.bool]:
            t = tf.fill([3, 2], tf.cast(rank, dtype))
            out = hvd.broadcast(t, root, name="bc.%d.%s" % (root, dtype.name))
            assert equal(out, tf.fill([3, 2], tf.cast(root, dtype))), (root, dtype)
    assert float(hvd.broadcast(tf.constant(float(rank)), size - 1)) == size - 1
    # The gradient: the summed gradient on the root, zeros elsewhere.
    x = tf.Variable(tf.ones([3]))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(hvd.broadcast(x, 0))
    want = tf.fill([3], float(size)) if rank == 0 else tf.zeros([3])
    assert equal(tape.gradient(loss, x), want)
    expect_raises(ValueError, lambda: hvd.broadcast(t, -1))


@check
def broadcast_variables():
    rank = hvd.rank()
    variables = [tf.Variable(tf.fill([4, 3], float(rank))), tf.Variable(rank, dtype=tf.int64),
                 tf.Variable(tf.fill([2], rank == 0))]
    hvd.broadcast_variables(variables, root_rank=0)
    assert equal(variables[0], tf.zeros([4, 3])) and int(variables[1]) == 0
    assert variables[2].numpy().tolist() == [True, True]
    import keras
    keras.utils.set_random_seed(rank)  # different weights on every rank
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(2)])
    hvd.broadcast_variables(model.variables, root_rank=hvd.size() - 1)
    for v in model.variables:
        gathered = hvd.allgather(tf.expand_dims(tf.convert_to_tensor(v), 0))
        assert all(equal(gathered[r], gathered[0]) for r in range(hvd.size())), v.path
    # Groups in one tf.function, as Horovod's TF2 examples broadcast the model's and the
    # optimizer's variables after the first step: they are in flight at once.
    groups = [[tf.Variable(tf.fill([2], 10.0 * g + rank)), tf.Variable(tf.fill([3], 10.0 * g))]
              for g in range(3)]

    @tf.function
    def all_groups():
        hvd.broadcast_variables(groups[0], root_rank=0)
        hvd.broadcast_variables(groups[1], root_rank=0)
        hvd.broadcast_(groups[2], root_rank=hvd.size() - 1)

    all_groups()
    for g, root in ((0, 0), (1, 0), (2, hvd.size() - 1)):
        assert equal(groups[g][0], tf.fill([2], 10.0 * g + root)), (g, groups[g][0])
        assert equal(groups[g][1], tf.fill([3], 10.0 * g)), (g, groups[g][1])


@check
def keras_fit_with_distributed_optimizer():
    """Model.fit (its train step a tf.function) with DistributedOptimizer: an embedding's
    IndexedSlices and a dense layer's gradients are averaged, so every rank, fed different
    data, ends with the same weights."""
    import keras
    rank = hvd.rank()
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((5,), dtype="int64"), keras.layers.Embedding(50, 4),
                              keras.layers.GlobalAveragePooling1D(), keras.layers.Dense(3)])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    hvd.broadcast_variables(model.variables, root_rank=0)
    rs = np.random.RandomState(rank)
    x, y = rs.randint(0, 50, size=(16, 5)), rs.randint(0, 3, size=16)
    model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    for v in model.trainable_variables:
        gathered = hvd.allgather(tf.expand_dims(tf.convert_to_tensor(v), 0))
        assert all(np.allclose(gathered[r], gathered[0], atol=1e-6)
                   for r in range(hvd.size())), v.path
    assert any("DistributedOptimizer" in k for k in hvd.stats()["tensors"])


# ---- errors ----

@check
def errors_reach_every_rank():
    size, rank = hvd.size(), hvd.rank()
    if size == 1:
        return
    t = tf.ones([2 + rank, 3])
    e = expect_raises(tf.errors.OpError, lambda: hvd.allreduce(t, name="bad.shape"))
    assert "bad.shape" in e.message, e.message
    t = tf.ones([4], tf.int32 if rank % 2 == 0 else tf.float32)
    e = expect_raises(tf.errors.OpError, lambda: hvd.allreduce(t, name="bad.dtype"))
    assert "bad.dtype" in e.message and "float32" in e.message, e.message
    expect_raises(tf.errors.OpError, lambda: hvd.allgather(tf.ones([2, 3 + rank]),
                                                           name="bad.gather"))
    expect_raises(tf.errors.OpError, lambda: hvd.broadcast(tf.ones([2]), rank, name="bad.root"))
    sp = tf.IndexedSlices(tf.ones([2, 2]), tf.constant([0, 1], tf.int64),
                          tf.constant([10 + rank, 2], tf.int64))
    expect_raises(tf.errors.OpError, lambda: hvd.allreduce(sp, name="bad.sparse"))
    # A name in flight: refused on the rank that posts it twice; the first still completes.
    # Rank 0 runs a function posting "dup" on two threads at once (each call waits for its
    # result): whichever post comes second is refused, since the other ranks post "dup" only
    # after "dup.tried", which rank 0 posts once the refusal came back. (A sleep on the other
    # ranks would not do: a rank 0 descheduled longer would find its first "dup" complete.)

    @tf.function
    def once(x):
        return hvd.allreduce(x, name="dup", op=hvd.Sum)

    run_once = once.get_concrete_function(tf.TensorSpec([3], tf.float32))  # traced first
    hvd.barrier()
    if rank == 0:
        outcomes = []

        def post():
            try:
                outcomes.append(run_once(tf.ones([3])))
            except Exception as e:  # the refusal; "dup.tried" lets the other post complete
                outcomes.append(e)
                hvd.allreduce(tf.ones([1]), name="dup.tried")

        threads = [threading.Thread(target=post) for _ in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        assert not any(th.is_alive() for th in threads), "a post of 'dup' never ended"
        refused = [o for o in outcomes if isinstance(o, Exception)]
        assert len(refused) == 1, outcomes
        assert isinstance(refused[0], tf.errors.InvalidArgumentError), refused[0]
        assert "already in flight" in refused[0].message, refused[0].message
        done = [o for o in outcomes if not isinstance(o, Exception)]
        assert equal(done[0], tf.fill([3], float(size))), done
    else:
        hvd.allreduce(tf.ones([1]), name="dup.tried")
        hvd.allreduce(tf.ones([3]), name="dup", op=hvd.Sum)
    # The daemon is still fine.
    assert equal(hvd.allreduce(tf.ones([2]), op=hvd.Sum, name="after"), tf.fill([2], float(size)))


# ---- join, barrier ----

@check
def join_and_barrier():
    size, rank = hvd.size(), hvd.rank()
    hvd.barrier()
    if rank == 0:
        # The other ranks have joined: they contribute zeros (dense) and no rows (sparse).
        t = tf.fill([3], 4.0)
        assert equal(hvd.allreduce(t, op=hvd.Sum, name="join.dense"), t)
        sp = indexed_slices(0, 3)
        out = hvd.allreduce(sp, op=hvd.Sum, name="join.sparse")
        assert np.array_equal(dense_of(out, 12), dense_of(sp, 12))
        time.sleep(0.2)
    last = hvd.join()
    assert int(last) == (0 if size > 1 else rank), int(last)
    hvd.barrier()


if __name__ == "__main__":
    sys.exit(run_checks(hvd, CHECKS, sys.argv[1:], hvd.barrier))
