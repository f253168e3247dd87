#pragma once

// zen_gpu_bench's rows for the GPU schemes (zen, hc, agsparse, dense) on one rank over NcclComm:
// compiled by the host compiler (the transport headers stay out of nvcc), called from
// gpu_bench.cu when NCCL is built in.
#include <cstdint>
#include <functional>

#include "core/status.h"
#include "core/tensor.h"

namespace zen::cuda {

// Times gpuSparseAllreduce of `input` (a dense device tensor) on one rank for each scheme
// (mean over `reps` after one warm-up), dense output into `output` (same shape), and checks
// each result with mismatches() (elements of output that differ from the input: one rank's
// Sum is the input). Prints one row per scheme; fails on a mismatch.
Status benchGpuSchemes(const char* label,
                       const DenseView& input,
                       void* output,
                       int reps,
                       const std::function<uint64_t()>& mismatches);

}  // namespace zen::cuda
