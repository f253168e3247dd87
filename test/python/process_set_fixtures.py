"""What torch_process_sets.py and tf_process_sets.py share: the two disjoint sets their
4-rank jobs start with and every rank's known input. Numpy only: it serves either framework."""

import numpy as np


def process_sets(hvd):
    """(A, B, mine) for hvd (zen.torch or zen.tensorflow): A = {0, 1} and B = {2, 3} as its
    process sets, and mine(), this rank's set (A or B) and the other."""
    a = hvd.ProcessSet([0, 1])
    b = hvd.ProcessSet([3, 2])  # any order: ranks [2, 3]

    def mine():
        """This rank's set (A or B) and the other."""
        return (a, b) if hvd.rank() < 2 else (b, a)
    return a, b, mine


def data(rank, shape=(2, 3), seed=0):
    """Rank rank's input: small integers, exact in float32 sums."""
    g = np.random.default_rng(1000 * seed + rank)
    return g.integers(-8, 9, size=shape).astype(np.float32)
