"""examples/torch_elastic_word_lm.py (the word-LM under zen.torch.elastic) twice: under a plain
`zenrun -np 2`, and under `zenrun -np 3 --min-np 2 --max-np 3` where worker 1 crashes before
step 8 (last commit at step 5). Both jobs exit 0; the survivors restore the commit, go on as 2
ranks from step 6 and end with identical parameters; and the loss of every step, before and
after the recovery, is the plain run's.

Why a tolerance and which: the example's global batch makes a step the same step for any number
of ranks (the same windows, the loss summed over them / the global batch, gradients summed), so
the runs differ only in the order of float32 sums (3 ranks' partial sums against 2's, and
sums inside the smaller local batches). That moves the printed loss by at most 1e-6 over these
20 steps (seen; the last printed digit); LOSS_TOLERANCE is 1e-3, far above that and far below
what one step changes the loss by here (0.03 to 0.5), so a lost, repeated or mis-restored step
fails the test.

Run by CTest as python_elastic_word_lm_example, after the zen_torch fixture (tools/build-python).
"""

import os
import re

import pytest

from rank_jobs import (CHECK_ENV, FORTUNES, ROOT, TORCH_PYTHON, assert_exited_cleanly,
                       rank0_lines, require_zen_torch, steps, zenrun)

require_zen_torch()

EXAMPLE = os.path.join(ROOT, "examples", "torch_elastic_word_lm.py")
ARGS = ["--steps", "20", "--vocab", "2000", "--print-every", "1", "--commit-every", "5"]
LOSS_TOLERANCE = 1e-3
DIGESTS = re.compile(r"^\[elastic\] parameter sha256 per rank: ([0-9a-f ]+) \(")
RECOVERED = re.compile(r"^\[elastic\] recovered: .* step (\d+) at ")


def run(np, flags=(), args=()):
    if not os.path.isdir(FORTUNES):
        pytest.skip("Debian's fortunes package is not installed (tools/setup)")
    proc = zenrun(np, TORCH_PYTHON, EXAMPLE, ARGS + list(args), flags, CHECK_ENV, timeout=240,
                  cwd=ROOT)
    assert_exited_cleanly(proc)
    return proc


def digests(proc):
    found = [m.group(1).split() for m in map(DIGESTS.match, rank0_lines(proc)) if m]
    assert len(found) == 1, proc.stdout[-4000:]
    return found[0]


@pytest.fixture(scope="module")
def plain():
    return run(2)


@pytest.fixture(scope="module")
def crashed():
    return run(3, ["--min-np", "2", "--max-np", "3"], ["--die-worker", "1", "--die-step", "8"])


def test_plain_zenrun(plain):
    losses = steps(plain)["elastic"]
    assert [s for s, _ in losses] == list(range(1, 21)), losses
    assert losses[-1][1] < losses[0][1] - 1.0, losses  # it learns
    got = digests(plain)
    assert len(got) == 2 and len(set(got)) == 1, got


def test_crash_recovers_on_two_ranks(crashed):
    assert "DYING worker 1 before step 8" in crashed.stdout, crashed.stdout[-4000:]
    assert "worker 1 (localhost/1/1) exited with code 1" in crashed.stderr, crashed.stderr[-4000:]
    # Steps 1-7 on 3 ranks, then from the commit at step 5: 6-20 on 2.
    losses = steps(crashed)["elastic"]
    assert [s for s, _ in losses] == list(range(1, 8)) + list(range(6, 21)), losses
    assert [int(m.group(1)) for m in map(RECOVERED.match, rank0_lines(crashed)) if m] == [6]
    assert any(line.startswith("[elastic] 20 steps on 2 ranks") for line in rank0_lines(crashed))
    got = digests(crashed)
    assert len(got) == 2 and len(set(got)) == 1, got


def test_loss_curve_continues(plain, crashed):
    want = dict(steps(plain)["elastic"])
    got = steps(crashed)["elastic"]
    for step, loss in got:
        assert abs(loss - want[step]) <= LOSS_TOLERANCE, (step, loss, want[step], got)
