"""Gradient compression for allreduce, as horovod's compression modules, for any framework:
the interface and the framework-independent logic. zen.torch.compression and
zen.tensorflow.compression add the framework's dtypes and casts."""

import math


class Compressor:
    """Interface: compress a tensor before allreduce, decompress the result."""

    @staticmethod
    def compress(tensor):
        """Returns (compressed tensor, context for decompress)."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        """Returns the tensor in its original form."""
        raise NotImplementedError


class NoneCompressor(Compressor):
    """No compression."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16CompressorBase(Compressor):
    """Floating-point tensors travel as float16 (half the bytes), integers unchanged.

    A framework's subclass sets `float16` (its dtype) and defines `is_floating(dtype)` and
    `cast(tensor, dtype)`."""

    float16 = None

    @staticmethod
    def is_floating(dtype):
        raise NotImplementedError

    @staticmethod
    def cast(tensor, dtype):
        raise NotImplementedError

    @classmethod
    def compress(cls, tensor):
        if cls.is_floating(tensor.dtype):
            return cls.cast(tensor, cls.float16), tensor.dtype
        return tensor, tensor.dtype

    @classmethod
    def decompress(cls, tensor, ctx):
        if ctx is not None and cls.is_floating(ctx) and tensor.dtype != ctx:
            return cls.cast(tensor, ctx)
        return tensor


def check_topk_ratio(ratio):
    """ValueError for a top-k compressor's bad ratio (on every rank: it is local)."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
        raise ValueError("Compression.topk: ratio must be in (0, 1], the fraction of each "
                         "gradient's elements sent per step; got %r" % (ratio,))


def check_topk_args(ratio, min_size, momentum, nesterov=False, clip_norm=None):
    """ValueError for a top-k compressor's bad arguments (on every rank: they are local)."""
    check_topk_ratio(ratio)
    if isinstance(min_size, bool) or not isinstance(min_size, int) or min_size < 1:
        raise ValueError("Compression.topk: min_size must be a positive int (tensors with "
                         "fewer elements go dense); got %r" % (min_size,))
    if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) or \
            not 0 <= momentum < 1:
        raise ValueError("Compression.topk: momentum must be in [0, 1); got %r" % (momentum,))
    if nesterov and not momentum:
        raise ValueError("Compression.topk: nesterov=True needs a momentum > 0")
    if clip_norm is not None and (isinstance(clip_norm, bool) or
                                  not isinstance(clip_norm, (int, float)) or
                                  not 0 < clip_norm < math.inf):
        raise ValueError("Compression.topk: clip_norm must be None or a positive number (the "
                         "global L2 norm the gradients are clipped to); got %r" % (clip_norm,))


# The clipping factor is min(1, threshold / (norm + CLIP_EPSILON)), as
# torch.nn.utils.clip_grad_norm_ (the epsilon keeps an all-zero step finite).
CLIP_EPSILON = 1e-6


class TopKCompressorBase(Compressor):
    """A top-k compressor's arguments and per-key state (zen.torch.topk and
    zen.tensorflow.topk: the residual and momentum dicts hold the framework's tensors, keyed
    by parameter or by allreduce name); the subclass compresses. ratio may be set between
    steps (DGC's warm-up: e.g. 0.25, 0.0625, 0.0156, 0.004, then 0.001 over the first
    epochs); the residuals stay, so what was not sent yet is still sent later.

    clip_norm is DGC's local gradient clipping: the optimizers scale each rank's dense
    gradients of a step, before they enter the momentum and the residual, so that their global
    L2 norm is at most clip_norm / sqrt(N) over N ranks (the rank's share of a global
    clip_norm if every rank's gradients were alike); the subclass's clip_scale computes the
    factor, compress(..., scale) applies it."""

    def __init__(self, ratio=0.01, min_size=1024, momentum=0.0, momentum_masking=True,
                 nesterov=False, clip_norm=None):
        check_topk_args(ratio, min_size, momentum, nesterov, clip_norm)
        self._ratio = float(ratio)
        self.min_size = min_size
        self.momentum = float(momentum)
        self.momentum_masking = bool(momentum_masking)
        self.nesterov = bool(nesterov)
        self.clip_norm = None if clip_norm is None else float(clip_norm)
        self._residuals = {}
        self._momenta = {}

    @property
    def ratio(self):
        """The fraction of each compressed gradient's elements sent per step."""
        return self._ratio

    @ratio.setter
    def ratio(self, ratio):
        check_topk_ratio(ratio)
        self._ratio = float(ratio)

    def __repr__(self):
        return ("Compression.topk(ratio=%g, min_size=%d, momentum=%g, momentum_masking=%s, "
                "nesterov=%s, clip_norm=%s)" % (self.ratio, self.min_size, self.momentum,
                                                self.momentum_masking, self.nesterov,
                                                self.clip_norm))

    def clip_threshold(self, size):
        """The L2 norm a rank's gradients of a step are clipped to over size ranks (DGC:
        clip_norm scaled by size^-1/2), or None without clip_norm."""
        return None if self.clip_norm is None else self.clip_norm / math.sqrt(size)

    def residual(self, key):
        """What key's gradients have not sent yet (flattened), or None before its first."""
        return self._residuals.get(key)

    def momentum_buffer(self, key):
        """key's momentum u (flattened), or None (momentum 0, or before the first step)."""
        return self._momenta.get(key)


def check_topk_called(compression, topk_class):
    """ValueError for compression=Compression.topk itself (topk_class, not an instance)."""
    if isinstance(compression, type) and issubclass(compression, topk_class):
        raise ValueError("compression=Compression.topk needs its ratio: "
                         "compression=Compression.topk(0.01)")


def topk_count(numel, ratio):
    """Elements a top-k compressor sends of a tensor of numel: ceil(numel * ratio), at least
    one (ratio 1.0 sends all). Rounded first, so that 1000 * 0.01 is 10, not 11."""
    return min(numel, max(1, math.ceil(round(numel * ratio, 6))))


# The k largest of n magnitudes by a sampled threshold (both frameworks' top-k): a uniform
# sample of m elements in which SAMPLE_HITS are expected above the true k-th largest; the
# threshold is the sample's r-th largest, r = SAMPLE_HITS + 4 standard deviations, so at
# least k elements reach it but for about 3 in 10^5 calls (then the whole tensor's top-k).
# The k largest of those candidates are the k largest of all: an exact top-k that sorts
# about 1.4 k candidates instead of selecting among n.
SAMPLE_HITS = 128
SAMPLE_MIN_NUMEL = 1 << 16  # below, a top-k of all costs little


def topk_sample_plan(numel, k):
    """(m, r): sample m of numel and threshold at its r-th largest, or None where a top-k of
    all is cheaper: small tensors, and small k (k < 32 * SAMPLE_HITS, which a sample of more
    than 1/32 of the tensor would need), which the frameworks' heap selection finds fast."""
    m = math.ceil(SAMPLE_HITS * numel / k)
    if numel < SAMPLE_MIN_NUMEL or m > numel // 32:
        return None
    return m, SAMPLE_HITS + math.ceil(4 * math.sqrt(SAMPLE_HITS))
