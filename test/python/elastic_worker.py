"""What an elastic zenrun job runs in test_elastic.py: zen.torch directly, with its own
minimal retry loop in place of zen.torch.elastic (Horovod's run/State, another module's).

    elastic_worker.py --steps N [--delay S] [--marker-dir D]
                      [--die-worker I --die-step K] [--wait-pending-step K ...]

Committed state: the next step. Each step: rank 0 asks pending_update() and broadcasts the
answer (a pending update ends the round at this commit, as State.check_host_updates does);
then one Sum allreduce of rank+1+step (4 floats), printed as one line
`STEP {...}` with the sum the ranks' placement predicts and the round's ZEN_CONTROLLER_ADDR
(where rank 0 listens); then the step is committed. On
HorovodInternalError (a peer died) or a pending update: shutdown(), init() (the rendezvous
join), rank 0's committed step broadcast, continue.

--die-worker I --die-step K: worker number I (from ZEN_ELASTIC_WORKER) exits 1 right before
step K's allreduce, once (a marker file in D). --wait-pending-step K (repeatable): rank 0
prints `WAITING at step K` and does not go past step K until pending_update() reports a
change (a scale-up or -down the test starts on that line), so the change lands at step K.
"""

import argparse
import json
import os
import sys
import time

import torch

import zen.torch as hvd
from zen.common import elastic_rendezvous
from elastic_faults import add_fault_arguments, die_once_at, worker_number


class _Interrupt(Exception):
    pass


def one_step(step, args):
    update = elastic_rendezvous.pending_update() if hvd.rank() == 0 else None
    if hvd.rank() == 0 and step in args.wait_pending_step and update is None:
        args.wait_pending_step.remove(step)  # once: after the reset, step K runs normally
        print(f"WAITING at step {step}", flush=True)  # the test changes the hosts now
        deadline = time.monotonic() + 60
        while update is None and time.monotonic() < deadline:
            time.sleep(0.1)
            update = elastic_rendezvous.pending_update()
    update = hvd.broadcast_object(update, 0, name=f"pending.{step}")
    if update is not None:
        raise _Interrupt(update)
    die_once_at(args, step)
    t = torch.full((4,), float(hvd.rank() + 1 + step))
    out = hvd.allreduce(t, op=hvd.Sum, name=f"step.{step}")
    n = hvd.size()
    print("STEP " + json.dumps({"step": step, "rank": hvd.rank(), "size": n,
                                "worker": worker_number(), "sum": out.tolist(),
                                "expect": n * (n + 1) / 2 + n * step,
                                "controller": os.environ["ZEN_CONTROLLER_ADDR"]}), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--delay", type=float, default=0.05)
    add_fault_arguments(p)
    p.add_argument("--wait-pending-step", type=int, action="append", default=[])
    args = p.parse_args()
    hvd.init()
    # The same name as after a reset: a new worker's first sync meets the survivors' one.
    step = hvd.broadcast_object(0, 0, name="sync")
    resets = 0
    while step < args.steps:
        try:
            one_step(step, args)
            step += 1  # commit
            time.sleep(args.delay)
        except (hvd.HorovodInternalError, _Interrupt) as e:
            resets += 1
            # An update as (generation, removed_only).
            what = f" {e.args[0]}" if isinstance(e, _Interrupt) else ""
            print(f"RESET at step {step}: {type(e).__name__}{what}", flush=True)
            hvd.shutdown()
            hvd.init()
            step = hvd.broadcast_object(step, 0, name="sync")
    print(f"DONE worker {worker_number()} rank {hvd.rank()} size {hvd.size()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
