"""One rank of test_network_interface*.py's jobs: STEPS Sum allreduces of COUNT floats through
zen.torch (rank r, step s: r+1+s everywhere, so the sum is n(n+1)/2 + n*s), each checked
here; prints `IFACE rank R of N controller HOST:PORT sum ok`. Large enough (4 MiB a step)
that the interface carrying the data plane is plain in `ip -s link`'s byte counts.
"""

import argparse
import os
import sys

import torch

import zen.torch as hvd

COUNT = 1 << 20


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    try:
        hvd.init()
    except Exception as e:  # the message the test looks for, on this rank's stderr
        print(f"INIT FAILED: {e}", file=sys.stderr, flush=True)
        return 1
    n, r = hvd.size(), hvd.rank()
    for step in range(args.steps):
        out = hvd.allreduce(torch.full((COUNT,), float(r + 1 + step)), op=hvd.Sum,
                            name=f"step.{step}")
        expect = n * (n + 1) / 2 + n * step
        if not torch.equal(out, torch.full((COUNT,), expect)):
            print(f"step {step}: expected {expect}, found {out[:4].tolist()}...",
                  file=sys.stderr, flush=True)
            return 1
    print(f"IFACE rank {r} of {n} controller {os.environ['ZEN_CONTROLLER_ADDR']} sum ok",
          flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
