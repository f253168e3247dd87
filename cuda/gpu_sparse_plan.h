#pragma once

// Host-side logic of the GPU sparse allreduce (cuda/gpu_sparse_allreduce*.cc) in plain C++,
// checked by test/cuda_host on every machine: the call summary every rank allgathers and its
// verdict, scheme resolution, and the layout of the v-collectives' receive buffers.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/config.h"
#include "core/message.h"
#include "core/status.h"

namespace zen::cuda {

// One rank's call, 128 bytes on the wire (ncclAllGather).
struct GpuCallSummary {
  uint64_t numRows = 0;
  uint64_t rowSize = 0;
  uint64_t dtype = 0;
  uint64_t op = 0;
  uint64_t scheme = 0;
  uint64_t seed = 0;
  uint64_t nnz = 0;
  // First entry whose index is outside [0, numRows), all ones when none; and that index.
  uint64_t badEntry = ~uint64_t{0};
  int64_t badIndex = 0;
  uint64_t reserved[7] = {};
};
static_assert(sizeof(GpuCallSummary) == 128, "the summary's wire size");

// The verdict every rank reaches from the same gathered summaries: kInvalidArgument naming the
// first rank with an out-of-range index, or the first rank whose numRows / rowSize / dtype /
// op / scheme / seed differs from rank 0's ("rank 2 passed dtype float16, rank 0 float32").
// *totalNnz = the sum of every rank's nnz.
Status checkGpuCallSummaries(const std::vector<GpuCallSummary>& all, uint64_t* totalNnz);

// kAuto -> kZen; every other scheme as it is (kUnimplemented for a value outside the enum).
Result<Scheme> resolveGpuScheme(Scheme requested);

// offsets[0] = 0, offsets[i + 1] = offsets[i] + counts[i] * unitBytes: where each peer's
// segment starts in one receive buffer; the last entry is the buffer's size.
std::vector<size_t> segmentOffsets(const std::vector<uint64_t>& counts, size_t unitBytes);

// max / mean of counts (1 for an empty or all-zero list): the push-side imbalance.
double imbalanceOf(const std::vector<uint64_t>& counts);

}  // namespace zen::cuda
