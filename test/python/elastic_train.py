"""What test_elastic_training.py runs: torch training under zen.torch.elastic whose result does
not depend on the number of ranks, in a real elastic zenrun job (workers die, join), or, with
--reference, the same training in one process without zen.

    zenrun --min-np 2 --max-np 3 -np 3 python3 elastic_train.py [--die-worker I --die-step K]
    python3 elastic_train.py --reference

Training: a float64 linear model, SGD with momentum, EPOCHS epochs over SAMPLES samples in
global batches of GLOBAL_BATCH (ElasticSampler: shuffled per epoch, each rank its share of
every global batch, re-sharded over the new ranks after a reset); loss = squared error summed
over the global batch / GLOBAL_BATCH, gradients summed over the ranks (DistributedOptimizer,
op=Sum), so every global step is one process's step on the same batch. Commits every
COMMIT_EVERY steps and at each epoch's end.

--die-worker I --die-step K: the worker numbered I (ZEN_ELASTIC_WORKER's last field) exits
with code 1 right before global step K, once (a marker file in --marker-dir).
--wait-update-at-step K: at the commit after step K rank 0 waits (up to 60 s) until the
launcher reports a change of workers (it prints WAITING: the test rewrites the discovery
script's hosts then), so the new round lands at a known step.

Prints `RESET <size>` per reset and, at the end, `PARAMS {...}`: the parameters as float.hex,
the size, and how many steps this process ran.
"""

import json
import sys
import time

import torch

from elastic_faults import die_once_at, training_main, worker_number

SAMPLES, FEATURES, GLOBAL_BATCH, EPOCHS, COMMIT_EVERY = 48, 4, 6, 2, 2


def data():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(SAMPLES, FEATURES, generator=g, dtype=torch.float64)
    return x, x @ torch.arange(1.0, FEATURES + 1, dtype=torch.float64) - 1.0


def new_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Linear(FEATURES, 1).double()


def new_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)


def loss_of(model, x, y):
    return ((model(x).squeeze(1) - y) ** 2).sum() / GLOBAL_BATCH


def flat(model):
    return [v.hex() for p in model.parameters() for v in p.detach().reshape(-1).tolist()]


def reference():
    """One process: the epochs' orders as ElasticSampler makes them, GLOBAL_BATCH at a time."""
    import random
    x, y = data()
    model = new_model(0)
    opt = new_optimizer(model)
    for epoch in range(EPOCHS):
        order = list(range(SAMPLES))
        random.Random(1 + epoch).shuffle(order)  # ElasticSampler(seed=1), set_epoch(epoch)
        for start in range(0, SAMPLES, GLOBAL_BATCH):
            idx = order[start:start + GLOBAL_BATCH]
            opt.zero_grad()
            loss_of(model, x[idx], y[idx]).backward()
            opt.step()
    print("PARAMS " + json.dumps({"params": flat(model), "size": 1}), flush=True)


def train(args):
    import zen.torch as hvd

    hvd.init()
    x, y = data()
    # Every worker starts from its own parameters: a worker that joins gets rank 0's by sync.
    model = new_model(0 if worker_number() == 0 else 100 + worker_number())
    opt = hvd.DistributedOptimizer(new_optimizer(model), named_parameters=model.named_parameters(),
                                   op=hvd.Sum)
    sampler = hvd.elastic.ElasticSampler(list(range(SAMPLES)), shuffle=True, seed=1)

    class State(hvd.elastic.TorchState):
        def _pending_update(self):
            update = super()._pending_update()
            if update is None and self.step == args.wait_update_at_step:
                print("WAITING", flush=True)  # the test changes the hosts now
                deadline = time.monotonic() + 60
                while update is None and time.monotonic() < deadline:
                    time.sleep(0.1)
                    update = super()._pending_update()
            return update

    state = State(model, opt, sampler=sampler, epoch=0, step=0)
    state.register_reset_callbacks([lambda: print("RESET %d" % hvd.size(), flush=True)])
    ran = []

    @hvd.elastic.run
    def loop(state):
        while state.epoch < EPOCHS:
            local = GLOBAL_BATCH // hvd.size()
            indices = list(state.sampler)
            for i in range(len(indices) // local):
                die_once_at(args, state.step)
                idx = indices[i * local:(i + 1) * local]
                state.optimizer.zero_grad()
                loss_of(state.model, x[idx], y[idx]).backward()
                state.optimizer.step()
                state.sampler.record_batch(i, local)
                state.step += 1
                ran.append(state.step)
                if state.step % COMMIT_EVERY == 0:
                    state.commit()
            state.epoch += 1
            state.sampler.set_epoch(state.epoch)
            state.commit()

    loop(state)
    print("PARAMS " + json.dumps({"params": flat(model), "size": hvd.size(), "rank": hvd.rank(),
                                  "worker": worker_number(), "steps": len(ran)}), flush=True)


if __name__ == "__main__":
    sys.exit(training_main(reference, train, lambda p: p.add_argument(
        "--wait-update-at-step", type=int, default=-1)))
