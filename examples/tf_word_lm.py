"""The word-level LSTM language model of torch_word_lm.py in TensorFlow, trained data-parallel
with zen.tensorflow on the same text: the fortune cookies of Debian's `fortunes` package,
with the same frequency-sorted vocabulary (lm_data.py).

    PYTHONPATH=bindings/python tools/zenrun -np 2 .venv-tf/bin/python examples/tf_word_lm.py
    ... examples/tf_word_lm.py --steps 100 --schemes zen,agsparse,dense --vocab 20000

The embedding is a tf.Variable read with tf.nn.embedding_lookup, so its gradient is a
tf.IndexedSlices (the rows the batch touched) and DistributedGradientTape sends it through
Zen's sparse allreduce; the LSTM (written out in TensorFlow ops, torch.nn.LSTM's gates and
initialization) and the decoder go through the dense allreduce. One training step is one
tf.function. For each scheme (ZEN_SCHEME, set before hvd.init; the daemon is restarted
between schemes) the same model trains the same steps from the same start, each rank on its
own slice of the text; rank 0 prints the loss per step and, at the end, the same table as
torch_word_lm.py: the embedding's synchronization time (the daemon's phases, without
negotiation and queueing), the dense layers' time, and the bytes per step and per rank (zen
stats).
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # no start-up banner per rank

import tensorflow as tf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# The checkout's package unless PYTHONPATH or an installation (pip install .) provides zen.
sys.path.append(os.path.join(os.path.dirname(HERE), "bindings", "python"))
sys.path.insert(0, HERE)

import zen.tensorflow as hvd  # noqa: E402
from example_report import print_word_lm_table, word_lm_result, word_lm_setup  # noqa: E402
from lm_data import encode, windows  # noqa: E402

# DistributedGradientTape names the gradients by their position: the embedding is first.
EMB = "allreduce.DistributedGradientTape.0"


class WordLM(tf.Module):
    """Embedding -> one LSTM layer -> linear decoder over the vocabulary."""

    def __init__(self, vocab, dim, hidden, seed):
        super().__init__()
        rng = tf.random.Generator.from_seed(seed)

        def uniform(shape, fan):
            bound = 1.0 / fan ** 0.5
            return tf.Variable(rng.uniform(shape, -bound, bound))

        self.emb = tf.Variable(rng.normal((vocab, dim)), name="emb")
        self.w_input = uniform((dim, 4 * hidden), hidden)     # gates i, f, g, o
        self.w_hidden = uniform((hidden, 4 * hidden), hidden)
        self.b_input = uniform((4 * hidden,), hidden)      # torch.nn.LSTM's b_ih and b_hh
        self.b_hidden = uniform((4 * hidden,), hidden)
        self.w_decoder = uniform((hidden, vocab), hidden)
        self.b_decoder = uniform((vocab,), hidden)
        self.hidden = hidden
        # Gradients in this order (the embedding first: EMB).
        self.params = [self.emb, self.w_input, self.w_hidden, self.b_input, self.b_hidden,
                       self.w_decoder, self.b_decoder]

    def __call__(self, ids, state):
        h, c = state
        x = tf.nn.embedding_lookup(self.emb, ids)               # batch x bptt x dim
        gates_in = tf.einsum("btd,dg->btg", x, self.w_input) + self.b_input + self.b_hidden
        outputs = []
        for t in range(ids.shape[1]):
            i, f, g, o = tf.split(gates_in[:, t] + h @ self.w_hidden, 4, axis=1)
            c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
            h = tf.sigmoid(o) * tf.tanh(c)
            outputs.append(h)
        out = tf.stack(outputs, axis=1)                          # batch x bptt x hidden
        return tf.einsum("bth,hv->btv", out, self.w_decoder) + self.b_decoder, (h, c)


def batches(ids, batch, bptt):
    """(input, target) windows over `batch` parallel streams of this rank's text, forever."""
    return windows(tf.reshape(ids[:len(ids) // batch * batch], (batch, -1)), bptt)


def train(scheme, args, ids, vocab_size):
    os.environ["ZEN_SCHEME"] = scheme
    hvd.init()
    model = WordLM(vocab_size, args.dim, args.hidden, args.seed)
    hvd.broadcast_variables(model.params, root_rank=0)

    @tf.function
    def step(x, y, state):
        with tf.GradientTape() as tape:
            logits, state = model(x, state)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.params)  # averaged over all ranks
        # Clip the LSTM's averaged gradients, as torch_word_lm.py does; then plain SGD (the
        # embedding's rows through scatter_sub).
        clipped, _ = tf.clip_by_global_norm(grads[1:5], 0.25)
        grads = grads[:1] + clipped + grads[5:]
        for v, g in zip(model.params, grads):
            if isinstance(g, tf.IndexedSlices):
                v.scatter_sub(tf.IndexedSlices(args.lr * g.values, g.indices))
            else:
                v.assign_sub(args.lr * g)
        rows = tf.size(tf.unique(tf.reshape(x, [-1])).y)
        return loss, state, rows

    # This rank's slice of the text.
    share = len(ids) // hvd.size()
    mine = ids[hvd.rank() * share:(hvd.rank() + 1) * share]
    data = batches(mine, args.batch, args.bptt)
    state = (tf.zeros((args.batch, args.hidden)), tf.zeros((args.batch, args.hidden)))
    start = time.time()
    rows = []
    for n in range(1, args.steps + 1):
        x, y = next(data)
        loss, state, touched = step(x, y, state)
        rows.append(int(touched))
        mean_loss = float(hvd.allreduce(loss, name="loss"))
        if hvd.rank() == 0 and (n % args.print_every == 0 or n == 1):
            print("[%s] step %4d  loss %.3f  ppl %8.1f  rows %d/%d" %
                  (scheme, n, mean_loss, float(tf.exp(mean_loss)), rows[-1], vocab_size),
                  flush=True)
    elapsed = time.time() - start
    stats = hvd.stats()
    result = word_lm_result(scheme, stats, EMB, args.steps, mean_loss, elapsed, rows)
    # Every rank's bytes (they differ: the busiest rank bounds the step).
    traffic = hvd.allgather(tf.constant([[float(stats["bytes_sent"]),
                                          float(stats["bytes_received"])]], tf.float64),
                            name="traffic")
    result["per_rank"] = traffic.numpy().tolist()
    hvd.shutdown()
    return result


def main():
    args, schemes, tokens, vocab = word_lm_setup(__doc__.split("\n\n")[0])
    tf.config.threading.set_intra_op_parallelism_threads(1)
    ids = tf.constant(encode(tokens, vocab), dtype=tf.int32)
    results = [train(scheme, args, ids, len(vocab)) for scheme in schemes]
    print_word_lm_table(results, args, tokens, vocab)  # on rank 0


if __name__ == "__main__":
    main()
