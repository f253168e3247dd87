"""Gradient compression for allreduce, as horovod.tensorflow.compression."""

import tensorflow as tf

from zen.common.compression import Compressor, FP16CompressorBase, NoneCompressor
from zen.tensorflow.topk import TopKCompressor

__all__ = ["Compression", "Compressor", "FP16Compressor", "NoneCompressor", "TopKCompressor"]


class FP16Compressor(FP16CompressorBase):
    """Floating-point tensors travel as float16 (half the bytes), integers unchanged."""

    float16 = tf.float16

    @staticmethod
    def is_floating(dtype):
        return dtype.is_floating

    @staticmethod
    def cast(tensor, dtype):
        return tf.cast(tensor, dtype)


class Compression:
    """Compression algorithms for allreduce, DistributedGradientTape and
    DistributedOptimizer."""

    none = NoneCompressor
    fp16 = FP16Compressor
    topk = TopKCompressor  # topk(ratio): a stateful instance (zen.tensorflow.topk)
