"""A DeepFM-style click-through-rate model with sparse embeddings, trained data-parallel with
zen.torch on synthetic Zipf-distributed categorical features.

    PYTHONPATH=bindings/python tools/zenrun -np 4 /usr/bin/python3 examples/torch_deepfm.py
    ... examples/torch_deepfm.py --steps 400 --schemes zen,agsparse,dense --batch-size 4096

The data set is generated the same way on every rank from --seed: each sample has one id in
each of several categorical fields (cardinalities 10^3 .. 10^6, --cardinalities), drawn
Zipf(s) over a random permutation of the field's ids, so a few ids are hot and most are
rarely seen, as in real click logs. The click label is drawn from a hidden logistic model:
a bias, a weight per id, and low-rank interactions between a few pairs of fields. The
oracle's test logloss and AUC (the hidden model's own probabilities) bound what any model
can reach.

The model is DeepFM (Guo et al., 2017): one shared embedding table over all fields (each
field's ids offset into it) gives the second-order FM term and the input of a small MLP, a
second one-column table the first-order term. Both tables are nn.Embedding(sparse=True), so
their gradients are sparse and DistributedOptimizer sends them through Zen's sparse
allreduce; the MLP's through the dense allreduce. Every step consumes one global batch of
--batch-size samples (one pass over --samples, by default exactly steps x batch-size, so
no sample is seen twice) and each rank trains on its own 1/size shard of it, so the run
follows the same trajectory on any number of ranks. Adagrad (which takes sparse gradients)
updates every parameter.

For each scheme (--schemes, default $ZEN_SCHEME or zen; the daemon is restarted between
schemes) the same model trains from the same start. Rank 0 prints every --print-every steps
the mean loss, the gradients' communication time per step (the daemon's phases without
negotiation and queueing), the bytes rank 0 sent and received for them per step (zen
stats) and the embedding rows the step touched; at the end the logloss and AUC on the first
--test-samples training samples and on the test set before and after training, a SHA-256
prefix of every rank's parameters (they must agree), and a table per scheme with every
rank's gradient bytes per step.
"""

import argparse
import hashlib
import math
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
# The checkout's package unless PYTHONPATH or an installation (pip install .) provides zen.
sys.path.append(os.path.join(os.path.dirname(HERE), "bindings", "python"))
sys.path.insert(0, HERE)

import zen.torch as hvd  # noqa: E402
from example_report import comm_seconds, is_rank0, scheme_list  # noqa: E402

SPARSE = ("allreduce.embedding.weight", "allreduce.first_order.weight")


# ---- data ----

class ClickData:
    """A synthetic click log: ids[n, fields] (global ids, each field offset by the sizes of
    the fields before it) and labels[n] from a hidden logistic model."""

    def __init__(self, cardinalities, zipf_s, samples, test_samples, seed, rank=4, crosses=4):
        rng = np.random.default_rng(seed)
        self.cardinalities = cardinalities
        self.offsets = np.concatenate([[0], np.cumsum(cardinalities)[:-1]]).astype(np.int64)
        self.rows = int(sum(cardinalities))
        fields = len(cardinalities)
        # Per field: the Zipf CDF over popularity ranks and which id holds each rank.
        self.cdfs, self.perms = [], []
        for n in cardinalities:
            p = np.arange(1, n + 1, dtype=np.float64) ** -zipf_s
            cdf = np.cumsum(p)
            self.cdfs.append(cdf / cdf[-1])
            self.perms.append(rng.permutation(n))
        # The hidden model: a weight per id, and rank-`rank` factors for a few field pairs.
        self.weights = rng.normal(0.0, 0.8, self.rows).astype(np.float32)
        pairs = [(a, b) for a in range(fields) for b in range(a + 1, fields)]
        chosen = rng.choice(len(pairs), size=min(crosses, len(pairs)), replace=False)
        self.pairs = [pairs[i] for i in sorted(chosen)]
        self.factors = rng.normal(0.0, 0.8 / math.sqrt(rank), (self.rows, rank)).astype(
            np.float32)
        self.bias = 0.0
        train_ids = self.sample(rng, samples)
        test_ids = self.sample(rng, test_samples)
        # Bias for a click rate near 25 % (on the training ids), then the labels.
        logits = self.logits(train_ids)
        lo, hi = -10.0, 10.0
        for _ in range(40):
            mid = (lo + hi) / 2
            if (1 / (1 + np.exp(-(logits + mid)))).mean() > 0.25:
                hi = mid
            else:
                lo = mid
        self.bias = (lo + hi) / 2
        self.train = self.labelled(rng, train_ids)
        self.test = self.labelled(rng, test_ids)

    def sample(self, rng, n):
        cols = []
        for cdf, perm, offset in zip(self.cdfs, self.perms, self.offsets):
            ranks = np.searchsorted(cdf, rng.random(n), side="right")
            cols.append(perm[np.minimum(ranks, len(perm) - 1)] + offset)
        return np.stack(cols, axis=1)

    def logits(self, ids):
        z = self.weights[ids].sum(axis=1) + self.bias
        for a, b in self.pairs:
            z += (self.factors[ids[:, a]] * self.factors[ids[:, b]]).sum(axis=1)
        return z

    def labelled(self, rng, ids):
        p = 1 / (1 + np.exp(-self.logits(ids)))
        y = (rng.random(len(ids)) < p).astype(np.float32)
        return torch.from_numpy(ids), torch.from_numpy(y), torch.from_numpy(p)


def logloss(p, y):
    p = p.double().clamp(1e-7, 1 - 1e-7)
    y = y.double()
    return -(y * p.log() + (1 - y) * (1 - p).log()).mean().item()


def auc(scores, labels):
    """Area under the ROC curve: the Mann-Whitney statistic, ties counted half."""
    scores = scores.double().numpy()
    labels = labels.numpy() > 0.5
    order = np.argsort(scores, kind="mergesort")
    _, first, counts = np.unique(scores[order], return_index=True, return_counts=True)
    ranks = np.empty(len(scores))
    ranks[order] = np.repeat(first + (counts + 1) / 2.0, counts)  # 1-based, ties averaged
    pos = int(labels.sum())
    neg = len(labels) - pos
    if pos == 0 or neg == 0:
        return float("nan")
    return float((ranks[labels].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


# ---- model ----

class DeepFM(torch.nn.Module):
    def __init__(self, rows, fields, dim, hidden):
        super().__init__()
        self.first_order = torch.nn.Embedding(rows, 1, sparse=True)
        self.embedding = torch.nn.Embedding(rows, dim, sparse=True)
        self.bias = torch.nn.Parameter(torch.zeros(1))
        torch.nn.init.zeros_(self.first_order.weight)
        torch.nn.init.normal_(self.embedding.weight, std=0.01)
        layers, width = [], fields * dim
        for h in hidden:
            layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
            width = h
        layers.append(torch.nn.Linear(width, 1))
        self.mlp = torch.nn.Sequential(*layers)

    def forward(self, ids):
        e = self.embedding(ids)                                      # batch x fields x dim
        first = self.first_order(ids).sum(dim=(1, 2))
        second = 0.5 * (e.sum(dim=1).pow(2) - e.pow(2).sum(dim=1)).sum(dim=1)
        deep = self.mlp(e.flatten(1)).squeeze(1)
        return self.bias + first + second + deep


def traffic(stats):
    """(sparse seconds, sparse bytes, dense seconds, dense bytes) of the gradients so far."""
    out = [0.0, 0, 0.0, 0]
    for name, t in stats["tensors"].items():
        if not name.startswith("allreduce.") or name == "allreduce.loss":
            continue
        k = 0 if name in SPARSE else 2
        out[k] += comm_seconds(t)
        out[k + 1] += t["bytes_sent"] + t["bytes_received"]
    return out


def evaluate(model, ids, y, name):
    """Logloss and AUC over (ids, y), each rank predicting its share of the samples."""
    mine = slice(hvd.rank(), None, hvd.size())
    with torch.no_grad():
        p = torch.sigmoid(model(ids[mine]))
    pairs = hvd.allgather(torch.stack([p, y[mine]], dim=1), name="eval." + name)
    return logloss(pairs[:, 0], pairs[:, 1]), auc(pairs[:, 0], pairs[:, 1])


def parameter_digest(model):
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.digest()


def train(scheme, args, data):
    os.environ["ZEN_SCHEME"] = scheme
    hvd.init()
    if args.batch_size % hvd.size():
        sys.exit("--batch-size %d is not a multiple of %d ranks" % (args.batch_size, hvd.size()))
    torch.manual_seed(args.seed)
    model = DeepFM(data.rows, len(data.cardinalities), args.dim,
                   [int(h) for h in args.hidden.split(",") if h])
    opt = hvd.DistributedOptimizer(torch.optim.Adagrad(model.parameters(), lr=args.lr),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    ids, y, _ = data.train
    test_ids, test_y, _ = data.test
    subset = slice(0, len(data.test[0]))  # the train metrics: as many samples as the test set
    before = (evaluate(model, ids[subset], y[subset], "train")
              + evaluate(model, test_ids, test_y, "test"))

    shard = args.batch_size // hvd.size()
    batches = len(ids) // args.batch_size
    losses, rows = [], []
    last = traffic(hvd.stats())
    last_step, window_start = 0, time.time()
    start = time.time()
    for step in range(1, args.steps + 1):
        at = ((step - 1) % batches) * args.batch_size + hvd.rank() * shard
        x, t = ids[at:at + shard], y[at:at + shard]
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), t)
        loss.backward()
        opt.step()
        losses.append(hvd.allreduce(loss.detach(), name="loss").item())
        rows.append(model.embedding.weight.grad.coalesce().indices().shape[1])
        if step % args.print_every == 0 or step == 1 or step == args.steps:
            now = traffic(hvd.stats())
            n = step - last_step
            if hvd.rank() == 0:
                window = losses[last_step:step]
                print("[%s] step %5d  loss %.4f  comm %6.2f ms/step (sparse %6.2f, dense %6.2f)"
                      "  sent+received %8.1f KB/step  rows %d  %.1f steps/s" %
                      (scheme, step, sum(window) / len(window),
                       1000 * (now[0] - last[0] + now[2] - last[2]) / n,
                       1000 * (now[0] - last[0]) / n, 1000 * (now[2] - last[2]) / n,
                       (now[1] - last[1] + now[3] - last[3]) / n / 1024, rows[-1],
                       n / (time.time() - window_start)), flush=True)
            last, last_step, window_start = now, step, time.time()
    elapsed = time.time() - start
    after = (evaluate(model, ids[subset], y[subset], "train")
             + evaluate(model, test_ids, test_y, "test"))

    stats = hvd.stats()
    sparse_s, sparse_b, dense_s, dense_b = traffic(stats)
    digest = parameter_digest(model)
    digests = hvd.allgather(torch.tensor([int.from_bytes(digest[:8], "little", signed=True)]),
                            name="digest")
    # Every rank's gradient bytes per step (they differ: the busiest rank bounds the step).
    per_rank = hvd.allgather(torch.tensor([(sparse_b + dense_b) / args.steps],
                                          dtype=torch.float64), name="traffic")
    head = max(1, args.steps // 10)
    result = {
        "scheme": scheme, "seconds": elapsed, "before": before, "after": after,
        "first_loss": sum(losses[:head]) / head, "last_loss": sum(losses[-head:]) / head,
        "sparse_ms": 1000 * sparse_s / args.steps, "sparse_bytes": sparse_b / args.steps,
        "dense_ms": 1000 * dense_s / args.steps, "dense_bytes": dense_b / args.steps,
        "rows": sum(rows) / len(rows), "per_rank": per_rank.tolist(),
        "digests": ["%016x" % (d & (2**64 - 1)) for d in digests.tolist()],
    }
    if hvd.rank() == 0:
        print("[%s] %d steps in %.1f s; train logloss %.4f -> %.4f, AUC %.4f -> %.4f; "
              "test logloss %.4f -> %.4f, AUC %.4f -> %.4f" %
              (scheme, args.steps, elapsed, before[0], after[0], before[1], after[1],
               before[2], after[2], before[3], after[3]), flush=True)
        if scheme == "auto":  # what the profile settled on, per sparse gradient
            print("[auto] schemes in the last step: %s" % ", ".join(
                "%s %s" % (name[len("allreduce."):], stats["tensors"][name]["last_scheme"])
                for name in sorted(SPARSE)), flush=True)
        print("[%s] parameter sha256 per rank: %s (%s)" %
              (scheme, " ".join(result["digests"]),
               "identical" if len(set(result["digests"])) == 1 else "DIFFERENT"), flush=True)
    hvd.shutdown()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schemes", default=os.environ.get("ZEN_SCHEME", "zen"),
                        help="comma-separated ZEN_SCHEME values to compare "
                             "(zen,hc,agsparse,blocks,dense,auto)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=1024,
                        help="global batch; each rank trains on batch-size / size samples")
    parser.add_argument("--cardinalities", default="1000,3000,10000,30000,100000,300000,1000000",
                        help="ids per categorical field")
    parser.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent s of the ids")
    parser.add_argument("--samples", type=int, default=0,
                        help="training samples (default steps x batch-size: one pass)")
    parser.add_argument("--test-samples", type=int, default=20000)
    parser.add_argument("--dim", type=int, default=8, help="embedding columns")
    parser.add_argument("--hidden", default="64,32", help="MLP widths")
    parser.add_argument("--lr", type=float, default=0.05, help="Adagrad learning rate")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--print-every", type=int, default=50)
    args = parser.parse_args()
    torch.set_num_threads(1)

    schemes = scheme_list(parser, args)
    cardinalities = [int(float(c)) for c in args.cardinalities.split(",")]
    samples = args.samples or args.steps * args.batch_size
    if samples < args.batch_size:
        parser.error("--samples %d is less than one batch (--batch-size %d)"
                     % (samples, args.batch_size))
    data = ClickData(cardinalities, args.zipf, samples, args.test_samples, args.seed)
    results = []
    for scheme in schemes:
        results.append(train(scheme, args, data))
    if not is_rank0():
        return 0
    _, test_y, test_p = data.test
    print("\n%d fields (%s ids, %d embedding rows), Zipf s=%.2f, click rate %.3f; %d steps x "
          "%d samples (%d ranks x %d); oracle test logloss %.4f, AUC %.4f" %
          (len(cardinalities), ",".join(str(c) for c in cardinalities), data.rows, args.zipf,
           data.train[1].mean().item(), args.steps, args.batch_size,
           len(results[0]["per_rank"]), args.batch_size // len(results[0]["per_rank"]),
           logloss(test_p, test_y), auc(test_p, test_y)))
    print("%-9s %8s %8s %8s %9s %12s %12s %12s %12s  %s" %
          ("scheme", "loss", "test ll", "test AUC", "rows/step", "sparse ms/st", "sparse KB/st",
           "dense ms/st", "dense KB/st", "gradient KB/step per rank"))
    for r in results:
        per_rank = " ".join("%.1f" % (b / 1024) for b in r["per_rank"])
        print("%-9s %8.4f %8.4f %8.4f %9.0f %12.3f %12.1f %12.3f %12.1f  %s" %
              (r["scheme"], r["last_loss"], r["after"][2], r["after"][3], r["rows"],
               r["sparse_ms"], r["sparse_bytes"] / 1024, r["dense_ms"], r["dense_bytes"] / 1024,
               per_rank))
    return 0


if __name__ == "__main__":
    sys.exit(main())
