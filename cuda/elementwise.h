#pragma once

// Small element-wise kernels the NCCL backend and the GPU schemes need around the bigger
// algorithms: the integer Average after an NCCL Sum, the index range check of an input, and
// the reduce op's identity in a joined rank's slots.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/message.h"
#include "core/status.h"

namespace zen::cuda {

// data[i] /= divisor for `count` int32 / int64 elements (truncation toward zero, like the
// CPU's divideInPlace); other dtypes are kInvalidArgument. Async on `stream`.
Status launchDivideIntegers(
    void* data, size_t count, DataType dtype, int divisor, cudaStream_t stream);

// *firstBad = min(*firstBad, i) over entries i with indices[i] outside [0, numRows) (device
// memory; initialise *firstBad to all ones). Async on `stream`.
Status launchFindBadIndex(const int64_t* indices,
                          int64_t count,
                          int64_t numRows,
                          unsigned long long* firstBad,
                          cudaStream_t stream);

// Fills `count` elements of `dtype` with op's identity (ops::fillIdentity's values: +inf for
// Min, 1 for Product, ...). Async on `stream`.
Status launchFillIdentity(
    void* data, size_t count, DataType dtype, ReduceOp op, cudaStream_t stream);

}  // namespace zen::cuda
