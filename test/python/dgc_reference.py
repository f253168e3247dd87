"""What torch_topk.py and tf_topk.py check Compression.topk against, in numpy (float64):
gradients known in closed form and Deep Gradient Compression re-computed densely over every
rank, by sorting (not the frameworks' top-k).

The loss is (W * G).sum() + (b * h).sum(), so W's gradient is G and b's is h, drawn from a
generator seeded by (rank, step, pass): every rank can rebuild every rank's gradients.
"""

import numpy as np

from zen.common.compression import topk_sample_plan

SHAPE, BIAS = (40, 50), 10  # W: 2000 elements, compressed; b: 10, below MIN_SIZE: dense
MIN_SIZE = 100


def grads(rank, step, k=0):
    """(G, h): rank's gradient of W and b in pass k of step."""
    rs = np.random.RandomState(100003 * rank + 101 * step + k)
    return rs.standard_normal(SHAPE), rs.standard_normal(BIAS)


def step_grads(rank, step, passes=1):
    """rank's gradients of one step, summed over its passes."""
    pairs = [grads(rank, step, k) for k in range(passes)]
    return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


def clip_factor(size, rank, step, passes, clip_norm):
    """DGC's local gradient clipping of rank's step: its gradients (W's and b's) are scaled
    by this, so that their global norm is at most clip_norm / sqrt(size); 1 without
    clip_norm."""
    if clip_norm is None:
        return 1.0
    g, h = step_grads(rank, step, passes)
    norm = np.sqrt(np.sum(g * g) + np.sum(h * h))
    return min(1.0, clip_norm / np.sqrt(size) / (norm + 1e-6))


def dgc_reference(size, steps, ratio, passes=1, momentum=0.0, masking=True, nesterov=False,
                  clip_norm=None):
    """DGC of W over every rank: (W's averaged update per step, every rank's final residual,
    flattened). ratio: one for every step, or a list of one per step (DGC's warm-up);
    nesterov: the residual gains g + momentum * u instead of u; clip_norm: each rank's
    gradients clipped first (clip_factor)."""
    numel = SHAPE[0] * SHAPE[1]
    ratios = ratio if isinstance(ratio, list) else [ratio] * steps
    residuals = [np.zeros(numel) for _ in range(size)]
    momenta = [np.zeros(numel) for _ in range(size)]
    updates = []
    for step in range(steps):
        k = min(numel, max(1, round(numel * ratios[step])))
        total = np.zeros(numel)
        for r in range(size):
            g = step_grads(r, step, passes)[0].reshape(-1) * \
                clip_factor(size, r, step, passes, clip_norm)
            momenta[r] = momentum * momenta[r] + g
            residuals[r] = residuals[r] + (g + momentum * momenta[r] if nesterov else momenta[r])
            chosen = np.argsort(-np.abs(residuals[r]), kind="stable")[:k]
            total[chosen] += residuals[r][chosen]
            residuals[r][chosen] = 0
            if momentum and masking:
                momenta[r][chosen] = 0
        updates.append((total / size).reshape(SHAPE))
    return updates, residuals


def check_clipped_updates(updates, size, ratio, passes, momentum, clip_norm, assert_close,
                          label):
    """updates (W's and b's synchronized gradient per step) under Compression.topk(clip_norm)
    against dgc_reference with clipping (W) and the average of the clipped b gradients (with
    momentum: of the momenta); every rank's gradients must have been clipped. assert_close:
    the framework's (got, want, what)."""
    want, _ = dgc_reference(size, len(updates), ratio, passes, momentum=momentum,
                            clip_norm=clip_norm)
    velocity = np.zeros(BIAS)
    for step, ((uw, ub), ref) in enumerate(zip(updates, want)):
        factors = [clip_factor(size, r, step, passes, clip_norm) for r in range(size)]
        assert max(factors) < 0.95, factors
        what = "step %d (%s)" % (step, label)
        assert_close(uw, ref, "W's update of " + what)
        g = sum(step_grads(r, step, passes)[1] * f for r, f in enumerate(factors)) / size
        velocity = momentum * velocity + g
        assert_close(ub, velocity, "b's update of " + what)


def largest(values, k):
    """The indices of the k elements of values (1-D) largest in magnitude, as a set."""
    return set(np.argsort(-np.abs(values), kind="stable")[:k].tolist())


SAMPLED_NUMEL = 1 << 20  # the sampled selection's checks: tensors of this many elements


def sampled_cases():
    """(label, k, plan) for the sampled selection's checks: each ratio's plan as
    topk_sample_plan makes it, then with the threshold at the sample's largest (fewer than k
    reach it: the whole tensor's top-k)."""
    for ratio in (0.005, 0.02, 0.1):
        k = round(SAMPLED_NUMEL * ratio)
        plan = topk_sample_plan(SAMPLED_NUMEL, k)
        assert plan is not None, k
        yield "%g" % ratio, k, plan
        yield "%g (forced)" % ratio, k, (plan[0], 1)
