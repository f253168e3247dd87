"""One rank of the real-run timeline test (test_timeline_real.py): a few steps of dense and
sparse allreduce through zen.torch under zenrun, which passed --timeline-filename, --scheme
and the other flags as ZEN_* variables; prints this rank's daemon stats as one JSON line."""

import json
import os
import sys

import torch

# The checkout's package last: PYTHONPATH (CTest's staged copy in its build directory) first.
sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "bindings", "python"))
import zen.torch as hvd  # noqa: E402

hvd.init()
rank, size = hvd.rank(), hvd.size()
torch.manual_seed(rank)
rows = 1000
for step in range(5):
    dense = torch.full((64, 8), float(rank + 1))
    total = hvd.allreduce(dense, name="dense.w", op=hvd.Sum)
    assert torch.equal(total, torch.full((64, 8), float(size * (size + 1) // 2))), total
    idx = torch.randint(0, rows, (50,))
    emb = torch.sparse_coo_tensor(idx.unsqueeze(0), torch.ones(50, 4), (rows, 4))
    reduced = hvd.sparse_allreduce(emb, name="emb.w", op=hvd.Sum).coalesce()
    assert reduced.values().sum().item() == 50 * 4 * size
stats = hvd.stats()
print("ZENTEST_STATS " + json.dumps(stats), flush=True)
hvd.shutdown()
