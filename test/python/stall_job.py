"""One rank of zenrun's real stall-shutdown test (test_zenrun_stall.py), under zenrun
--stall-check-warning-time-seconds W --stall-check-shutdown-time-seconds S:

    stall_job.py other      rank 1 allreduces "other", which rank 0 never posts, while rank 0
                            allreduces "grad", which rank 1 never posts: both wait
    stall_job.py late T     rank 1 posts nothing for T seconds (past S), then allreduces
                            "grad", which rank 0 posted at the start (rank 0 stays T
                            seconds after its failure, so that zenrun lets rank 1 get there)

Each rank prints how its allreduce ended and after how many seconds, as one line:
STALL_RESULT {"error": ..., "seconds": ...}, and exits 3 when it failed."""

import json
import os
import sys
import time

import torch

# The checkout's package last: PYTHONPATH (CTest's staged copy in its build directory) first.
sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "bindings", "python"))
import zen.torch as hvd  # noqa: E402

hvd.init()
name = "grad"
if hvd.rank() == 1:
    if sys.argv[1] == "other":
        name = "other"
    else:
        time.sleep(float(sys.argv[2]))
t0 = time.monotonic()
try:
    hvd.allreduce(torch.ones(4), name=name)
    error = None
except Exception as e:  # noqa: BLE001 (the test checks what it was)
    error = f"{type(e).__name__}: {e}"
print("STALL_RESULT " + json.dumps({"error": error, "seconds": time.monotonic() - t0}),
      flush=True)
if sys.argv[1] == "late" and hvd.rank() == 0:
    time.sleep(float(sys.argv[2]))  # zenrun stops the job at the first failed rank: not yet
sys.exit(3 if error else 0)
