"""examples/torch_deepfm.py (DeepFM on synthetic Zipf click data) on two ranks under zenrun,
for two schemes: the job completes, the loss and the test logloss and AUC improve, every
rank ends with the same parameters (the example prints a SHA-256 prefix per rank), and both
schemes reach the same test metrics (the synchronization is lossless).

Run by CTest as python_torch_deepfm, after the zen_torch fixture (tools/build-python).
"""

import os
import re
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ZENRUN = os.path.join(ROOT, "tools", "zenrun")
PYTHON = "/usr/bin/python3"
SCHEMES = ["zen", "agsparse"]

pytest.importorskip("torch")
if not os.path.exists(os.path.join(ROOT, "bindings", "python", "zen", "lib", "libzen.so")):
    pytest.skip("zen.torch is not built here: run tools/build-python", allow_module_level=True)

NUM = r"([0-9.]+)"
STEP = re.compile(r"^\[0\]<stdout>:\[(\w+)\] step +(\d+)  loss " + NUM)
SUMMARY = re.compile(r"^\[0\]<stdout>:\[(\w+)\] \d+ steps in .*; test logloss %s -> %s, "
                     r"AUC %s -> %s$" % (NUM, NUM, NUM, NUM))
DIGESTS = re.compile(r"^\[0\]<stdout>:\[(\w+)\] parameter sha256 per rank: ([0-9a-f ]+) \(")


@pytest.fixture(scope="module")
def job():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEN_", "ZENRUN_"))}
    env.update({"ZEN_STALL_CHECK_TIME_SECONDS": "5", "ZEN_STALL_SHUTDOWN_TIME_SECONDS": "20",
                "OMP_NUM_THREADS": "1", "PYTHONPATH": os.path.join(ROOT, "bindings", "python")})
    proc = subprocess.run([ZENRUN, "-np", "2", PYTHON,
                           os.path.join(ROOT, "examples", "torch_deepfm.py"),
                           "--steps", "40", "--batch-size", "512", "--print-every", "10",
                           "--cardinalities", "1000,10000,100000,1000000",
                           "--test-samples", "4000", "--schemes", ",".join(SCHEMES)],
                          capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
    assert proc.returncode == 0, "zenrun exited %d\n%s\n%s" % (
        proc.returncode, proc.stdout[-3000:], proc.stderr[-4000:])
    steps, summary, digests = {}, {}, {}
    for line in proc.stdout.splitlines():
        m = STEP.match(line)
        if m:
            steps.setdefault(m.group(1), []).append((int(m.group(2)), float(m.group(3))))
        m = SUMMARY.match(line)
        if m:
            summary[m.group(1)] = [float(m.group(i)) for i in range(2, 6)]
        m = DIGESTS.match(line)
        if m:
            digests[m.group(1)] = m.group(2).split()
    assert sorted(summary) == sorted(SCHEMES) == sorted(digests), proc.stdout[-4000:]
    return steps, summary, digests


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
