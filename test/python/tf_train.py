"""What every rank runs in test_tensorflow.py's training test: DistributedGradientTape and
DistributedOptimizer on N ranks against one process training on the same global batches
with dense gradients.

    tools/zenrun -np N .venv-tf/bin/python tf_train.py SCHEME [SCHEME ...]

For each scheme (ZEN_SCHEME: zen, hc, agsparse, blocks, dense) the daemon is started anew
(hvd.init after hvd.shutdown). A small model — an embedding, whose gradient is
tf.IndexedSlices, and a dense layer — trains a few SGD steps, each rank on its slice of
every global batch: once with raw variables and DistributedGradientTape ("tape"), once as a
Keras model with DistributedOptimizer ("keras"). Every rank also trains the reference itself
(one process, whole global batches, gradients made dense) and compares the variables.
Prints `ZENTEST {"check": "<tape|keras>.<scheme>[.variant]", "ok": ..., "error": ...}`.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from rank_report import add_checkout_package, train_schemes  # noqa: E402

add_checkout_package()

import zen.tensorflow as hvd  # noqa: E402

VOCAB, DIM, CLASSES = 64, 8, 4
GLOBAL_BATCH, LENGTH, STEPS, LR = 8, 6, 4, 0.5


def global_batch(step):
    """Zipf-like token ids: frequent rows repeat within and across ranks."""
    rs = np.random.RandomState(1000 + step)
    p = 1.0 / np.arange(1, VOCAB + 1)
    ids = rs.choice(VOCAB, size=(GLOBAL_BATCH, LENGTH), p=p / p.sum())
    labels = rs.randint(0, CLASSES, size=GLOBAL_BATCH)
    return tf.constant(ids, tf.int64), tf.constant(labels, tf.int64)


def local_batch(step):
    ids, labels = global_batch(step)
    size, rank = hvd.size(), hvd.rank()
    local = GLOBAL_BATCH // size
    return ids[rank * local:(rank + 1) * local], labels[rank * local:(rank + 1) * local]


def initial_values():
    rs = np.random.RandomState(7)
    return [rs.normal(size=(VOCAB, DIM)).astype(np.float32),
            rs.normal(size=(DIM, CLASSES)).astype(np.float32) * 0.5,
            np.zeros(CLASSES, np.float32)]


def loss_fn(variables, ids, labels):
    emb, w, b = variables
    hidden = tf.tanh(tf.reduce_mean(tf.nn.embedding_lookup(emb, ids), axis=1))
    logits = tf.matmul(hidden, w) + b
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))


def sgd(variables, grads):
    for v, g in zip(variables, grads):
        v.assign_sub(LR * tf.convert_to_tensor(g))


def reference():
    variables = [tf.Variable(v) for v in initial_values()]
    for step in range(STEPS):
        ids, labels = global_batch(step)
        with tf.GradientTape() as tape:
            loss = loss_fn(variables, ids, labels)
        sgd(variables, tape.gradient(loss, variables))
    return [v.numpy() for v in variables]


def train_tape(**kwargs):
    # Different starting points on every rank: broadcast_variables makes them equal.
    variables = [tf.Variable(v + hvd.rank()) for v in initial_values()]
    hvd.broadcast_variables(variables, root_rank=0)
    for step in range(STEPS):
        ids, labels = local_batch(step)
        with tf.GradientTape() as tape:
            loss = loss_fn(variables, ids, labels)
        tape = hvd.DistributedGradientTape(tape, **kwargs)
        grads = tape.gradient(loss, variables)
        want_sparse = not kwargs.get("sparse_as_dense", False) and hvd.size() > 1
        assert isinstance(grads[0], tf.IndexedSlices) == want_sparse, type(grads[0])
        sgd(variables, grads)
    return [v.numpy() for v in variables]


class Model(keras.Model):
    def __init__(self):
        super().__init__()
        self.emb = keras.layers.Embedding(VOCAB, DIM)
        self.fc = keras.layers.Dense(CLASSES)

    def call(self, ids):
        return self.fc(keras.ops.tanh(keras.ops.mean(self.emb(ids), axis=1)))


def train_keras(**kwargs):
    model = Model()
    model(global_batch(0)[0])
    values = initial_values()
    model.emb.embeddings.assign(values[0] + hvd.rank())
    model.fc.kernel.assign(values[1])
    model.fc.bias.assign(values[2])
    hvd.broadcast_variables(model.variables, root_rank=0)
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(LR), **kwargs)
    loss_obj = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for step in range(STEPS):
        ids, labels = local_batch(step)
        with tf.GradientTape() as tape:
            loss = loss_obj(labels, model(ids))
        grads = tape.gradient(loss, model.trainable_variables)
        assert isinstance(grads[0], tf.IndexedSlices), type(grads[0])
        opt.apply_gradients(zip(grads, model.trainable_variables))
    return [model.emb.embeddings.numpy(), model.fc.kernel.numpy(), model.fc.bias.numpy()]


def topk_all():
    return hvd.Compression.topk(1.0, min_size=1)


def compare(got, want, tol=2e-5):
    for name, g, w in zip(("embedding", "kernel", "bias"), got, want):
        diff = float(np.abs(g - w).max())
        assert diff < tol, "%s differs from the one-process reference by %g" % (name, diff)


def variants(scheme, want):
    """This scheme's checks (rank_report.train_schemes): the tape and Keras trainings, and
    for zen sparse_as_dense, fp16 compression and Compression.topk(1.0) (the dense gradients
    through the sparse allreduce, everything sent); each matches the one-process reference
    and, but with sparse_as_dense, ran its allreduces through the scheme."""
    def variant(label, fn):
        def run():
            before = hvd.stats()["buckets_by_scheme"].get(scheme, 0)
            fn()
            used = hvd.stats()["buckets_by_scheme"]
            if hvd.size() > 1 and "sparse_as_dense" not in label:
                assert used.get(scheme, 0) - before >= STEPS, \
                    "scheme %s not used: %s" % (scheme, used)
        return label, run
    out = [variant("tape.%s" % scheme, lambda: compare(train_tape(), want)),
           variant("keras.%s" % scheme, lambda: compare(train_keras(), want))]
    if scheme == "zen":
        out += [
            variant("tape.zen.sparse_as_dense",
                    lambda: compare(train_tape(sparse_as_dense=True), want)),
            variant("tape.zen.fp16",
                    lambda: compare(train_tape(compression=hvd.Compression.fp16), want, 1e-2)),
            variant("tape.zen.topk1",
                    lambda: compare(train_tape(compression=topk_all()), want)),
            variant("keras.zen.topk1",
                    lambda: compare(train_keras(compression=topk_all()), want))]
    return out


if __name__ == "__main__":
    sys.exit(train_schemes(hvd, sys.argv[1:], reference, variants))
