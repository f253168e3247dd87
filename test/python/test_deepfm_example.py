"""examples/torch_deepfm.py (DeepFM on synthetic Zipf click data) on two ranks under zenrun,
for two schemes: the job completes, the loss and the test logloss and AUC improve, every
rank ends with the same parameters (the example prints a SHA-256 prefix per rank), and both
schemes reach the same test metrics (the synchronization is lossless).

Run by CTest as python_torch_deepfm, after the zen_torch fixture (tools/build-python).
"""

import os
import re

import pytest

from rank_jobs import (ROOT, STALL, TORCH_PYTHON, assert_exited_cleanly, rank0_lines,
                       require_zen_torch, steps, zenrun)

SCHEMES = ["zen", "agsparse"]

require_zen_torch()

NUM = r"([0-9.]+)"
SUMMARY = re.compile(r"^\[(\w+)\] \d+ steps in .*; test logloss %s -> %s, "
                     r"AUC %s -> %s$" % (NUM, NUM, NUM, NUM))
DIGESTS = re.compile(r"^\[(\w+)\] parameter sha256 per rank: ([0-9a-f ]+) \(")


@pytest.fixture(scope="module")
def job():
    proc = zenrun(2, TORCH_PYTHON, os.path.join(ROOT, "examples", "torch_deepfm.py"),
                  ["--steps", "40", "--batch-size", "512", "--print-every", "10",
                   "--cardinalities", "1000,10000,100000,1000000",
                   "--test-samples", "4000", "--schemes", ",".join(SCHEMES)],
                  extra_env=dict(STALL, OMP_NUM_THREADS="1"), cwd=ROOT)
    assert_exited_cleanly(proc)
    summary, digests = {}, {}
    for line in rank0_lines(proc):
        m = SUMMARY.match(line)
        if m:
            summary[m.group(1)] = [float(m.group(i)) for i in range(2, 6)]
        m = DIGESTS.match(line)
        if m:
            digests[m.group(1)] = m.group(2).split()
    assert sorted(summary) == sorted(SCHEMES) == sorted(digests), proc.stdout[-4000:]
    return steps(proc), summary, digests


@pytest.mark.parametrize("scheme", SCHEMES)
def test_loss_falls(job, scheme):
    steps, summary, _ = job
    losses = steps[scheme]
    assert [s for s, _ in losses] == [1, 10, 20, 30, 40], losses
    assert losses[-1][1] < losses[0][1] - 0.1, losses
    ll_before, ll_after, auc_before, auc_after = summary[scheme]
    assert ll_after < ll_before - 0.05 and auc_after > auc_before + 0.1, summary[scheme]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_ranks_end_with_identical_parameters(job, scheme):
    _, _, digests = job
    assert len(digests[scheme]) == 2 and len(set(digests[scheme])) == 1, digests[scheme]


def test_schemes_agree(job):
    _, summary, _ = job
    first = summary[SCHEMES[0]]
    for scheme in SCHEMES[1:]:
        assert all(abs(a - b) < 2e-3 for a, b in zip(first, summary[scheme])), summary
