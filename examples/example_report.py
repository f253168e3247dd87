"""What the examples (torch_word_lm.py, tf_word_lm.py, torch_elastic_word_lm.py,
torch_deepfm.py) share and need no framework for: the --schemes list (one daemon start per
scheme), whether this process is rank 0, and the daemon's stats (zen.torch.stats() /
zen.tensorflow.stats(), a dict) read as communication time and bytes per step, with the
word-LM examples' options, text and table. Standard library only."""

import argparse
import os

from lm_data import FORTUNES, build_vocab, read_corpus

WAITING = ("NEGOTIATE", "QUEUE")  # time spent waiting for other ranks, not communicating


def scheme_list(parser, args):
    """args.schemes (comma-separated ZEN_SCHEME values) as a list. Under MPI only one: MPI_Init
    runs once per process, so the daemon cannot start a second time."""
    schemes = args.schemes.split(",")
    if len(schemes) > 1 and "OMPI_COMM_WORLD_RANK" in os.environ and "ZEN_RANK" not in os.environ:
        parser.error("under MPI the daemon cannot start twice in one process (MPI_Init runs "
                     "once): one scheme per launch (--schemes zen), or launch over TCP")
    return schemes


def is_rank0():
    """Whether this process is rank 0 of its launch (zenrun or mpirun; a job of one without a
    launcher); readable after hvd.shutdown()."""
    return int(os.environ.get("ZEN_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0"))) == 0


def comm_seconds(tensor_stats):
    """One tensor's time in the daemon's phases, without negotiation and queueing."""
    return sum(s for phase, s in tensor_stats["phase_seconds"].items() if phase not in WAITING)


# ---- the word-level language models (torch_word_lm.py, tf_word_lm.py) ----

def word_lm_setup(description, add_arguments=None):
    """The word-LM examples' command line and text: (the options, the schemes, the corpus's
    tokens, the frequency-sorted vocabulary {word: id}). add_arguments(parser) adds an
    example's own options."""
    parser = argparse.ArgumentParser(description=description)
    if add_arguments is not None:
        add_arguments(parser)
    parser.add_argument("--schemes", default="zen,hc,agsparse,blocks,dense",
                        help="comma-separated ZEN_SCHEME values to compare")
    add_word_lm_arguments(parser)
    args = parser.parse_args()
    schemes = scheme_list(parser, args)
    return (args, schemes) + word_lm_text(args)


def add_word_lm_arguments(parser, batch=8, batch_help="streams per rank"):
    """The model's, the text's and the training's options every word-LM example has."""
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--vocab", type=int, default=10000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--batch", type=int, default=batch, help=batch_help)
    parser.add_argument("--bptt", type=int, default=20)
    parser.add_argument("--lr", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--print-every", type=int, default=10)
    parser.add_argument("--corpus", default=FORTUNES)


def word_lm_text(args):
    """(the corpus's tokens, the frequency-sorted vocabulary {word: id}) of args."""
    tokens = read_corpus(args.corpus)
    return tokens, build_vocab(tokens, args.vocab)


def word_lm_result(scheme, stats, emb, steps, loss, seconds, rows):
    """One scheme's row of the table from this rank's stats after `steps` steps: emb is the
    embedding's allreduce name in stats["tensors"], every other allreduce but the loss's is
    a dense layer (sent dense, or top-k compressed through the sparse allreduce); rows: the
    embedding rows each step touched. scheme is the row's label."""
    emb_stats = stats["tensors"][emb]
    dense = [t for name, t in stats["tensors"].items()
             if name.startswith("allreduce.") and name not in (emb, "allreduce.loss")]
    return {
        "scheme": scheme, "loss": loss, "seconds": seconds,
        "emb_ms": 1000 * comm_seconds(emb_stats) / steps,
        "emb_bytes": (emb_stats["bytes_sent"] + emb_stats["bytes_received"]) / steps,
        "dense_ms": 1000 * sum(comm_seconds(t) for t in dense) / steps,
        "dense_bytes": sum(t["bytes_sent"] + t["bytes_received"] for t in dense) / steps,
        "rows": sum(rows) / len(rows),
    }


def print_word_lm_table(results, args, tokens, vocab):
    """Rank 0's table (the other ranks print nothing), a row per scheme; each result's
    "per_rank" holds every rank's [bytes sent, bytes received]."""
    if not is_rank0():
        return
    print("\n%d tokens, vocabulary %d (frequency-sorted), %d steps, %d ranks x %d x %d tokens"
          % (len(tokens), len(vocab), args.steps, len(results[0]["per_rank"]), args.batch,
             args.bptt))
    print("%-14s %7s %9s %13s %13s %13s %13s %9s  %s" %
          ("scheme", "loss", "rows/step", "emb ms/step", "emb KB/step", "dense ms/step",
           "dense KB/step", "ms/step", "bytes sent+received per rank (MB)"))
    for r in results:
        per_rank = " ".join("%.2f" % ((s + v) / 1e6) for s, v in r["per_rank"])
        print("%-14s %7.3f %9.0f %13.3f %13.1f %13.3f %13.1f %9.1f  %s" %
              (r["scheme"], r["loss"], r["rows"], r["emb_ms"], r["emb_bytes"] / 1024,
               r["dense_ms"], r["dense_bytes"] / 1024, 1000 * r["seconds"] / args.steps,
               per_rank))
