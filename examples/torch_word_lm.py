"""A word-level LSTM language model with a sparse embedding, trained data-parallel with
zen.torch on real English text: the fortune cookies Debian's `fortunes` package ships
(/usr/share/games/fortunes, about 1.3 MB; tools/setup installs it).

    PYTHONPATH=bindings/python tools/zenrun -np 2 /usr/bin/python3 examples/torch_word_lm.py
    ... examples/torch_word_lm.py --steps 100 --schemes zen,agsparse,dense --vocab 20000
    ... examples/torch_word_lm.py --topk 0.01 --schemes zen,hc,agsparse

The vocabulary is frequency-sorted (row 0 is the most frequent word), so the embedding's
gradient rows are Zipf-skewed, as in real models. The embedding (nn.Embedding(sparse=True))
is synchronized through Zen's sparse allreduce, the LSTM and the decoder through the dense
allreduce. For each scheme (ZEN_SCHEME, set before hvd.init; the daemon is restarted between
schemes) the same model trains the same steps from the same start, each rank on its own
slice of the text; rank 0 prints the loss per step and, at the end, a table per scheme: the
time the embedding's synchronization took (the daemon's phases, without negotiation and
queueing), the dense layers' time, the wall time per step, and the bytes each rank sent and
received (zen stats). With --topk RATIO each scheme also runs with
compression=hvd.Compression.topk(RATIO) (row "<scheme>+topk"): the LSTM's and the decoder's
gradients then send their top RATIO of elements through the scheme's sparse allreduce (Deep
Gradient Compression with error feedback) instead of the dense allreduce.
"""

import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
# The checkout's package unless PYTHONPATH or an installation (pip install .) provides zen.
sys.path.append(os.path.join(os.path.dirname(HERE), "bindings", "python"))
sys.path.insert(0, HERE)

import zen.torch as hvd  # noqa: E402
from example_report import print_word_lm_table, word_lm_result, word_lm_setup  # noqa: E402
from lm_data import encode, windows  # noqa: E402


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
    return windows(ids[:len(ids) // batch * batch].view(batch, -1), bptt)


def train(scheme, args, ids, vocab_size, topk=None):
    os.environ["ZEN_SCHEME"] = scheme
    hvd.init()
    torch.manual_seed(args.seed)
    model = WordLM(vocab_size, args.dim, args.hidden)
    compression = hvd.Compression.topk(topk) if topk is not None else hvd.Compression.none
    label = scheme + ("+topk" if topk is not None else "")
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=args.lr),
                                   named_parameters=model.named_parameters(),
                                   compression=compression)
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
                  (label, step, mean_loss, torch.exp(torch.tensor(mean_loss)).item(),
                   rows[-1], vocab_size), flush=True)
    elapsed = time.time() - start
    stats = hvd.stats()
    result = word_lm_result(label, stats, "allreduce.emb.weight", args.steps, mean_loss,
                            elapsed, rows)
    # Every rank's bytes (they differ: the busiest rank bounds the step).
    traffic = hvd.allgather(torch.tensor([[float(stats["bytes_sent"]),
                                           float(stats["bytes_received"])]]), name="traffic")
    result["per_rank"] = traffic.tolist()
    hvd.shutdown()
    return result


def add_arguments(parser):
    parser.add_argument("--topk", type=float, default=None, metavar="RATIO",
                        help="also run each scheme with compression=Compression.topk(RATIO)")


def main():
    args, schemes, tokens, vocab = word_lm_setup(__doc__.split("\n\n")[0], add_arguments)
    torch.set_num_threads(1)
    ids = torch.tensor(encode(tokens, vocab), dtype=torch.int64)
    ratios = [None] + ([args.topk] if args.topk is not None else [])
    results = [train(scheme, args, ids, len(vocab), topk)
               for scheme in schemes for topk in ratios]
    print_word_lm_table(results, args, tokens, vocab)  # on rank 0


if __name__ == "__main__":
    main()
