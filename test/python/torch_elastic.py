"""What every rank runs in test_torch_elastic.py: zen.torch.elastic under a plain zenrun
(the same world after each reset: shutdown then init), check by check.

    tools/zenrun -np N /usr/bin/python3 torch_elastic.py [CHECK ...]

Training runs in float64 on a linear model whose global batch is split over the ranks and
whose gradients are summed (loss = sum over the global batch / B), so every rank's result
equals one process's training on the whole batch (to rounding: the ranks sum in another
order); the reference is that training without zen.
"""

import sys
import time

import torch

import elastic_steps
from rank_report import Checks, add_checkout_package, run_checks

add_checkout_package()

import zen.torch as hvd  # noqa: E402
from zen.common.exceptions import HostsUpdatedInterrupt  # noqa: E402

CHECKS = Checks()
check = CHECKS.check
FEATURES = 5
GLOBAL_BATCH = 12  # divides over 2, 3 and 4 ranks
STEPS = 10


def data():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(STEPS * GLOBAL_BATCH, FEATURES, generator=g, dtype=torch.float64)
    y = x @ torch.arange(1.0, FEATURES + 1, dtype=torch.float64) + 0.5
    return x, y


def new_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Linear(FEATURES, 1).double()


def new_optimizer(model, kind):
    if kind == "adam":
        return torch.optim.Adam(model.parameters(), lr=0.05)
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=0.01)


def loss_of(model, x, y):
    return ((model(x).squeeze(1) - y) ** 2).sum() / GLOBAL_BATCH


def reference(kind):
    """One process, the whole global batch per step, no zen."""
    x, y = data()
    model = new_model(0)
    opt = new_optimizer(model, kind)
    for step in range(STEPS):
        rows = slice(step * GLOBAL_BATCH, (step + 1) * GLOBAL_BATCH)
        opt.zero_grad()
        loss_of(model, x[rows], y[rows]).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def train_step(model, opt, step, x, y, name, summed_here=True):
    """This rank's share of global batch step, gradients summed over the ranks (by opt when
    not summed_here: a DistributedOptimizer)."""
    share = GLOBAL_BATCH // hvd.size()
    start = step * GLOBAL_BATCH + hvd.rank() * share
    opt.zero_grad()
    loss_of(model, x[start:start + share], y[start:start + share]).backward()
    for i, p in enumerate(model.parameters() if summed_here else ()):
        p.grad = hvd.allreduce(p.grad, op=hvd.Sum, name="%s.grad.%d" % (name, i))
    opt.step()


def same_on_every_rank(tensor, name):
    gathered = hvd.allgather(tensor.detach().reshape(1, -1), name=name)
    return all(torch.equal(gathered[0], row) for row in gathered)


def assert_state_equal(a, b):
    assert a.keys() == b.keys(), (a.keys(), b.keys())
    for k in a:
        if torch.is_tensor(a[k]):
            assert torch.equal(a[k], b[k]), k
        elif isinstance(a[k], dict):
            assert_state_equal(a[k], b[k])
        else:
            assert a[k] == b[k], (k, a[k], b[k])


@check
def state_save_restore_sync():
    """commit saves model, optimizer (momentum, Adam moments) and objects; restore undoes
    later changes, objects changed in place included; sync makes rank 0's everyone's."""
    x, y = data()
    for kind in ("sgd", "adam"):
        model = new_model(100 + hvd.rank())  # different on every rank
        opt = new_optimizer(model, kind)
        state = hvd.elastic.TorchState(model, opt, epoch=0, seen=[hvd.rank()])
        n = GLOBAL_BATCH // hvd.size()
        for _ in range(2):  # local steps: the ranks differ
            opt.zero_grad()
            loss_of(model, x[:n], y[:n]).backward()
            opt.step()
        state.epoch = 3
        state.commit()
        committed_model = {k: v.clone() for k, v in model.state_dict().items()}
        committed_opt = opt.state_dict()
        committed_opt = {"state": {k: {n: t.clone() if torch.is_tensor(t) else t
                                       for n, t in v.items()}
                                   for k, v in committed_opt["state"].items()},
                         "param_groups": committed_opt["param_groups"]}
        for _ in range(2):
            opt.zero_grad()
            loss_of(model, x[n:2 * n], y[n:2 * n]).backward()
            opt.step()
        state.epoch = 4
        state.seen.append(99)  # in place
        assert not torch.equal(model.weight, committed_model["weight"])
        state.restore()
        assert_state_equal(model.state_dict(), committed_model)
        assert_state_equal(opt.state_dict()["state"], committed_opt["state"])
        assert state.epoch == 3 and state.seen == [hvd.rank()], (state.epoch, state.seen)
        state.sync()
        for name, tensor in model.state_dict().items():
            assert same_on_every_rank(tensor, "sync.%s.%s" % (kind, name)), name
        for pid, entries in opt.state_dict()["state"].items():
            for name, tensor in entries.items():
                assert same_on_every_rank(torch.as_tensor(tensor, dtype=torch.float64),
                                          "sync.%s.%s.%s" % (kind, pid, name)), name
        assert state.epoch == 3 and state.seen == [0], state.seen
        # The sync is the new commit: a restore after it keeps rank 0's values.
        state.epoch = 8
        state.restore()
        assert state.epoch == 3
        for name, tensor in model.state_dict().items():
            assert same_on_every_rank(tensor, "sync2.%s.%s" % (kind, name)), name


class EpochSampler:
    """Stands for a DistributedSampler: the script's DataLoader holds it too."""

    def __init__(self):
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch


@check
def plain_objects_keep_their_identity():
    """The objects given to the state are its attributes (state.sampler.set_epoch reaches the
    sampler a DataLoader holds), and restore and sync put the saved values into them in
    place; a change after a sync is undone by a restore (the sync's copy is the commit)."""
    sampler, seen, counts = EpochSampler(), [hvd.rank()], {"steps": hvd.rank()}
    state = hvd.elastic.TorchState(sampler=sampler, seen=seen, counts=counts, epoch=0)
    assert state.sampler is sampler and state.seen is seen and state.counts is counts
    state.sampler.set_epoch(2 + hvd.rank())
    state.commit()
    sampler.set_epoch(9)
    seen.append(99)
    counts["steps"] = 50
    state.epoch = 4
    state.restore()
    assert state.sampler is sampler and state.seen is seen and state.counts is counts
    assert sampler.epoch == 2 + hvd.rank() and seen == [hvd.rank()], (sampler.epoch, seen)
    assert counts == {"steps": hvd.rank()} and state.epoch == 0, (counts, state.epoch)
    state.sync()
    assert state.sampler is sampler and state.seen is seen and state.counts is counts
    assert sampler.epoch == 2 and seen == [0] and counts == {"steps": 0}, (sampler.epoch, seen)
    sampler.set_epoch(7)
    seen.append(5)
    state.restore()
    assert sampler.epoch == 2 and seen == [0], (sampler.epoch, seen)


@check
def scheduler_is_kept_by_its_handler():
    """An LR scheduler in the state (Horovod's elastic CIFAR-10 example passes
    scheduler=): it keeps driving the state's own optimizer (not a copy of it), commit
    saves its progress, restore undoes later steps, sync makes rank 0's everyone's."""
    model = new_model(7)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    state = hvd.elastic.TorchState(model, opt, scheduler=sched)
    assert state.scheduler is sched
    for _ in range(1 + hvd.rank()):  # the ranks differ
        state.scheduler.step()
    assert opt.param_groups[0]["lr"] == 0.1 * 0.5 ** (1 + hvd.rank())
    state.commit()
    sched.step()
    state.restore()
    assert sched.last_epoch == 1 + hvd.rank(), sched.last_epoch
    state.sync()
    assert sched.last_epoch == 1, sched.last_epoch  # rank 0's
    sched.step()
    assert opt.param_groups[0]["lr"] == 0.1 * 0.5 ** 2, opt.param_groups[0]["lr"]


def run_failing_once(state, fail_at, name, step_fn):
    """step_fn(state) for each step up to STEPS under hvd.elastic.run, committing every 3
    steps; at step fail_at (once) rank 1 posts an allreduce of the wrong shape: every rank
    gets HorovodInternalError. Returns the steps run, in order."""
    shape = [3] if hvd.rank() == 1 else [2]
    return elastic_steps.run_failing_once(
        hvd.elastic.run, state, STEPS, 3, fail_at,
        lambda: hvd.allreduce(torch.zeros(shape), name="%s.mismatch" % name), step_fn)


def elastic_training(kind, fail_at, name):
    """run_failing_once's training of new_model with new_optimizer(kind). Returns
    (parameters, resets seen, steps run)."""
    x, y = data()
    model = new_model(0 if hvd.rank() == 0 else 50)  # the sync makes rank 0's everyone's
    opt = new_optimizer(model, kind)
    state = hvd.elastic.TorchState(model, opt, step=0)
    resets = []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])
    steps_run = run_failing_once(state, fail_at, name, lambda state: train_step(
        state.model, state.optimizer, state.step, x, y, name))
    return [p.detach().clone() for p in model.parameters()], resets, steps_run


def assert_close(got, want, tolerance):
    for g, w in zip(got, want):
        assert (g - w).abs().max().item() <= tolerance, (g - w).abs().max().item()


@check
def run_recovers_from_internal_error():
    """A real HorovodInternalError on every rank at step 7 (last commit at step 6): each rank
    restores, resets (shutdown, init), syncs and redoes step 6; the parameters equal those of
    the same training without the error exactly, and one process's to 1e-12 (the ranks sum
    in another order); the reset callback ran once."""
    for kind in ("sgd", "adam"):
        plain, resets, steps_run = elastic_training(kind, -1, "plain." + kind)
        assert resets == [] and steps_run == list(range(STEPS)), (resets, steps_run)
        assert_close(plain, reference(kind), 1e-12)
        got, resets, steps_run = elastic_training(kind, 7, "fail." + kind)
        assert resets == [hvd.size()], resets
        assert steps_run == list(range(7)) + list(range(6, STEPS)), steps_run
        assert_close(got, plain, 0.0)


def elastic_topk_training(fail_at, name):
    """run_failing_once's training through DistributedOptimizer(Compression.topk(0.4,
    momentum 0.5, min_size=1)): the weight sends 2 of its 5 elements per step, the rest waits
    in the residual. Returns (parameters, [the weight's residual, its momentum])."""
    x, y = data()
    model = new_model(0 if hvd.rank() == 0 else 50)
    compression = hvd.Compression.topk(0.4, min_size=1, momentum=0.5)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                   named_parameters=model.named_parameters(),
                                   compression=compression)
    state = hvd.elastic.TorchState(model, opt, step=0)
    run_failing_once(state, fail_at, name, lambda state: train_step(
        state.model, state.optimizer, state.step, x, y, name, summed_here=False))
    weight = model.weight
    return ([p.detach().clone() for p in model.parameters()],
            [compression.residual(weight).clone(), compression.momentum_buffer(weight).clone()])


@check
def run_recovers_with_topk_residuals():
    """Compression.topk's residuals and momenta are restored with the commit: after a real
    HorovodInternalError at step 7 (last commit at step 6) the parameters, residual and
    momentum equal those of the same training without the error to 1e-12 (with 3 ranks the
    sparse allreduce's sums came out 1 ulp apart; kept at their step 7 values, step 6's
    unsent part would be sent twice: ~0.3 off)."""
    plain, plain_state = elastic_topk_training(-1, "topk.plain")
    assert plain_state[0].abs().sum() > 0, "nothing left in the residual: no test"
    got, got_state = elastic_topk_training(7, "topk.fail")
    assert_close(got, plain, 1e-12)
    assert_close(got_state, plain_state, 1e-12)


@check
def post_after_the_job_stopped_is_internal_error():
    """Once another rank has stopped the job (rank 0's shutdown here; a dead peer alike),
    posting an operation raises HorovodInternalError, as waiting for one does (horovod.torch's
    rule), so elastic.run recovers from a failure seen at post time. Then the same world
    again (shutdown, init)."""
    if hvd.rank() == 0:
        hvd.shutdown()
    else:
        deadline = time.monotonic() + 20
        while True:
            assert time.monotonic() < deadline, "the stop never reached rank %d" % hvd.rank()
            try:
                handle = hvd.allreduce_async(torch.ones(2), name="after.stop")
            except hvd.HorovodInternalError as e:
                assert "rank 0" in str(e), str(e)
                break
            try:
                hvd.synchronize(handle)
            except hvd.HorovodInternalError:
                pass  # failed in flight: the next post sees the stopped daemon
        hvd.shutdown()
    hvd.init()
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="after.init").item() == hvd.size()


class ScriptedState(hvd.elastic.TorchState):
    """A TorchState whose rank 0 sees the launcher's answers from a list (one per check), and
    counts its syncs: the answer still reaches the other ranks through the real broadcast."""

    def __init__(self, answers, **kwargs):
        self.answers = list(answers)
        self.syncs = 0
        super().__init__(**kwargs)

    def _pending_update(self):
        assert hvd.rank() == 0, "only rank 0 asks the launcher"
        return self.answers.pop(0)

    def sync(self):
        self.syncs += 1
        super().sync()


@check
def hosts_updated_interrupt_on_every_rank():
    """Rank 0's answer (generation, removed_only) at the 3rd and the 6th commit: every rank
    raises HostsUpdatedInterrupt at those commits, resets, and syncs only when workers were
    added (skip_sync when removed only); uncommitted progress is kept, not restored."""
    answers = [None, None, (4, True), None, None, (5, False), None, None]
    state = ScriptedState(answers if hvd.rank() == 0 else [], commits=0, work=0)
    events = []
    state.register_reset_callbacks([lambda: events.append(("reset", state.commits))])

    @hvd.elastic.run
    def train(state):
        while state.commits < len(answers):
            state.work += 1
            state.commits += 1
            try:
                state.commit()
            except HostsUpdatedInterrupt as e:
                events.append(("interrupt", state.commits, e.skip_sync))
                raise
        return "done"

    assert train(state) == "done"
    want = [("interrupt", 3, True), ("reset", 3), ("interrupt", 6, False), ("reset", 6)]
    assert events == want, events
    assert state.work == len(answers) and state.syncs == 2, (state.work, state.syncs)
    everyone = hvd.allgather_object(events, name="events")
    assert all(e == want for e in everyone), everyone


@check
def launcher_error_raises_on_every_rank():
    """When rank 0 cannot ask the launcher, every rank raises the same RuntimeError."""

    class Broken(ScriptedState):
        def _pending_update(self):
            raise OSError("connection refused")

    state = Broken([], n=0)
    try:
        state.commit()
    except RuntimeError as e:
        assert "connection refused" in str(e) and "rank 0" in str(e), str(e)
    else:
        raise AssertionError("no RuntimeError")


@check
def sampler_sync_merges_recorded_indices():
    """record_batch records every rank's batch (the same set everywhere); record_indices this
    rank's, merged by sync; after it the remaining indices are sharded without them."""
    dataset = list(range(40))
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=3)
    sampler.set_epoch(2)
    state = hvd.elastic.TorchState(sampler=sampler)
    mine = list(sampler)
    assert len(mine) == -(-40 // hvd.size())
    everyone = hvd.allgather_object(mine, name="shards")
    assert set(i for shard in everyone for i in shard) == set(dataset)
    sampler.record_batch(0, 2)
    batch0 = set(i for shard in everyone for i in shard[:2])
    assert sampler.processed_indices == batch0, (sampler.processed_indices, batch0)
    extra = {mine[2]}  # this rank's third index
    sampler.record_indices(extra)
    state.sync()
    merged = batch0 | set(shard[2] for shard in everyone)
    assert sampler.processed_indices == merged
    rest = hvd.allgather_object(list(sampler), name="rest")
    left = set(i for shard in rest for i in shard)
    assert left == set(dataset) - merged and len(sampler) == -(-len(left) // hvd.size())


@check
def sampler_indices_merged_at_commit_for_removal_reset():
    """Each rank records its own indices (record_indices) and commits; a reset that only
    removed workers skips the sync, yet every rank re-shards the same remaining indices and
    the shards split them exactly (they overlapped and missed indices while the merge ran only
    at the sync)."""
    dataset = list(range(37))
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=5)
    sampler.set_epoch(1)
    answers = [None, (7, True)]
    state = ScriptedState(answers if hvd.rank() == 0 else [], sampler=sampler, commits=0)
    processed = []

    @hvd.elastic.run
    def train(state):
        while state.commits < len(answers):
            mine = state.sampler.get_indices(state.commits, 2)
            processed.extend(mine)
            state.sampler.record_indices(mine)
            state.commits += 1
            state.commit()
        # Back after the reset at the 2nd commit: the job's processed indices, every rank's.
        return set(i for part in hvd.allgather_object(processed, name="done") for i in part)

    done = train(state)
    remaining = set(dataset) - done
    assert state.syncs == 1, state.syncs  # the first entry's only: the reset skipped it
    assert set(sampler.remaining_indices) == remaining, (sampler.remaining_indices, remaining)
    everyone = hvd.allgather_object(sampler.remaining_indices, name="remaining")
    assert all(r == everyone[0] for r in everyone), everyone
    shards = hvd.allgather_object(list(sampler), name="shards")
    covered = [i for shard in shards for i in shard]
    padding = sampler.total_size - len(sampler.remaining_indices)
    assert set(covered) == remaining and len(covered) == len(remaining) + padding, shards


def simulated_samplers(length, n, state=None):
    """n samplers of simulated ranks 0..n-1 (the sampler module's rank() and size() replaced
    while each is made: re-sharding is arithmetic, the same in a real job), epoch 1, from
    state when given."""
    from zen.torch.elastic import sampler as module
    samplers = []
    for r in range(n):
        module.rank, module.size = (lambda r=r: r), (lambda: n)
        sampler = hvd.elastic.ElasticSampler(list(range(length)), shuffle=True, seed=4)
        sampler.set_epoch(1)
        if state is not None:
            sampler.load_state_dict(state)
        samplers.append(sampler)
    return samplers


@check
def sampler_resharding_covers_epoch_across_size_change():
    """n ranks process 2 batches and record them (record_batch: every rank's), one survivor's
    state then goes to m ranks, which finish the epoch: every index is processed, once apart
    from the padding of the last sharding (to a multiple of m)."""
    from zen.torch.elastic import sampler as module
    real = module.rank, module.size
    try:
        for n, m, length in ((3, 2, 50), (2, 3, 47), (3, 1, 40), (2, 4, 17), (4, 3, 25)):
            batch = 3
            before = simulated_samplers(length, n)
            done = []
            for sampler in before:
                done += list(sampler)[:2 * batch]
                sampler.record_batch(0, batch)
                sampler.record_batch(1, batch)
            assert all(s.processed_indices == set(done) for s in before), (n, m, length)
            after = simulated_samplers(length, m, before[-1].state_dict())
            for sampler in after:
                done += list(sampler)
                assert len(sampler) == len(list(sampler)) == after[0].num_samples
            assert set(done) == set(range(length)), (n, m, length)
            padding = after[0].total_size - len(after[0].remaining_indices)
            assert len(done) == length + padding, (n, m, length, len(done), padding)
    finally:
        module.rank, module.size = real


if __name__ == "__main__":
    sys.exit(run_checks(hvd, CHECKS, sys.argv[1:]))
