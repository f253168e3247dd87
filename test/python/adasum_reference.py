"""The reference the zen.torch and zen.tensorflow Adasum checks compare with (torch_checks.py,
tf_checks.py): adasum(a, b) = (1 - a.b / (2|a|^2)) a + (1 - a.b / (2|b|^2)) b in float64
(a coefficient is 1 when its vector is zero), over the ranks as a binary tree: ranks (0, 1),
(2, 3), ... combined, then those results pairwise, and so on."""

import numpy as np


def adasum_pair(a, b):
    dot, aa, bb = float(a.dot(b)), float(a.dot(a)), float(b.dot(b))
    ca = 1.0 if aa == 0 else 1.0 - dot / (2 * aa)
    cb = 1.0 if bb == 0 else 1.0 - dot / (2 * bb)
    return ca * a + cb * b


def adasum_tree(vectors):
    """vectors: one flat array per rank (a power of two of them)."""
    v = [np.asarray(x, dtype=np.float64).ravel() for x in vectors]
    d = 1
    while d < len(v):
        for r in range(0, len(v), 2 * d):
            v[r] = adasum_pair(v[r], v[r + d])
        d *= 2
    return v[0]


def assert_close(got, want, dtype_tolerance, what):
    """got (float64 array) within a few units in the last place of the result's dtype,
    relative to the largest magnitude of want."""
    got = np.asarray(got, dtype=np.float64).ravel()
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    assert got.shape == want.shape and np.allclose(got, want, rtol=0,
                                                   atol=dtype_tolerance * scale), \
        (what, got, want)
