"""The word-level LSTM language model of torch_word_lm.py trained elastically: zen.torch.elastic's
run, TorchState and ElasticSampler, so that workers may fail, join or leave and the job goes on.

    PYTHONPATH=bindings/python tools/zenrun -np 2 /usr/bin/python3 examples/torch_elastic_word_lm.py
    PYTHONPATH=bindings/python tools/zenrun -np 3 --min-np 2 --max-np 3 \\
        /usr/bin/python3 examples/torch_elastic_word_lm.py --die-worker 1 --die-step 25

Samples are windows of --bptt + 1 tokens of the fortunes text (lm_data.py); a global step
trains on a global batch of --batch windows, shuffled per epoch by ElasticSampler, each rank
on its --batch / size() of them (--batch must divide by every size the job may have: 12 or 24
for 1, 2 or 3 ranks). The loss is summed over the global batch / --batch and the gradients
summed over the ranks (op=Sum), so a step is the same step whatever the number of ranks, up to
the order of float32 sums: after a worker dies, the survivors continue the loss curve of the
run without the failure. Each window starts from a zero LSTM state (torch_word_lm.py carries it
across windows of a stream, but a stream's state would live on the rank that owns it, and a
reset re-shards the samples). The embedding's gradients are sparse (nn.Embedding(sparse=True))
and go through Zen's sparse allreduce (ZEN_SCHEME, default zen), the rest dense.

TorchState keeps the model, the optimizer, the sampler, the epoch and the step; state.commit()
every --commit-every steps and at each epoch's end copies them in host memory and asks zenrun
whether workers changed. When a worker dies the survivors' next collective fails, they restore
the last commit, join zenrun's next round (new ranks and size), get rank 0's state, re-shard
the epoch's remaining samples and redo the steps since that commit.

--die-worker I --die-step K: worker number I of an elastic zenrun (ZEN_ELASTIC_WORKER's last
field; numbers are never reused, so it dies once) exits 1 right before its step K, without
cleanup, as a crash; ignored outside an elastic zenrun.

Rank 0 prints the loss per step, the time a commit took against a step, after a recovery the
times of its phases (wall-clock stamps: the dying worker prints its own), and at the end a
SHA-256 prefix of every rank's parameters.
"""

import argparse
import hashlib
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
# The checkout's package unless PYTHONPATH or an installation (pip install .) provides zen.
sys.path.append(os.path.join(os.path.dirname(HERE), "bindings", "python"))
sys.path.insert(0, HERE)

import zen.torch as hvd  # noqa: E402
from example_report import add_word_lm_arguments, word_lm_text  # noqa: E402
from lm_data import encode  # noqa: E402
from torch_word_lm import WordLM  # noqa: E402


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_word_lm_arguments(parser, batch=24, batch_help="windows per global step (all ranks)")
    parser.add_argument("--commit-every", type=int, default=10, help="steps between commits")
    parser.add_argument("--die-worker", type=int, default=-1, metavar="I")
    parser.add_argument("--die-step", type=int, default=-1, metavar="K")
    parser.set_defaults(steps=60)
    return parser.parse_args()


def worker_number():
    """This worker's number under an elastic zenrun, else None."""
    worker = os.environ.get("ZEN_ELASTIC_WORKER")
    return None if worker is None else int(worker.rsplit("/", 1)[1])


def die_if_asked(args, step):
    if worker_number() == args.die_worker and step == args.die_step:
        print("DYING worker %d before step %d at t=%.6f" % (args.die_worker, step, time.time()),
              flush=True)
        os._exit(1)


def windows_of(ids, bptt, batch):
    """The samples: consecutive (bptt + 1)-token windows (input and target shifted by one),
    as many as a whole number of global batches holds, so that every epoch has the same
    global batches for any number of ranks that divides batch."""
    count = (len(ids) - 1) // bptt // batch * batch
    return ids[:count * bptt + 1].unfold(0, bptt + 1, bptt)[:count]


class Clock:
    """Wall-clock stamps (time.time(): comparable across this machine's processes) of the
    elastic events on this rank, and the commits' and steps' durations."""

    def __init__(self):
        self.commits, self.steps = [], []
        self.error = self.reset = self.synced = None

    def commit(self, state):
        start = time.perf_counter()
        state.commit()
        self.commits.append(time.perf_counter() - start)

    def on_error(self):
        self.error = time.time()

    def on_reset(self):
        self.reset = time.time()

    def report_recovery(self, step):
        """Rank 0, after the first step since a reset that followed a failure."""
        now = time.time()
        print("[elastic] recovered: error at t=%.6f, reset at t=%.6f, synced at t=%.6f, step %d "
              "at t=%.6f (restore+shutdown+rendezvous+init %.3f s, sync %.3f s, step %.3f s)" %
              (self.error, self.reset, self.synced, step, now, self.reset - self.error,
               self.synced - self.reset, now - self.synced), flush=True)
        self.error = None


def train(args, samples, vocab_size):
    hvd.init()
    torch.manual_seed(args.seed)
    model = WordLM(vocab_size, args.dim, args.hidden)
    # Sums: each rank's loss is already divided by the global batch.
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=args.lr),
                                   named_parameters=model.named_parameters(), op=hvd.Sum)
    sampler = hvd.elastic.ElasticSampler(range(len(samples)), shuffle=True, seed=args.seed)
    state = hvd.elastic.TorchState(model, opt, sampler=sampler, epoch=0, step=0)
    clock = Clock()
    state.register_reset_callbacks([clock.on_reset])

    @hvd.elastic.run
    def loop(state):
        clock.synced = time.time()
        try:
            epochs(state, args, samples, clock)
        except hvd.elastic.HorovodInternalError:
            clock.on_error()  # for the recovery's report; run restores and resets
            raise

    loop(state)
    report(state, clock)
    hvd.shutdown()


def epochs(state, args, samples, clock):
    """Trains from state's epoch and step to args.steps, committing every args.commit_every
    steps and at each epoch's end."""
    if args.batch % hvd.size():
        raise ValueError("--batch %d does not divide by %d ranks" % (args.batch, hvd.size()))
    local = args.batch // hvd.size()
    while state.step < args.steps:
        indices = list(state.sampler)
        for i in range(len(indices) // local):
            if state.step == args.steps:
                return
            die_if_asked(args, state.step + 1)
            loss, seconds = step(state, samples[indices[i * local:(i + 1) * local]], args)
            state.sampler.record_batch(i, local)
            state.step += 1
            clock.steps.append(seconds)
            if hvd.rank() == 0 and clock.error is not None:
                clock.report_recovery(state.step)
            if hvd.rank() == 0 and (state.step % args.print_every == 0 or state.step == 1):
                print("[elastic] step %4d  loss %.6f  ranks %d" % (state.step, loss, hvd.size()),
                      flush=True)
            if state.step % args.commit_every == 0:
                clock.commit(state)
        state.epoch += 1
        state.sampler.set_epoch(state.epoch)
        clock.commit(state)


def step(state, batch, args):
    """One global step on this rank's windows; the global batch's mean loss."""
    start = time.perf_counter()
    model, opt = state.model, state.optimizer
    x, y = batch[:, :-1], batch[:, 1:]
    opt.zero_grad()
    logits, _ = model(x)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             y.reshape(-1), reduction="sum") / (args.batch *
                                                                                args.bptt)
    loss.backward()
    # Clip the summed gradients: wait for them first (reading p.grad before that races with
    # the daemon writing it), then step without synchronizing again.
    opt.synchronize()
    torch.nn.utils.clip_grad_norm_(model.lstm.parameters(), 0.25)
    with opt.skip_synchronize():
        opt.step()
    mean_loss = hvd.allreduce(loss.detach(), name="loss", op=hvd.Sum).item()
    return mean_loss, time.perf_counter() - start


def report(state, clock):
    """The commit's cost against a step's, and every rank's parameters' digest (rank 0)."""
    digest = hashlib.sha256()
    for p in state.model.parameters():
        digest.update(p.detach().numpy().tobytes())
    digests = hvd.allgather_object(digest.hexdigest()[:16], name="digests")
    if hvd.rank() != 0:
        return
    step_ms = 1000 * statistics.median(clock.steps)
    commit_ms = 1000 * statistics.median(clock.commits) if clock.commits else 0.0
    print("[elastic] %d steps on %d ranks; median step %.2f ms, median commit %.3f ms over %d "
          "commits (%.1f %% of a step)" % (state.step, hvd.size(), step_ms, commit_ms,
                                           len(clock.commits), 100 * commit_ms / step_ms))
    print("[elastic] parameter sha256 per rank: %s (%s)" %
          (" ".join(digests), "identical" if len(set(digests)) == 1 else "DIFFERENT"), flush=True)


def main():
    args = arguments()
    torch.set_num_threads(1)
    tokens, vocab = word_lm_text(args)
    ids = torch.tensor(encode(tokens, vocab), dtype=torch.int64)
    train(args, windows_of(ids, args.bptt, args.batch), len(vocab))


if __name__ == "__main__":
    main()
