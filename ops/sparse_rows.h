#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
#include "core/radix_sort.h"
#include "core/status.h"
#include "core/tensor.h"

namespace zen::ops {

// Local row arithmetic shared by the sparse allreduce schemes and the dispatcher's size == 1
// path. Sums run in the accumulator type (fp32 for fp16/bf16, fp64, int64) and are rounded to
// the dtype once; `divisor` is 1 for Sum and n for Average: floats are multiplied by 1/n in the
// accumulator type, integers divided with truncation toward zero.

// coalesceRows' sort memory (16 bytes per entry, twice), kept by callers that coalesce every
// step (the schemes, through SparseAllreduceWorkspace) so that it is not allocated, and
// page-faulted in, on every call.
struct CoalesceScratch {
  std::vector<KeyValue> order;
  std::vector<KeyValue> sorted;
};

// Sums every (index, row) of `inputs` (same numRows, rowSize and dtype; indices already
// validated) into `out`: coalesced, indices ascending, one row per index any input holds.
// Rows of one index are added in input order, then entry order, so every rank that
// coalesces the same inputs gets the same bits.
// scratch: null for memory of this call only.
Status coalesceRows(const std::vector<SparseView>& inputs,
                    int divisor,
                    SparseTensor* out,
                    CoalesceScratch* scratch = nullptr);

// An empty tensor of the input's shape and dtype.
SparseTensor emptyLike(const SparseView& in);

// data[i] = data[i] / divisor for `count` elements (Average after a Sum).
void divideInPlace(void* data, size_t count, DataType dtype, int divisor);

// acc row (accumulator type) -> dtype row, divided by divisor: the one rounding.
template <typename T, typename Acc>
void finishRow(const Acc* acc, int64_t rowSize, int divisor, T* out) {
  if (divisor == 1) {
    for (int64_t e = 0; e < rowSize; ++e) out[e] = fromAccumulator<T>(acc[e]);
  } else if constexpr (std::is_integral_v<Acc>) {
    for (int64_t e = 0; e < rowSize; ++e) out[e] = static_cast<T>(acc[e] / divisor);
  } else {
    const Acc scale = static_cast<Acc>(1.0 / divisor);
    for (int64_t e = 0; e < rowSize; ++e) out[e] = fromAccumulator<T>(acc[e] * scale);
  }
}

}  // namespace zen::ops
