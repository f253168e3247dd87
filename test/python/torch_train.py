"""What every rank runs in test_torch.py's training test: DistributedOptimizer on N ranks
against one process training on the same global batches with dense gradients.

    tools/zenrun -np N /usr/bin/python3 torch_train.py SCHEME [SCHEME ...]

For each scheme (ZEN_SCHEME: zen, hc, agsparse, blocks, dense) the daemon is started anew
(hvd.init after hvd.shutdown) and a small model with sparse embeddings (nn.Embedding and
nn.EmbeddingBag, sparse=True) and a dense layer trains a few SGD steps, each rank on its
slice of every global batch. Every rank also trains the reference itself (dense embeddings,
whole global batches, one process) and compares the parameters. Prints one line per
variant: `ZENTEST {"check": "train.<scheme>.<variant>", "ok": ..., "error": ...}`.
"""

import sys

import torch

from rank_report import add_checkout_package, train_schemes

add_checkout_package()

import zen.torch as hvd  # noqa: E402

VOCAB, DIM, CLASSES = 64, 8, 4
GLOBAL_BATCH, LENGTH, STEPS, LR = 8, 6, 4, 0.5


class Model(torch.nn.Module):
    def __init__(self, sparse):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, DIM, sparse=sparse)
        self.bag = torch.nn.EmbeddingBag(VOCAB, DIM, mode="mean", sparse=sparse)
        self.fc = torch.nn.Linear(DIM, CLASSES)

    def forward(self, ids):
        return self.fc(torch.tanh(self.emb(ids).mean(dim=1) + self.bag(ids)))


def global_batch(step):
    # Zipf-like token ids: frequent rows repeat within and across ranks.
    g = torch.Generator().manual_seed(1000 + step)
    ranks = torch.multinomial(1.0 / torch.arange(1, VOCAB + 1, dtype=torch.float64),
                              GLOBAL_BATCH * LENGTH, replacement=True, generator=g)
    ids = ranks.view(GLOBAL_BATCH, LENGTH)
    labels = torch.randint(0, CLASSES, (GLOBAL_BATCH,), generator=g)
    return ids, labels


def reference():
    torch.manual_seed(7)
    model = Model(sparse=False)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(STEPS):
        ids, labels = global_batch(step)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(ids), labels).backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def distributed(passes=1, sparse_as_dense=False, topk=False):
    torch.manual_seed(7)
    model = Model(sparse=True)
    # topk: every dense gradient through Compression.topk(1.0), which sends all of it.
    compression = hvd.Compression.topk(1.0, min_size=1) if topk else hvd.Compression.none
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=passes,
                                   sparse_as_dense=sparse_as_dense, compression=compression)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    size, rank = hvd.size(), hvd.rank()
    local = GLOBAL_BATCH // size
    for step in range(STEPS):
        ids, labels = global_batch(step)
        ids, labels = ids[rank * local:(rank + 1) * local], labels[rank * local:(rank + 1) * local]
        opt.zero_grad()
        micro = local // passes
        for k in range(passes):
            part = slice(k * micro, (k + 1) * micro)
            loss = torch.nn.functional.cross_entropy(model(ids[part]), labels[part]) / passes
            loss.backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def compare(got, want):
    for name, value in want.items():
        diff = (got[name] - value).abs().max().item()
        assert diff < 2e-5, "%s differs from the one-process reference by %g" % (name, diff)


def variants(scheme, want):
    """This scheme's checks (rank_report.train_schemes): sparse gradients, the dense ones
    through Compression.topk(1.0) besides (the sparse allreduce of the scheme), and for zen
    two passes per step and sparse_as_dense; each matches the one-process reference."""
    def variant(label, **kwargs):
        def run():
            compare(distributed(**kwargs), want)
            if label == "sparse" and hvd.size() > 1:
                used = hvd.stats()["buckets_by_scheme"]
                assert used.get(scheme, 0) >= STEPS, "scheme %s not used: %s" % (scheme, used)
        return "train.%s.%s" % (scheme, label), run
    out = [variant("sparse"), variant("topk1", topk=True)]
    if scheme == "zen":
        out += [variant("passes2", passes=2), variant("sparse_as_dense", sparse_as_dense=True)]
    return out


if __name__ == "__main__":
    sys.exit(train_schemes(hvd, sys.argv[1:], reference, variants))
