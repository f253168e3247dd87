"""Compression.topk's selection (zen.torch.topk and zen.tensorflow.topk) against the
framework's top-k of the whole tensor: ms per call, median of --reps, one CPU thread, on
|normal| magnitudes of 2^20 and 2^24 elements at several ratios. Run with the framework's
interpreter (Debian's python3 has torch, .venv-tf's TensorFlow):

    PYTHONPATH=bindings/python /usr/bin/python3 bench/topk_select_bench.py --framework torch
    PYTHONPATH=bindings/python .venv-tf/bin/python bench/topk_select_bench.py --framework tf
"""

import argparse
import os
import statistics
import sys
import time

from zen.common.compression import topk_count


def median_ms(fn, reps):
    fn()  # warm-up
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def torch_cases():
    import torch
    import zen.torch.topk as topk
    torch.set_num_threads(1)
    compressor = topk.TopKCompressor()

    def cases(numel, k):
        magnitudes = torch.randn(numel, generator=torch.Generator().manual_seed(1)).abs()
        return (lambda: torch.topk(magnitudes, k, sorted=False).indices,
                lambda: compressor._largest(magnitudes, k))
    return cases


def tf_cases():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import zen.tensorflow.topk as topk

    def cases(numel, k):
        magnitudes = tf.abs(tf.random.stateless_normal([numel], [1, 2]))
        whole = tf.function(lambda: tf.math.top_k(magnitudes, k, sorted=False).indices)
        sampled = tf.function(lambda: topk._largest(magnitudes, k))
        return (lambda: whole().numpy(), lambda: sampled().numpy())
    return cases


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--framework", choices=("torch", "tf"), required=True)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    cases = torch_cases() if args.framework == "torch" else tf_cases()
    print("%10s %7s %9s %12s %12s %7s" % ("numel", "ratio", "k", "whole ms", "zen ms", "ratio"))
    for numel in (1 << 20, 1 << 24):
        for ratio in (0.001, 0.01, 0.04):
            k = topk_count(numel, ratio)
            whole, sampled = cases(numel, k)
            a, b = median_ms(whole, args.reps), median_ms(sampled, args.reps)
            print("%10d %7g %9d %12.1f %12.1f %7.3f" % (numel, ratio, k, a, b, b / a))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
