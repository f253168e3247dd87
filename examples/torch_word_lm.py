"""A word-level LSTM language model with a sparse embedding, trained data-parallel with
zen.torch on real English text: the fortune cookies Debian's `fortunes` package ships
(/usr/share/games/fortunes, about 1.3 MB; tools/setup installs it).

    PYTHONPATH=bindings/python tools/zenrun -np 2 /usr/bin/python3 examples/torch_word_lm.py
    ... examples/torch_word_lm.py --steps 100 --schemes zen,agsparse,dense --vocab 20000

The vocabulary is frequency-sorted (row 0 is the most frequent word), so the embedding's
gradient rows are Zipf-skewed, as in real models. The embedding (nn.Embedding(sparse=True))
is synchronized through Zen's sparse allreduce, the LSTM and the decoder through the dense
allreduce. For each scheme (ZEN_SCHEME, set before hvd.init; the daemon is restarted between
schemes) the same model trains the same steps from the same start, each rank on its own
slice of the text; rank 0 prints the loss per step and, at the end, a table per scheme: the
time the embedding's synchronization took (the daemon's phases, without negotiation and
queueing), the dense layers' time, and the bytes each rank sent and received (zen stats).
"""

import argparse
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "bindings", "python"))
sys.path.insert(0, HERE)

import zen.torch as hvd  # noqa: E402
from lm_data import FORTUNES, build_vocab, encode, read_corpus  # noqa: E402

WAITING = ("NEGOTIATE", "QUEUE")  # time spent waiting for other ranks, not communicating


class WordLM(torch.nn.Module):
    def __init__(self, vocab, dim, hidden):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim, sparse=True)
        self.lstm = torch.nn.LSTM(dim, hidden, batch_first=True)
        self.decoder = torch.nn.Linear(hidden, vocab)

    def forward(self, ids, state=None):
        out, state = self.lstm(self.emb(ids), state)
        return self.decoder(out), state


def batches(ids, batch, bptt):
    """(input, target) windows over `batch` parallel streams of this rank's text, forever."""
    streams = ids[:len(ids) // batch * batch].view(batch, -1)
    while True:
        for at in range(0, streams.shape[1] - 1 - bptt, bptt):
            yield streams[:, at:at + bptt], streams[:, at + 1:at + 1 + bptt]


def comm_seconds(tensor_stats):
    return sum(s for phase, s in tensor_stats["phase_seconds"].items() if phase not in WAITING)


def train(scheme, args, ids, vocab_size):
    os.environ["ZEN_SCHEME"] = scheme
    hvd.init()
    torch.manual_seed(args.seed)
    model = WordLM(vocab_size, args.dim, args.hidden)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=args.lr),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    # This rank's slice of the text.
    share = len(ids) // hvd.size()
    mine = ids[hvd.rank() * share:(hvd.rank() + 1) * share]
    data = batches(mine, args.batch, args.bptt)
    state = None
    start = time.time()
    rows = []
    for step in range(1, args.steps + 1):
        x, y = next(data)
        if state is not None:
            state = tuple(s.detach() for s in state)
        opt.zero_grad()
        logits, state = model(x, state)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab_size), y.reshape(-1))
        loss.backward()
        rows.append(x.unique().numel())
        # Clip the averaged gradients: wait for them first (reading p.grad before that races
        # with the daemon writing it), then step without synchronizing again.
        opt.synchronize()
        torch.nn.utils.clip_grad_norm_(model.lstm.parameters(), 0.25)
        with opt.skip_synchronize():
            opt.step()
        mean_loss = hvd.allreduce(loss.detach(), name="loss").item()
        if hvd.rank() == 0 and (step % args.print_every == 0 or step == 1):
            print("[%s] step %4d  loss %.3f  ppl %8.1f  rows %d/%d" %
                  (scheme, step, mean_loss, torch.exp(torch.tensor(mean_loss)).item(),
                   rows[-1], vocab_size), flush=True)
    elapsed = time.time() - start
    stats = hvd.stats()
    emb = stats["tensors"]["allreduce.emb.weight"]
    dense = [t for name, t in stats["tensors"].items()
             if name.startswith("allreduce.") and name not in ("allreduce.emb.weight",
                                                               "allreduce.loss")]
    result = {
        "scheme": scheme, "loss": mean_loss, "seconds": elapsed,
        "emb_ms": 1000 * comm_seconds(emb) / args.steps,
        "emb_bytes": (emb["bytes_sent"] + emb["bytes_received"]) / args.steps,
        "dense_ms": 1000 * sum(comm_seconds(t) for t in dense) / args.steps,
        "dense_bytes": sum(t["bytes_sent"] + t["bytes_received"] for t in dense) / args.steps,
        "sent": stats["bytes_sent"], "received": stats["bytes_received"],
        "emb_scheme": emb["last_scheme"], "rows": sum(rows) / len(rows),
    }
    # Every rank's bytes (they differ: the busiest rank bounds the step).
    traffic = hvd.allgather(torch.tensor([[float(stats["bytes_sent"]),
                                           float(stats["bytes_received"])]]), name="traffic")
    result["per_rank"] = traffic.tolist()
    hvd.shutdown()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schemes", default="zen,hc,agsparse,blocks,dense",
                        help="comma-separated ZEN_SCHEME values to compare")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--vocab", type=int, default=10000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8, help="streams per rank")
    parser.add_argument("--bptt", type=int, default=20)
    parser.add_argument("--lr", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--print-every", type=int, default=10)
    parser.add_argument("--corpus", default=FORTUNES)
    args = parser.parse_args()
    torch.set_num_threads(1)

    schemes = args.schemes.split(",")
    if len(schemes) > 1 and "OMPI_COMM_WORLD_RANK" in os.environ and "ZEN_RANK" not in os.environ:
        parser.error("under MPI the daemon cannot start twice in one process (MPI_Init runs "
                     "once): one scheme per launch (--schemes zen), or launch over TCP")
    tokens = read_corpus(args.corpus)
    vocab = build_vocab(tokens, args.vocab)
    ids = torch.tensor(encode(tokens, vocab), dtype=torch.int64)
    results = []
    for scheme in schemes:
        results.append(train(scheme, args, ids, len(vocab)))
    if int(os.environ.get("ZEN_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0"))) != 0:
        return 0
    print("\n%d tokens, vocabulary %d (frequency-sorted), %d steps, %d ranks x %d x %d tokens"
          % (len(tokens), len(vocab), args.steps, len(results[0]["per_rank"]), args.batch,
             args.bptt))
    print("%-9s %7s %9s %13s %13s %13s %13s  %s" %
          ("scheme", "loss", "rows/step", "emb ms/step", "emb KB/step", "dense ms/step",
           "dense KB/step", "bytes sent+received per rank (MB)"))
    for r in results:
        per_rank = " ".join("%.2f" % ((s + v) / 1e6) for s, v in r["per_rank"])
        print("%-9s %7.3f %9.0f %13.3f %13.1f %13.3f %13.1f  %s" %
              (r["scheme"], r["loss"], r["rows"], r["emb_ms"], r["emb_bytes"] / 1024,
               r["dense_ms"], r["dense_bytes"] / 1024, per_rank))
    return 0


if __name__ == "__main__":
    sys.exit(main())
