"""What the ranks of test_zenrun_ssh.py run.

    ssh_job.py allreduce ARGS...
        zen.torch: init, allreduce (sum) of [rank + 1, 10 * (rank + 1)], then one stdout line
        `REPORT {...}`: rank, size, the sum, the rank's network namespace and pid, ARGS as
        received, $ZENTEST_ODD, and the length and sha256 of $ZENTEST_BIG.
    ssh_job.py part --pid-dir D ROLE0 ROLE1 ...
        every rank writes D/rank.R (its pid) and waits until all have, then plays its role:
        exit:N (exits N), kill (SIGKILL to itself), sleep (sleeps; on SIGTERM or SIGINT
        prints `rank R got SIGTERM` or `rank R got SIGINT` and sleeps on, so that only
        SIGKILL ends it).
"""

import hashlib
import json
import os
import signal
import sys
import time


def allreduce(args):
    import torch
    import zen.torch as zt

    zt.init()
    rank = zt.rank()
    total = zt.allreduce(torch.tensor([rank + 1.0, 10.0 * (rank + 1)]), op=zt.Sum)
    big = os.environ.get("ZENTEST_BIG", "")
    print("REPORT " + json.dumps({
        "rank": rank, "size": zt.size(), "sum": total.tolist(),
        "netns": os.readlink("/proc/self/ns/net"), "pid": os.getpid(), "args": args,
        "odd": os.environ.get("ZENTEST_ODD"), "big_len": len(big),
        "big_sha": hashlib.sha256(big.encode()).hexdigest()}), flush=True)
    zt.shutdown()


def part(folder, roles):
    rank = int(os.environ["ZEN_RANK"])
    role = roles[rank]
    if role == "sleep":
        def on_signal(sig, _frame):
            print(f"rank {rank} got {signal.Signals(sig).name}", flush=True)

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    with open(os.path.join(folder, f"rank.{rank}.tmp"), "w") as f:
        f.write(str(os.getpid()))
    os.rename(os.path.join(folder, f"rank.{rank}.tmp"), os.path.join(folder, f"rank.{rank}"))
    deadline = time.monotonic() + 60
    while len([f for f in os.listdir(folder) if f.startswith("rank.") and
               not f.endswith(".tmp")]) < len(roles):
        if time.monotonic() > deadline:
            sys.exit("ssh_job: not every rank wrote its pid within 60 s")
        time.sleep(0.02)
    if role.startswith("exit:"):
        sys.exit(int(role[5:]))
    if role == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    while True:
        time.sleep(1)


def main():
    if sys.argv[1] == "allreduce":
        allreduce(sys.argv[2:])
    elif sys.argv[1] == "part" and sys.argv[2] == "--pid-dir":
        part(sys.argv[3], sys.argv[4:])
    else:
        sys.exit(f"ssh_job: unknown arguments {sys.argv[1:]}")


if __name__ == "__main__":
    main()
