"""What the programs of the elastic tests share (elastic_worker.py, elastic_train.py,
elastic_keras_train.py): the worker's number, the one failure they inject, and the training
programs' command line (--reference: one process without zen).

--die-worker I --die-step K --marker-dir D: worker number I (from ZEN_ELASTIC_WORKER, which
zenrun's elastic mode sets) exits 1 right before step K, once: a marker file in D says it
happened, so the worker that replaces it, or a step run again after a restore, goes on.
"""

import argparse
import os


def worker_number():
    """This worker's number under an elastic zenrun; 0 outside one (the reference runs)."""
    return int(os.environ.get("ZEN_ELASTIC_WORKER", "x/0").rsplit("/", 1)[1])


def add_fault_arguments(parser):
    parser.add_argument("--die-worker", type=int, default=-1)
    parser.add_argument("--die-step", type=int, default=-1)
    parser.add_argument("--marker-dir", default=".")


def die_once_at(args, step):
    """Exits 1 (os._exit: no cleanup, as a crash) when this is the worker and step named by
    args and it has not happened yet."""
    if worker_number() != args.die_worker or step != args.die_step:
        return
    marker = os.path.join(args.marker_dir, "died")
    if os.path.exists(marker):
        return
    open(marker, "w").close()
    print(f"DYING worker {worker_number()} at step {step}", flush=True)
    os._exit(1)


def training_main(reference, train, add_arguments=None):
    """A training program's main: `--reference` runs reference() (one process, no zen), else
    train(args) with the fault arguments and add_arguments(parser)'s. Returns 0."""
    p = argparse.ArgumentParser()
    p.add_argument("--reference", action="store_true")
    add_fault_arguments(p)
    if add_arguments is not None:
        add_arguments(p)
    args = p.parse_args()
    if args.reference:
        reference()
    else:
        train(args)
    return 0
