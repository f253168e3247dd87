"""Gradient compression for allreduce, as horovod.torch.compression."""

import torch

from zen.common.compression import Compressor, FP16CompressorBase, NoneCompressor
from zen.torch.topk import TopKCompressor

__all__ = ["Compression", "Compressor", "FP16Compressor", "NoneCompressor", "TopKCompressor"]


class FP16Compressor(FP16CompressorBase):
    """Floating-point tensors travel as float16 (half the bytes), integers unchanged."""

    float16 = torch.float16

    @staticmethod
    def is_floating(dtype):
        return dtype.is_floating_point

    @staticmethod
    def cast(tensor, dtype):
        return tensor.type(dtype)


class Compression:
    """Compression algorithms for DistributedOptimizer and allreduce. topk(ratio) is a
    stateful instance (Deep Gradient Compression into Zen's sparse allreduce, for
    DistributedOptimizer: zen.torch.topk)."""

    none = NoneCompressor
    fp16 = FP16Compressor
    topk = TopKCompressor
