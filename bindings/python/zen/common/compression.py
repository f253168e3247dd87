"""Gradient compression for allreduce, as horovod's compression modules, for any framework:
the interface and the framework-independent logic. zen.torch.compression and
zen.tensorflow.compression add the framework's dtypes and casts."""


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
